#!/bin/bash
# Boots a Debian root (from rootfs.sh) with systemd as PID 1 under systemd-nspawn, on a machine whose
# PID 1 is not systemd (no host logind, no system bus, no machined), so tests can talk to a real
# systemd-logind on the container's real system bus.
#
#   boot.sh start ROOT BINDIR [OWNER_PID]   boots; prints a handle (a directory) once systemd is up.
#                                           BINDIR is bound read-only at /opt/curfew. The container is
#                                           shut down when OWNER_PID (default: the caller) exits.
#   boot.sh exec HANDLE CMD [ARG...]        runs CMD inside (every namespace of the container's PID 1,
#                                           a clean environment); exits with CMD's status.
#   boot.sh stop HANDLE                     poweroff, SIGKILL after a deadline; removes HANDLE.
#   boot.sh run ROOT BINDIR CMD [ARG...]    start, exec CMD, stop (for people at a shell).
#
# How, and why:
# - `unshare --mount --propagation private` gives nspawn a mount namespace of its own: every mount below
#   (a tmpfs over /run/systemd, the overlay root) exists only there and disappears with its last
#   process, so nothing is left mounted on the host even when this script is killed.
# - The tmpfs over /run/systemd hides whatever the host has there, so nspawn never tries to talk to a
#   host systemd or machined; `--register=no --keep-unit` stop it from asking for a scope or a machine
#   registration over a system bus the host does not have.
# - The root is the lower layer of an overlayfs whose upper layer is on a tmpfs: the cached root stays
#   pristine, and a run's writes cost nothing to throw away.
# - `--console=pipe` connects the container's console to our log file; `--private-network` leaves it
#   only a loopback interface.
# - A supervisor process (setsid, outside the container) owns nspawn; it shuts the container down on
#   `stop`, when nspawn exits, or when OWNER_PID disappears (a test that crashed), and only then exits.
set -euo pipefail

SELF=$(readlink -f "$0")
BOOT_TIMEOUT=${CURFEW_CONTAINER_BOOT_TIMEOUT:-90}
STOP_TIMEOUT=${CURFEW_CONTAINER_STOP_TIMEOUT:-20}
CLEAN_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

