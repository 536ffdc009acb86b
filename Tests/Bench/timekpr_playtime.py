#!/usr/bin/python3
"""Times Timekpr-nExT's own PlayTime process scanner over the live process table.

Used by `curfew-bench` (the tracking section) to compare Curfew's /proc sampler with the scanner of
Timekpr-nExT, a parental-controls daemon packaged by Debian. Nothing of Timekpr is copied into Curfew:
this script fetches the Debian package (`apt-get download timekpr-next`), unpacks it with
`dpkg-deb -x` into a work directory, puts the unpacked `dist-packages` first on sys.path and imports
`timekpr.server.user.playtime`, the module `timekprd` uses.

The scanner is `timekprPlayTimeConfig.processPlayTimeActivities()`, which `timekprd` calls every poll
(3 s by default). It lists /proc, reads the owner (lstat of /proc/PID/exe), the executable (readlink)
and, with the "enhanced activity monitor", the command line of every process it has not seen before,
and matches the processes of normal users against their PlayTime activity masks. Known processes cost
a dictionary look-up, except for two re-checks 5 and 10 scans after they were first seen.

The only configuration it reads is `getTimekprPlayTimeEnhancedActivityMonitorEnabled()`: we pass
Timekpr's own `timekprConfig` object (its constructor does no I/O) with that flag set, instead of
loading /etc/timekpr/timekpr.conf. The masks are given as `timekprd` gives them
(`processPlayTimeFilters(uid, [[mask, description], ...])`); a user with masks makes every call scan.

Needs Debian's /usr/bin/python3 with python3-dbus, python3-gi (GLib) and python3-psutil, which the
Timekpr modules import, plus apt-get and dpkg-deb.

Output: one JSON object on stdout (--json) or readable lines.
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

PACKAGE = "timekpr-next"
DIST_PACKAGES = "usr/lib/python3/dist-packages"
DEBIAN_MODULES = {"dbus": "python3-dbus", "gi": "python3-gi", "psutil": "python3-psutil"}


class Failure(Exception):
    pass


def prepare(work_dir):
    """Downloads and unpacks the package into work_dir unless already done; returns (root, version)."""
    root = os.path.join(work_dir, "root")
    stamp = os.path.join(work_dir, "version")
    if os.path.isfile(stamp) and os.path.isdir(os.path.join(root, DIST_PACKAGES, "timekpr")):
        with open(stamp) as handle:
            return root, handle.read().strip()
    os.makedirs(work_dir, exist_ok=True)
    # apt drops privileges to _apt for downloads; let it write here (otherwise it warns and
    # downloads as root anyway).
    os.chmod(work_dir, 0o777)
    for old in glob.glob(os.path.join(work_dir, "*.deb")):
        os.remove(old)
    result = subprocess.run(
        ["apt-get", "download", "-q", PACKAGE], cwd=work_dir, capture_output=True, text=True)
    debs = glob.glob(os.path.join(work_dir, "%s_*.deb" % PACKAGE))
    if result.returncode != 0 or not debs:
        message = (result.stderr or result.stdout).strip().splitlines()
        raise Failure("apt-get download %s failed: %s (run apt-get update?)" % (PACKAGE, message[-1] if message else result.returncode))
    deb = debs[0]
    version = subprocess.run(
        ["dpkg-deb", "-f", deb, "Version"], capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    with open(stamp, "w") as handle:
        handle.write(version)
    return root, version


def load_scanner(root):
    """Imports Timekpr's PlayTime module from the unpacked package."""
    for module, package in DEBIAN_MODULES.items():
        try:
            __import__(module)
        except ImportError:
            raise Failure("Timekpr imports %s: apt-get install %s (and run this with /usr/bin/python3)" % (module, package))
    sys.path.insert(0, os.path.join(root, DIST_PACKAGES))
    from timekpr.common.utils.config import timekprConfig
    from timekpr.server.user import playtime
    # Make sure the modules came from the unpacked package, not from an installed timekpr-next.
    if not os.path.abspath(playtime.__file__).startswith(os.path.abspath(root)):
        raise Failure("imported %s instead of the unpacked package" % playtime.__file__)
    return timekprConfig, playtime


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int((len(ordered) - 1) * fraction + 0.5))]


def measure(args):
    root, version = prepare(args.work_dir)
    timekprConfig, playtime = load_scanner(root)
    config = timekprConfig()
    config.setTimekprPlayTimeEnhancedActivityMonitorEnabled(args.enhanced)
    scanner = playtime.timekprPlayTimeConfig(config)
    uid = str(args.uid)
    # As timekprd passes a user's PlayTime activities: [[mask, description], ...].
    scanner.processPlayTimeFilters(uid, [[mask, mask] for mask in args.mask])

    def timed():
        wall, cpu = time.perf_counter(), time.thread_time()
        scanner.processPlayTimeActivities()
        return (time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000

    cold_wall, cold_cpu = timed()
    walls, cpus = [], []
    for _ in range(args.scans):
        if args.interval_ms > 0:
            time.sleep(args.interval_ms / 1000)
        wall, cpu = timed()
        walls.append(wall)
        cpus.append(cpu)
    return {
        "version": version,
        "module": playtime.__file__,
        "uid": uid,
        "masks": args.mask,
        "enhanced": args.enhanced,
        "cached_processes": len(scanner.getCachedProcesses()),
        "user_processes": len(scanner.getCachedUserProcesses(uid)),
        "matched_processes": scanner.getMatchedUserProcessCnt(uid),
        "playtime_active": scanner.verifyPlayTimeActive(uid, "bench", True),
        "cold_ms": cold_wall,
        "cold_cpu_ms": cold_cpu,
        "scans": len(walls),
        "median_ms": statistics.median(walls),
        "p90_ms": percentile(walls, 0.9),
        "max_ms": max(walls),
        "median_cpu_ms": statistics.median(cpus),
        "p90_cpu_ms": percentile(cpus, 0.9),
        "max_cpu_ms": max(cpus),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", required=True, help="where the package is downloaded and unpacked (reused)")
    parser.add_argument("--prepare-only", action="store_true", help="download and unpack, then print the version")
    parser.add_argument("--uid", type=int, default=os.getuid(), help="the user whose PlayTime masks are set")
    parser.add_argument("--mask", action="append", help="a PlayTime activity mask (repeatable; default: sleep)")
    parser.add_argument("--scans", type=int, default=60, help="scans after the first (cold) one")
    parser.add_argument("--interval-ms", type=float, default=2, help="pause between scans")
    parser.add_argument("--no-enhanced", dest="enhanced", action="store_false",
                        help="do not read command lines (Timekpr's default; the bench turns the enhanced monitor on)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    args.mask = args.mask or ["sleep"]
    try:
        if args.prepare_only:
            root, version = prepare(args.work_dir)
            load_scanner(root)
            result = {"version": version, "root": root}
        else:
            result = measure(args)
    except (Failure, subprocess.CalledProcessError, OSError) as error:
        if args.json:
            print(json.dumps({"error": str(error)}))
        else:
            print("error: %s" % error, file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print("%s: %s" % (key, value))
    return 0


if __name__ == "__main__":
    sys.exit(main())
