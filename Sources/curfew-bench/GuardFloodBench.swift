import CurfewPOSIX
import CurfewLinux
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What a child's flood of the exec guard costs everyone else (docs/security.md, "The exec guard cannot
/// be stalled"): while the bench account runs 192 workers exec'ing a file crafted to be costly to read
/// (an ELF header with 256 note segments of 64 KiB of empty notes) and a new binary under a catalog
/// launcher path every 0.3 s (each a new claim, which drops the guard's ignore marks), root's exec of
/// /bin/true and `curfew check-login` are timed (p50 / p99 / max).
func runGuardFloodBenchmark(root: String, account: BenchAccount, seconds: Double = 20) throws {
    let directory = "\(root)/guard-flood"
    let probe = BlockedAppProbe(account: account, directory: directory)
    try FileManager.default.createDirectory(atPath: "\(directory)/apps", withIntermediateDirectories: true)
    _ = unlink("\(directory)/apps/steam.json")
    try FileManager.default.copyItem(atPath: "\(packageRoot)/policies/apps/steam.json", toPath: "\(directory)/apps/steam.json")
    let home = "\(directory)/flood"
    let launcher = "\(home)/.steam/steamapps/common/flood"
    try? FileManager.default.removeItem(atPath: home)
    try FileManager.default.createDirectory(atPath: launcher, withIntermediateDirectories: true)
    let crafted = "\(home)/crafted"
    try Data(noteHeavyFile()).write(to: URL(fileURLWithPath: crafted))
    chmod(crafted, 0o755)
    let script = "\(home)/flood.pl"
    // The flood the end-to-end test runs (Tests/Bench/guard_flood.pl).
    try FileManager.default.copyItem(atPath: "\(packageRoot)/Tests/Bench/guard_flood.pl", toPath: script)
    for path in [home, "\(home)/.steam", "\(home)/.steam/steamapps", "\(home)/.steam/steamapps/common", launcher, crafted, script] {
        chown(path, account.uid, account.gid)
    }
    let environment = childEnvironment(
        ["CURFEW_STATE_DIR": "\(directory)/state", "CURFEW_CATALOG_DIRS": "\(directory)/apps"],
        unset: ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "CURFEW_DEBUG", "CURFEW_SHARED_DIR", "CURFEW_SOCKET"])
    var logins: [Double] = []
    var calm: (execs: [Double], logins: [Double]) = ([], [])
    /// Root's exec of /bin/true, then `curfew check-login`, timed in turns for `seconds`.
    func measure(seconds: Double) throws -> (execs: [Double], logins: [Double]) {
        var execs: [Double] = []
        var logins: [Double] = []
        let end = clock.now + .milliseconds(Int64(seconds * 1000))
        while clock.now < end {
            let before = clock.now
            guard spawnTrue() else { throw BenchFailure("/bin/true failed") }
            execs.append(milliseconds(clock.now - before))
            let login = clock.now
            let status = run(
                "\(binDirectory)/curfew", ["check-login", "--user", account.name, "--socket", "\(directory)/s.sock"],
                fullEnvironment: environment, output: "/dev/null")
            guard status == 0 else { throw BenchFailure("curfew check-login answered \(status)") }
            logins.append(milliseconds(clock.now - login))
        }
        return (execs, logins)
    }
    let result = try probe.withAgent(agentArguments: ["--exec-guard", "on"]) { () -> [Double] in
        // The same, on this machine as it is, before the flood.
        calm = try measure(seconds: 5)
        let flood = try spawnProcess(
            "/usr/bin/setpriv",
            ["--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--", "/usr/bin/perl", script, crafted, "192", launcher],
            options: SpawnOptions(environment: ["PATH": "/usr/bin:/bin"], output: "/dev/null"))
        children.add(flood)
        defer {
            // The flood is a session of its own: its process group is the perl's pid.
            kill(-flood, SIGKILL)
            kill(flood, SIGKILL)
            waitForExit(flood)
            children.remove(flood)
        }
        usleep(2_000_000)
        let flooded = try measure(seconds: seconds)
        logins = flooded.logins
        return flooded.execs
    }
    switch result {
    case .unavailable(let why):
        print("  a child's flood of the exec guard: not measured: \(why)")
    case .measured(let execs, _, _):
        let sortedExecs = execs.sorted()
        let sortedLogins = logins.sorted()
        let calmExecs = calm.execs.sorted()
        let calmLogins = calm.logins.sorted()
        print(
            "  before the flood: exec of /bin/true by root p50 \(format(percentile(calmExecs, 0.5))) ms, p99 \(format(percentile(calmExecs, 0.99))) ms;"
                + " curfew check-login p50 \(format(percentile(calmLogins, 0.5))) ms, p99 \(format(percentile(calmLogins, 0.99))) ms")
        print("  while a child floods the exec guard (192 workers exec'ing a note-heavy file, a new launcher binary every 0.3 s):")
        print(
            "    exec of /bin/true by root: p50 \(format(percentile(sortedExecs, 0.5))) ms, p99 \(format(percentile(sortedExecs, 0.99))) ms, max \(format(sortedExecs.last ?? .nan)) ms over \(execs.count)")
        print(
            "    curfew check-login: p50 \(format(percentile(sortedLogins, 0.5))) ms, p99 \(format(percentile(sortedLogins, 0.99))) ms, max \(format(sortedLogins.last ?? .nan)) ms over \(logins.count)"
        )
        print("    bound (docs/security.md): root's exec and check-login under 1500 ms each (the end-to-end test's; a login may take 2000 ms)")
    }
}

/// A file that looks like a 64-bit ELF executable to whoever reads its headers: 256 program headers,
/// each a `PT_NOTE` segment of 64 KiB of empty notes, 1.5 MiB in all (the kernel refuses to run it).
func noteHeavyFile(size: Int = 1_536 * 1024) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: size)
    func put(_ value: UInt64, at offset: Int, size: Int) {
        for index in 0..<size { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) }
    }
    bytes[0...7] = [0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]
    put(2, at: 16, size: 2)
    put(0, at: 18, size: 2)  // no machine: the kernel refuses it (ENOEXEC)
    put(1, at: 20, size: 4)
    put(64, at: 32, size: 8)
    put(64, at: 52, size: 2)
    put(56, at: 54, size: 2)
    put(256, at: 56, size: 2)
    for index in 0..<256 {
        let entry = 64 + index * 56
        put(4, at: entry, size: 4)
        put(65_536, at: entry + 8, size: 8)
        put(65_536, at: entry + 32, size: 8)
    }
    return bytes
}