die() { echo "boot.sh: $*" >&2; exit 1; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
# Zombies answer kill -0; a process that has exited but is not yet reaped is gone for our purposes.
running() { alive "$1" && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# Inside the private mount namespace: mounts, then nspawn (exec, so nspawn keeps this PID).
inner() {
    local handle=$1 root=$2 bindir=$3
    if [ -d /run/systemd ]; then
        mount -t tmpfs -o mode=0755 curfew-run-systemd /run/systemd
    else
        # Nothing to hide; but nspawn writes under /run/systemd, which must not appear on the host.
        mount -t tmpfs -o mode=0755 curfew-run /run
    fi
    mount -t tmpfs -o mode=0700 curfew-overlay "$handle/fs"
    mkdir "$handle/fs/upper" "$handle/fs/work" "$handle/fs/root"
    mount -t overlay curfew-root -o "lowerdir=$root,upperdir=$handle/fs/upper,workdir=$handle/fs/work" \
        "$handle/fs/root"
    # fanotify_init and fanotify_mark, which nspawn's own system call filter refuses (EPERM) to the
    # container: curfewd's exec guard is tried as the unit ships it.
    exec systemd-nspawn --boot --register=no --keep-unit --private-network --console=pipe \
        --system-call-filter="fanotify_init fanotify_mark" \
        --machine=curfew-test --directory="$handle/fs/root" --bind-ro="$bindir:/opt/curfew" \
        --setenv=SYSTEMD_COLORS=0
}

# Descriptors the caller leaked to us (a test runner's pipes, say) must not live on in the supervisor,
# nspawn or the container: a reader waiting for their end of file would wait for the container.
close_inherited_fds() {
    local fd
    for fd in "/proc/$$/fd"/*; do
        fd=${fd##*/}
        if [ "$fd" -gt 2 ] 2> /dev/null; then eval "exec $fd>&-" 2> /dev/null || true; fi
    done
}

supervise() {
    local handle=$1 root=$2 bindir=$3 owner=$4
    trap '' HUP INT PIPE
    close_inherited_fds
    echo $$ > "$handle/supervisor.pid"
    unshare --mount --propagation private -- "$SELF" _inner "$handle" "$root" "$bindir" \
        < /dev/null >> "$handle/console.log" 2>&1 &
    local nspawn=$! leader="" pid reason
    echo "$nspawn" > "$handle/nspawn.pid"
    while :; do
        if ! running "$nspawn"; then reason="nspawn exited"; break; fi
        if [ -e "$handle/stop" ]; then reason="stop requested"; break; fi
        if ! alive "$owner"; then reason="owner $owner exited"; break; fi
        if [ -z "$leader" ]; then
            # The container's PID 1 is nspawn's child (its inner child is cloned with CLONE_PARENT) and
            # is called systemd once it has exec'd.
            for pid in $(pgrep -P "$nspawn" || true); do
                if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = systemd ]; then
                    leader=$pid
                    echo "$leader" > "$handle/leader.new" && mv "$handle/leader.new" "$handle/leader"
                fi
            done
        fi
        sleep 0.2
    done
    echo "supervisor: $reason" >> "$handle/console.log"
    if running "$nspawn"; then
        # SIGRTMIN+4 asks systemd for poweroff.target: a clean shutdown of every unit.
        if [ -n "$leader" ]; then kill -s SIGRTMIN+4 "$leader" 2>/dev/null || true; else kill -TERM "$nspawn"; fi
        local deadline=$((SECONDS + STOP_TIMEOUT))
        while running "$nspawn" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
        if running "$nspawn"; then
            echo "supervisor: no clean shutdown after ${STOP_TIMEOUT} s; SIGKILL" >> "$handle/console.log"
            # Killing a PID namespace's init kills every process in it.
            [ -n "$leader" ] && kill -KILL "$leader" 2>/dev/null || true
            kill -KILL "$nspawn" 2>/dev/null || true
        fi
    fi
    local status=0
    wait "$nspawn" || status=$?
    echo "supervisor: nspawn exit status $status" >> "$handle/console.log"
    echo "$status" > "$handle/stopped"
    # Nobody is left to call stop.
    case "$reason" in owner*) rm -rf --one-file-system "$handle" ;; esac
}

start() {
    [ $# -ge 2 ] || die "usage: boot.sh start ROOT BINDIR [OWNER_PID]"
    local root bindir owner=${3:-$PPID}
    root=$(readlink -f "$1")
    bindir=$(readlink -f "$2")
    [ "$(id -u)" = 0 ] || die "must run as root"
    [ -x "$root/lib/systemd/systemd" ] || die "$root is not a root with systemd (see rootfs.sh)"
    [ -d "$bindir" ] || die "no directory $bindir"
    [[ "$owner" =~ ^[0-9]+$ ]] && alive "$owner" || die "no process $owner to tie the container's life to"
    command -v systemd-nspawn > /dev/null || die "systemd-nspawn is missing (apt-get install systemd-container)"
    local handle
    handle=$(mktemp -d /tmp/curfew-container.XXXXXX)
    mkdir "$handle/fs"
    setsid "$SELF" _supervise "$handle" "$root" "$bindir" "$owner" < /dev/null >> "$handle/console.log" 2>&1 &
    local deadline=$((SECONDS + BOOT_TIMEOUT)) state=""
    fail() {
        echo "boot.sh: $*; the container's console:" >&2
        sed 's/^/  | /' "$handle/console.log" >&2 || true
        if [ -e "$handle/leader" ] && [ ! -e "$handle/stopped" ]; then
            echo "boot.sh: its journal:" >&2
            run_inside "$handle" journalctl -b --no-pager -n 60 2>&1 | sed 's/^/  | /' >&2 || true
        fi
        stop "$handle" >&2 || true
        exit 1
    }
    while [ ! -e "$handle/leader" ]; do
        [ -e "$handle/stopped" ] && fail "the container did not start"
        [ $SECONDS -lt $deadline ] || fail "no container PID 1 after ${BOOT_TIMEOUT} s"
        sleep 0.1
    done
    # systemctl fails until systemd has opened its private socket; then --wait blocks until boot ends.
    until state=$(run_inside "$handle" timeout $((deadline > SECONDS ? deadline - SECONDS : 1)) \
        systemctl is-system-running --wait 2>&1); do
        case "$state" in running | degraded) break ;; esac
        [ -e "$handle/stopped" ] && fail "the container stopped while booting"
        [ $SECONDS -lt $deadline ] || fail "systemd did not finish booting in ${BOOT_TIMEOUT} s (state: $state)"
        sleep 0.2
    done
    if [ "$state" != running ]; then
        echo "boot.sh: the container's systemd is $state; failed units:" >&2
        run_inside "$handle" systemctl --failed --no-pager --no-legend >&2 || true
    fi
    run_inside "$handle" systemctl start dbus.service systemd-logind.service ||
        fail "cannot start dbus and systemd-logind in the container"
    echo "$handle"
}

