// libsystemd (Debian: libsystemd-dev): sd-daemon (notify, booted), sd-journal, sd-login, sd-bus.
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <systemd/sd-login.h>
#include <systemd/sd-bus.h>
