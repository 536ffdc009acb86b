#!/bin/bash
# Prints the path of a minimal Debian bookworm root file system that boots systemd, dbus and
# systemd-logind under systemd-nspawn, with a test account `kid` (uid 1500). Built once with debootstrap
# and cached under $CURFEW_ROOTFS_CACHE (default /var/cache/curfew-tests) as bookworm-<hash>, where the
# hash covers the package list and the `customize` function below: the root is rebuilt only when it is
# missing or either changes. It is built in a temporary directory and renamed into place, so a reader
# never sees half a root; a lock serializes concurrent callers. Callers must never write to it (boot.sh
# runs containers on an overlay).
#
# Usage: rootfs.sh            (as root; progress and timings on stderr, the path alone on stdout)
# Environment: CURFEW_ROOTFS_CACHE, CURFEW_DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

SUITE=bookworm
MIRROR=${CURFEW_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${CURFEW_ROOTFS_CACHE:-/var/cache/curfew-tests}
# sqlite3 brings libsqlite3-0 and apt (in minbase) brings libstdc++6: with them the statically linked
# Swift binaries find every shared library they need (libsystemd0 comes with systemd). The Debian
# package's other dependencies are named too, although minbase has them (Priority: required), because
# the package test installs it with apt-get and no network: libpam-runtime (pam-auth-update),
# libpam-modules (pam_exec), init-system-helpers (deb-systemd-helper). Debian's sudo: the package test
# proves that a parent's `sudo` (and `su`, from login) still work once Curfew's PAM line is in the stack.
# man-db: the package test reads both installed man pages with `man --warnings`; tzdata (required, in
# minbase) is named as the package depends on it. nftables: the package recommends it; the package test
# checks the network lockout's table under the unit as it ships.
PACKAGES=systemd,systemd-sysv,dbus,libpam-systemd,passwd,login,util-linux,procps,sqlite3,libpam-runtime,libpam-modules,init-system-helpers,sudo,man-db,tzdata,nftables
TEST_USER=kid
TEST_UID=1500

log() { echo "rootfs: $*" >&2; }

[ "$(id -u)" = 0 ] || { log "must run as root (debootstrap, chroot)"; exit 77; }

# Runs inside the new root's directory ($1) before it is renamed into place. Its text (as `declare -f`
# prints it, without comments) is part of the cache key, so changing it rebuilds the root.
customize() {
    local root=$1
    # A fixed machine id: every container booted from this root is the same machine, and systemd
    # does not take the first-boot path (ConditionFirstBoot units, presets).
    echo 6375726665777465737430303030303a > "$root/etc/machine-id"
    echo curfew-test > "$root/etc/hostname"
    chroot "$root" /usr/sbin/useradd --uid "$TEST_UID" --user-group --create-home --shell /bin/bash "$TEST_USER"
    # The console is a pipe (nspawn --console=pipe): no getty, nothing that waits for a terminal, and no
    # timers that would wake apt, dpkg or fstrim during a test.
    local unit
    for unit in getty.target console-getty.service container-getty@.service getty@.service \
        apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer e2scrub_reap.service \
        fstrim.timer systemd-tmpfiles-clean.timer systemd-pstore.service; do
        ln -sf /dev/null "$root/etc/systemd/system/$unit"
    done
    ln -sf /lib/systemd/system/multi-user.target "$root/etc/systemd/system/default.target"
    # The journal stays in memory: containers run on a throw-away overlay anyway.
    mkdir -p "$root/etc/systemd/journald.conf.d"
    printf '[Journal]\nStorage=volatile\n' > "$root/etc/systemd/journald.conf.d/curfew-test.conf"
    # Smaller root, and no stale package lists that look usable.
    rm -rf "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
}

ensure_tools() {
    local missing=()
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
    [ ${#missing[@]} -eq 0 ] && return
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

key=$( { echo "$SUITE $PACKAGES $TEST_USER $TEST_UID"; declare -f customize; } | sha256sum | cut -c1-16)
target="$CACHE/$SUITE-$key"

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
if [ -x "$target/lib/systemd/systemd" ] && [ -f "$target/.curfew-complete" ]; then
    touch "$target.used"
    echo "$target"
    exit 0
fi

ensure_tools
started=$(date +%s)
work=$(mktemp -d "$CACHE/.building-$SUITE-XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
log "building $target with debootstrap from $MIRROR (a minute or two, once)"
mkdir -p "$CACHE/debs"
if ! debootstrap --variant=minbase --include="$PACKAGES" --cache-dir="$CACHE/debs" \
    "$SUITE" "$work/root" "$MIRROR" > "$work/debootstrap.log" 2>&1; then
    log "debootstrap failed; the end of its log:"
    tail -n 30 "$work/debootstrap.log" >&2
    [ -f "$work/root/debootstrap/debootstrap.log" ] && tail -n 30 "$work/root/debootstrap/debootstrap.log" >&2
    exit 1
fi
customize "$work/root"
touch "$work/root/.curfew-complete"
mv "$work/root" "$target"
touch "$target.used"
# Roots of another package list or recipe that nobody asked for in a week (another checkout may still
# use one: never remove a root just because it is not ours).
for old in "$CACHE/$SUITE"-*; do
    [ -d "$old" ] && [ "$old" != "$target" ] || continue
    if [ -z "$(find "$old.used" -mtime -7 2>/dev/null)" ]; then rm -rf --one-file-system "$old" "$old.used"; fi
done
log "built $target in $(( $(date +%s) - started )) s ($(du -sh "$target" | cut -f1))"
echo "$target"
