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

// Signalling every process of a user as that user (kill(2) with pid -1 from a helper that took the
// user's uid): `curfew_signal_every_process_as` below. Only system calls, no glibc state: the helper
// is a raw clone(2) of a multithreaded process, in which only async-signal-safe work is allowed.
#include <errno.h>
#include <sys/syscall.h>
extern long syscall(long __sysno, ...);

// Starts a helper process (clone(2) with SIGCHLD, no new stack: a copy of this one, like fork(2) but
// without glibc's fork handlers) that closes every descriptor it inherited, drops its supplementary
// groups, takes `gid` and `uid` as its real, effective and saved ids, and sends `sig` to every process
// it may signal: kill(-1, sig). As an unprivileged user that is every process whose real or saved uid
// is `uid` (and every process in the user namespaces `uid` owns), in one pass under the kernel's task
// list lock, so a process forking meanwhile cannot slip out. The helper never signals as root: it
// exits 125 if any id change fails or it is still uid 0. Its exit status: 0 signalled, 3 none to
// signal (ESRCH), 124 another kill(2) error.
// Returns the helper's PID (the caller reaps it), or -1 with errno.
static inline int curfew_signal_every_process_as(unsigned int uid, unsigned int gid, int sig) {
    long pid = syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
    if (pid != 0) return (int)pid;
    syscall(SYS_close_range, 0L, (long)~0U, 0L);
    if (uid == 0 || syscall(SYS_setgroups, 0L, 0L) != 0 || syscall(SYS_setresgid, (long)gid, (long)gid, (long)gid) != 0
        || syscall(SYS_setresuid, (long)uid, (long)uid, (long)uid) != 0 || syscall(SYS_getuid) == 0 || syscall(SYS_geteuid) == 0) {
        syscall(SYS_exit_group, 125L);
    }
    long result = syscall(SYS_kill, -1L, (long)sig);
    syscall(SYS_exit_group, result == 0 ? 0L : (errno == ESRCH ? 3L : 124L));
    return -1;
}

#endif