run_inside() {
    local handle=$1
    shift
    local leader
    leader=$(cat "$handle/leader" 2> /dev/null) || die "$handle: no running container"
    env -i PATH="$CLEAN_PATH" LANG=C.UTF-8 HOME=/root TERM=dumb SYSTEMD_COLORS=0 SYSTEMD_PAGER= \
        nsenter --target "$leader" --all -- "$@"
}

stop() {
    [ $# -eq 1 ] || die "usage: boot.sh stop HANDLE"
    local handle=$1 supervisor nspawn leader
    local deadline=$((SECONDS + 5))
    [ -d "$handle/fs" ] || die "$handle is not a container handle"
    # The supervisor writes its PID first thing; start() may fail before that.
    while [ ! -s "$handle/supervisor.pid" ] && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    supervisor=$(cat "$handle/supervisor.pid" 2> /dev/null || true)
    nspawn=$(cat "$handle/nspawn.pid" 2> /dev/null || true)
    leader=$(cat "$handle/leader" 2> /dev/null || true)
    touch "$handle/stop"
    deadline=$((SECONDS + STOP_TIMEOUT + 10))
    while running "$supervisor" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    if running "$supervisor"; then
        echo "boot.sh: the supervisor did not finish; killing the container" >&2
        for pid in $leader $nspawn $supervisor; do kill -KILL "$pid" 2> /dev/null || true; done
        sleep 0.5
    fi
    local left=""
    for pid in $leader $nspawn $supervisor; do running "$pid" && left="$left $pid"; done
    [ -z "$left" ] || die "processes left behind:$left"
    local status
    status=$(cat "$handle/stopped" 2> /dev/null || echo "?")
    # The overlay and tmpfs lived in the private namespace, which is gone: fs/ is an empty directory.
    rm -rf --one-file-system "$handle"
    [ "$status" = 0 ] || echo "boot.sh: nspawn exited with status $status" >&2
}

case "${1:-}" in
    start) shift; start "$@" ;;
    exec) shift; [ $# -ge 2 ] || die "usage: boot.sh exec HANDLE CMD [ARG...]"; run_inside "$@" ;;
    stop) shift; stop "$@" ;;
    run)
        shift
        [ $# -ge 3 ] || die "usage: boot.sh run ROOT BINDIR CMD [ARG...]"
        handle=$(start "$1" "$2" $$)
        shift 2
        status=0
        run_inside "$handle" "$@" || status=$?
        stop "$handle"
        exit $status
        ;;
    _inner) shift; inner "$@" ;;
    _supervise) shift; supervise "$@" ;;
    *) die "usage: boot.sh start ROOT BINDIR [OWNER_PID] | exec HANDLE CMD... | stop HANDLE | run ROOT BINDIR CMD..." ;;
esac
