// Declarations of libc (glibc >= 2.36, libc6-dev) that Swift's Glibc module does not import.
// Nothing to link: the functions live in libc itself.
#ifndef CURFEW_CLINUX_SHIM_H
#define CURFEW_CLINUX_SHIM_H

#include <signal.h>
#include <stddef.h>
#include <time.h>
#include <sys/pidfd.h>

// <stdlib.h> declares these only under _XOPEN_SOURCE, which the Glibc module is built without; the
// prototypes are the ones of glibc's stdlib.h (pseudo-terminals: posix_openpt(3), ptsname(3)).
extern int posix_openpt(int __oflag);
extern int grantpt(int __fd);
extern int unlockpt(int __fd);
extern int ptsname_r(int __fd, char *__buf, size_t __buflen);

// <sys/socket.h> declares accept4 only under _GNU_SOURCE (accept4(2)): an accepted descriptor that is
// non-blocking and close-on-exec from its first instant. Not by including <sys/socket.h> here: this
// module would then own its declarations (SOCK_STREAM, ...) and hide them from files that import only
// Glibc. socklen_t is glibc's unsigned int.
struct sockaddr;
extern int accept4(int __fd, struct sockaddr *__addr, unsigned int *__addr_len, int __flags);

// eventfd(2): <sys/eventfd.h> is not part of Swift's Glibc module. The flags are those of
// <bits/eventfd.h> (O_CLOEXEC and O_NONBLOCK on every architecture Debian builds for but alpha,
// sparc, parisc and mips).
extern int eventfd(unsigned int __count, int __flags);
#define CURFEW_EFD_CLOEXEC 02000000
#define CURFEW_EFD_NONBLOCK 00004000

// timerfd(2): <sys/timerfd.h> is not part of Swift's Glibc module either (struct itimerspec comes from
// <time.h>, which is). The flags are those of <bits/timerfd.h>, the same values as eventfd's.
extern int timerfd_create(int __clock_id, int __flags);
extern int timerfd_settime(int __ufd, int __flags, const struct itimerspec *__utmr, struct itimerspec *__otmr);
#define CURFEW_TFD_CLOEXEC 02000000
#define CURFEW_TFD_NONBLOCK 00004000

// fanotify(7): fanotify_init(2), fanotify_mark(2), struct fanotify_event_metadata and
// struct fanotify_response, and the FAN_* constants (<linux/fanotify.h>, linux-libc-dev). Swift's Glibc
// module does not include <sys/fanotify.h>; it declares nothing the Glibc module also declares.
#include <sys/fanotify.h>

#endif
