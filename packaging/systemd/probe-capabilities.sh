#!/bin/sh
# Tries, in a copy of curfewd.service's sandbox, each thing the agent does that needs a capability,
# with the unit as shipped and with each capability of its bounding set taken away in turn.
# Run as root inside a booted system where the package is installed and the account kid exists
# (the test container: Tests/Container/boot.sh; see packaging/README.md):
#   boot.sh exec HANDLE sh /opt/curfew/probe-capabilities.sh
# It starts a game only kid may read (/home/kid/games, 0700) and a console login of kid, and leaves
# both running (the container is thrown away).
set -eu

probe=/usr/local/bin/curfew-probe.sh
cat > "$probe" << 'PROBE'
#!/bin/sh
pid=$(pgrep -u kid -x kidgame | head -n 1)
pts=$(stat -c '%U %n' /dev/pts/* | awk '$1 == "kid" {print $2; exit}')
try() { if out=$(eval "$2" 2>&1); then echo "probe $1: ok"; else echo "probe $1: FAILED: $(echo "$out" | head -n 1)"; fi; }
try signal "kill -0 $pid"
try readlink-exe "readlink /proc/$pid/exe"
try read-exe-0700 "head -c 16 /proc/$pid/exe"
try terminal "printf 'curfew probe\r\n' > $pts"
try setpriv "setpriv --reuid=$(id -u kid) --regid=$(id -g kid) --clear-groups /usr/bin/id -u"
try write-state "touch /var/lib/curfew/probe && rm /var/lib/curfew/probe"
try write-run "touch /run/curfew/probe && rm /run/curfew/probe"
try exec-guard "/usr/sbin/curfewd --check-exec-guard"
PROBE
chmod 755 "$probe"

install -d -m 700 -o kid -g kid /home/kid/games
install -m 700 -o kid -g kid /bin/sleep /home/kid/games/kidgame
systemctl is-active --quiet kidgame || systemd-run --quiet --unit=kidgame --property=User=kid /home/kid/games/kidgame 900
systemctl is-active --quiet kidterm || systemd-run --quiet --unit=kidterm /bin/sh -c "sleep 900 | script -qfec 'login -f kid' /tmp/kidterm"
sleep 1

sed -e 's/^Type=notify/Type=oneshot/' -e '/^WatchdogSec/d' -e '/^Restart/d' -e "s|^ExecStart=.*|ExecStart=$probe|" \
    /lib/systemd/system/curfewd.service > /etc/systemd/system/curfew-probe.service
shipped=$(sed -n 's/^CapabilityBoundingSet=//p' /lib/systemd/system/curfewd.service)

run() {
    label=$1
    shift
    mkdir -p /etc/systemd/system/curfew-probe.service.d
    printf '[Service]\nStandardOutput=truncate:/run/curfew-probe.out\n' > /etc/systemd/system/curfew-probe.service.d/variant.conf
    for line in "$@"; do printf '%s\n' "$line" >> /etc/systemd/system/curfew-probe.service.d/variant.conf; done
    systemctl daemon-reload
    systemctl start curfew-probe.service
    echo "== $label"
    cat /run/curfew-probe.out
}

run "as shipped"
for capability in $shipped; do
    run "without $capability" "CapabilityBoundingSet=" "CapabilityBoundingSet=$(echo " $shipped " | sed "s/ $capability / /")"
done
run "without capset in the syscall filter" "SystemCallFilter=" "SystemCallFilter=@system-service" "SystemCallFilter=~@privileged" \
    "SystemCallFilter=fanotify_init fanotify_mark"
run "without fanotify in the syscall filter" "SystemCallFilter=" "SystemCallFilter=@system-service" "SystemCallFilter=~@privileged" \
    "SystemCallFilter=setuid setgid setgroups setresuid setresgid capset"
rm -rf /etc/systemd/system/curfew-probe.service /etc/systemd/system/curfew-probe.service.d "$probe" /run/curfew-probe.out
systemctl daemon-reload
