import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// In the serialized suite of the other exec guard tests: they manage the same child account, whose
// flood would otherwise reach their agents' guards too.
extension ExecGuardEndToEndTests {
    /// What root's exec of `/bin/true` and `curfew check-login` (its own exec included) may take while
    /// the child floods the guard, at the 99th percentile: generous for a loaded 2-core machine, under
    /// the 2 s a login may take (docs/security.md). The bound is a percentile because the other suites
    /// run in parallel with agents of their own, whose guards every exec on the machine also passes,
    /// and one of them mounts and remounts a file system: in two full runs a single exec of root's
    /// (3.2 s) and a single check-login (6.5 s) of about 390 stood out while it did, and never with the
    /// suite alone (max 17 ms and 108 ms). The maxima are printed; docs/security.md keeps the outliers
    /// as an open finding.
    static let execBoundSeconds = 1.5
    static let checkLoginBoundSeconds = 1.5

    /// A file that looks like a 64-bit ELF executable to whoever reads its headers: 256 program headers,
    /// each a `PT_NOTE` segment of 64 KiB of empty notes (12 zero bytes each), `size` bytes in all.
    /// The kernel refuses to run it (ENOEXEC: no machine) after the guard has been asked.
    static func noteHeavyFile(size: Int = 1_536 * 1024) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size)
        func put(_ value: UInt64, at offset: Int, size: Int) {
            for index in 0..<size { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) }
        }
        bytes[0...7] = [0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]
        put(2, at: 16, size: 2)  // ET_EXEC
        put(0, at: 18, size: 2)  // no machine: the kernel refuses it (ENOEXEC)
        put(1, at: 20, size: 4)
        put(64, at: 32, size: 8)  // e_phoff
        put(64, at: 52, size: 2)  // e_ehsize
        put(56, at: 54, size: 2)  // e_phentsize
        put(256, at: 56, size: 2)  // e_phnum
        for index in 0..<256 {
            let entry = 64 + index * 56
            put(4, at: entry, size: 4)  // PT_NOTE
            put(65_536, at: entry + 8, size: 8)  // p_offset
            put(65_536, at: entry + 32, size: 8)  // p_filesz
        }
        return bytes
    }

    static func percentile(_ samples: [Double], _ fraction: Double) -> Double {
        let sorted = samples.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction + 0.5))]
    }

    static func milliseconds(_ seconds: Double) -> String { String(format: "%.1f ms", seconds * 1000) }

    /// Runs `path` as root to its end; how long it took, from the start of the spawn to the exit.
    static func timed(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, seconds: Double) {
        let started = Date()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return (process.terminationStatus, Date().timeIntervalSince(started))
    }

    /// "The guard cannot be stalled" (docs/security.md), with a real child account and the real agent:
    /// the child floods the exec guard with a file crafted to be costly to read (an ELF header with 256
    /// note segments of 64 KiB of empty notes, 1.5 MiB), exec'd in a loop by 192 workers, while a new
    /// binary under a catalog launcher path every 0.3 s makes the agent learn a claim (which drops the
    /// guard's ignore marks). Root's `/bin/true` and `curfew check-login` are timed meanwhile, and the
    /// child's blocked game is still denied every time.
    @Test func aChildsFloodOfCraftedExecsHoldsNeitherRootsExecsNorLogins() throws {
        let setup = try setUp()
        let runner = setup.runner
        defer { runner.cleanUp() }
        // A catalog launcher whose executable paths any user can put files under.
        try FileManager.default.copyItem(
            atPath: CurfewRunner.repositoryRoot.appendingPathComponent("policies/apps/steam.json").path,
            toPath: "\(runner.catalogDirectory)/steam.json")
        let child = setup.child
        let home = runner.root.appendingPathComponent("flood").path
        let launcherDirectory = "\(home)/.steam/steamapps/common/flood"
        try FileManager.default.createDirectory(atPath: launcherDirectory, withIntermediateDirectories: true)
        let crafted = "\(home)/crafted"
        try Data(Self.noteHeavyFile()).write(to: URL(fileURLWithPath: crafted))
        chmod(crafted, 0o755)
        let script = "\(home)/flood.pl"
        try FileManager.default.copyItem(
            atPath: CurfewRunner.repositoryRoot.appendingPathComponent("Tests/Bench/guard_flood.pl").path, toPath: script)
        for path in [home, "\(home)/.steam", "\(home)/.steam/steamapps", "\(home)/.steam/steamapps/common", launcherDirectory, crafted, script] {
            chown(path, child.uid, child.gid)
        }

        let agent = try agent(runner, mode: "on")
        defer { _ = agent.stop() }
        let checkLogin = CurfewRunner.binDirectory.appendingPathComponent("curfew").path
        let loginEnvironment = ["CURFEW_STATE_DIR": runner.stateDir, "CURFEW_CATALOG_DIRS": runner.catalogDirectory, "TZ": "UTC"]
        // Before the flood, on this machine as it is.
        let calm = try (0..<10).map { _ in try Self.timed("/bin/true", []).seconds }
        let calmLogins = try (0..<10).map { _ in
            try Self.timed(checkLogin, ["check-login", "--user", child.name, "--socket", agent.socketPath], environment: loginEnvironment).seconds
        }

        let flood = try base.runAs(child, "/usr/bin/perl", [script, crafted, "192", launcherDirectory])
        defer {
            // The flood is a session of its own: its process group is the perl's pid.
            kill(-flood, SIGKILL)
            kill(flood, SIGKILL)
            _ = waitForExit(flood)
        }
        // The workers get going and the claims start coming.
        usleep(2_000_000)
        var execs: [Double] = []
        var logins: [Double] = []
        var gameStatuses: [Int32] = []
        let started = Date()
        while Date().timeIntervalSince(started) < 15 {
            execs.append(try Self.timed("/bin/true", []).seconds)
            let login = try Self.timed(
                checkLogin, ["check-login", "--user", child.name, "--socket", agent.socketPath], environment: loginEnvironment)
            #expect(login.status == 0, "check-login of the child (who has time left) answered \(login.status)")
            logins.append(login.seconds)
            if execs.count % 10 == 0 {
                // Meanwhile the child's blocked game is denied, never let through.
                gameStatuses.append(try run(as: child.name, ["/bin/sh", "-c", "\(setup.game) 30"], seconds: 20).status)
            }
        }
        print(
            """
            exec guard flood (192 workers exec'ing a note-heavy file, a new launcher binary every 0.3 s):
              root's /bin/true: before the flood p50 \(Self.milliseconds(Self.percentile(calm, 0.5))), \
            during it p50 \(Self.milliseconds(Self.percentile(execs, 0.5))) p99 \(Self.milliseconds(Self.percentile(execs, 0.99))) \
            max \(Self.milliseconds(execs.max() ?? .nan)) (\(execs.count) execs)
              curfew check-login: before the flood p50 \(Self.milliseconds(Self.percentile(calmLogins, 0.5))), \
            during it p50 \(Self.milliseconds(Self.percentile(logins, 0.5))) p99 \(Self.milliseconds(Self.percentile(logins, 0.99))) \
            max \(Self.milliseconds(logins.max() ?? .nan)) (\(logins.count) checks)
              the child's blocked game: exit statuses \(gameStatuses)
            """)
        #expect(execs.count >= 10, "only \(execs.count) execs in 15 s")
        #expect(
            Self.percentile(execs, 0.99) < Self.execBoundSeconds,
            "root's /bin/true took \(Self.milliseconds(Self.percentile(execs, 0.99))) at the 99th percentile")
        #expect(
            Self.percentile(logins, 0.99) < Self.checkLoginBoundSeconds,
            "root's check-login took \(Self.milliseconds(Self.percentile(logins, 0.99))) at the 99th percentile")
        #expect(!gameStatuses.isEmpty && gameStatuses.allSatisfy { $0 == 126 }, "the blocked game: \(gameStatuses)\n\(agent.log.suffix(2000))")
    }
}
