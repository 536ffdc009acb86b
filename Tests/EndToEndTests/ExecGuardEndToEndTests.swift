import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Whether this kernel and these capabilities allow a fanotify group with permission events.
func execGuardAvailable() -> Bool { (try? ExecGuard(identities: FileIdentityCache())) != nil }

/// "Blocked before it runs", with real child accounts and the real agent: the exec of a
/// blocked app fails for the child (the kernel's fanotify permission event answered FAN_DENY) and
/// runs for everyone else; everybody else's execs are answered at once; a guard that does not answer
/// in time lets execs through, and the block still stops the app after it starts.
@Suite(
    .serialized,
    .enabled(if: getuid() == 0, "needs root: test accounts, fanotify"),
    .enabled(if: execGuardAvailable(), "fanotify permission events are not available here"))
struct ExecGuardEndToEndTests {
    static let child = "curfewguard"
    static let otherChild = "curfewguard2"
    /// An account nobody manages.
    static let unmanaged = "nobody"
    let base = AgentTests()

    struct Setup {
        var runner: CurfewRunner
        var child: Accounts.Account
        var otherChild: Accounts.Account
        var game: String
        /// Another catalog game nobody blocks at first.
        var laterGame: String
    }

    /// `blockedgame` (a copy of sleep with a build-id of its own, matched by path) blocked for the
    /// child; the other child is managed with no app rules.
    func setUp() throws -> Setup {
        let child = try TestAccount.ensure(Self.child)
        let otherChild = try TestAccount.ensure(Self.otherChild)
        var runner = try CurfewRunner()
        chmod(runner.root.path, 0o755)
        let games = runner.root.appendingPathComponent("games").path
        try FileManager.default.createDirectory(atPath: games, withIntermediateDirectories: true)
        let game = "\(games)/blockedgame"
        try AppIdentityEndToEndTests.uniqueBinary(from: "/bin/sleep", to: game)
        let catalog = runner.root.appendingPathComponent("apps").path
        try FileManager.default.createDirectory(atPath: catalog, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: CurfewRunner.repositoryRoot.appendingPathComponent("policies/apps/interpreters.json").path,
            toPath: "\(catalog)/interpreters.json")
        try Data(#"{"name": "blockedgame", "category": "game", "match": {"executablePaths": ["\#(game)"]}}"#.utf8)
            .write(to: URL(fileURLWithPath: "\(catalog)/blockedgame.json"))
        let laterGame = "\(games)/latergame"
        try AppIdentityEndToEndTests.uniqueBinary(from: "/bin/sleep", to: laterGame)
        try Data(#"{"name": "latergame", "category": "game", "match": {"executablePaths": ["\#(laterGame)"]}}"#.utf8)
            .write(to: URL(fileURLWithPath: "\(catalog)/latergame.json"))
        runner.catalogDirectory = catalog
        try runner.ok(["init"])
        for account in [child, otherChild] {
            try runner.ok(["user", "add", account.name])
            try runner.ok(["limit", account.name, "8h"])
            try runner.ok(["bedtime", account.name, "off"])
            try runner.ok(["timezone", account.name, "UTC"])
        }
        try runner.ok(["app", "block", child.name, "blockedgame"])
        return Setup(runner: runner, child: child, otherChild: otherChild, game: game, laterGame: laterGame)
    }

    /// The agent with the exec guard `mode` (nil: the default); waits until the guard is watching.
    func agent(_ runner: CurfewRunner, mode: String?, extra: [String] = []) throws -> AgentProcess {
        let agent = try AgentProcess(
            runner, extraEnvironment: ["TZ": "UTC"],
            // Without a mode, the default: a stall of 0 (none) tells the harness not to turn the guard off.
            arguments: (mode.map { ["--exec-guard", $0] } ?? ["--exec-guard-stall", "0"]) + ["--stop-grace", "1"] + extra)
        if mode != "off" {
            try waitUntil(seconds: 10, "the exec guard on") { agent.log.contains("exec guard on:") }
        }
        return agent
    }

    /// Runs `arguments` as `user` through runuser to its end (at most `seconds`): exit status (128 +
    /// signal when killed), what it wrote on stderr, and how long it took.
    func run(as user: String, _ arguments: [String], seconds: Double = 60) throws -> (status: Int32, stderr: String, seconds: Double) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        process.arguments = ["-u", user, "--"] + arguments
        process.environment = ["PATH": "/usr/bin:/bin", "LC_ALL": "C"]
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        let started = Date()
        try process.run()
        let pid = process.processIdentifier
        let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: watchdog)
        let data = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        watchdog.cancel()
        let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        return (status, String(decoding: data, as: UTF8.self), Date().timeIntervalSince(started))
    }

    func events(_ runner: CurfewRunner) throws -> [[String: Any]] {
        let output = try runner.ok(["events", "--json"]).stdout
        guard let all = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]] else {
            throw TestFailure("bad events: \(output)")
        }
        return all.filter { $0["kind"] as? String == "app-stopped" }
    }

    @Test func aBlockedProgramsExecFailsForTheChildAndRunsForEveryoneElse() throws {
        let setup = try setUp()
        let runner = setup.runner
        defer { runner.cleanUp() }
        // The default mode is on where fanotify is available.
        let agent = try agent(runner, mode: nil)
        #expect(agent.log.contains("exec.guard=on"), "\(agent.log.suffix(2000))")
        for launch in 0..<20 {
            // The child's shell cannot start it: EPERM from execve(2), exit 126.
            let shell = try run(as: setup.child.name, ["/bin/sh", "-c", "\(setup.game) 30"])
            #expect(shell.status == 126, "launch \(launch): \(shell)\n\(agent.log.suffix(2000))")
            #expect(shell.stderr.contains("Operation not permitted") || shell.stderr.contains("Permission denied"), "\(shell.stderr)")
            #expect(shell.seconds < 3, "launch \(launch) took \(shell.seconds) s")
            if shell.status != 126 { break }
        }
        let direct = try run(as: setup.child.name, [setup.game, "30"])
        #expect(direct.stderr.contains("failed to execute") && direct.stderr.contains("Operation not permitted"), "\(direct)")
        #expect(direct.status != 0 && direct.seconds < 3, "\(direct)")
        // Everyone else runs it: the other child, an unmanaged user, root.
        #expect(try run(as: setup.otherChild.name, [setup.game, "0.1"]).status == 0)
        #expect(try run(as: Self.unmanaged, [setup.game, "0.1"]).status == 0)
        #expect(try run(as: "root", [setup.game, "0.1"]).status == 0)
        // The child's other programs run.
        #expect(try run(as: setup.child.name, ["/bin/sh", "-c", "/bin/sleep 0.1 && /bin/true"]).status == 0)
        // A game the guard let everyone run (the kernel stops asking about it) is denied once blocked.
        #expect(try run(as: setup.child.name, [setup.laterGame, "0.1"]).status == 0)
        #expect(try run(as: Self.unmanaged, [setup.laterGame, "0.1"]).status == 0)
        try runner.ok(["app", "block", setup.child.name, "latergame"])
        try waitUntil(seconds: 10, "the new block in force") { agent.log.contains("version=6") }
        var later = try run(as: setup.child.name, ["/bin/sh", "-c", "\(setup.laterGame) 30"])
        for _ in 0..<50 where later.status != 126 {
            // The agent takes the new policy within a tick or so.
            usleep(100_000)
            later = try run(as: setup.child.name, ["/bin/sh", "-c", "\(setup.laterGame) 30"])
        }
        #expect(later.status == 126 && later.stderr.contains("Operation not permitted"), "\(later)\n\(agent.log.suffix(2000))")
        // Told and recorded as a stop, the event saying the exec was denied.
        var denied: [[String: Any]] = []
        try waitUntil(seconds: 10, "app-stopped events of denied execs") {
            denied = ((try? events(runner)) ?? []).filter { ($0["data"] as? [String: Any])?["execDenied"] as? Bool == true }
            return denied.count >= 22
        }
        let apps = denied.map { ($0["data"] as? [String: Any])?["app"] as? String ?? "?" }
        #expect(apps.filter { $0 == "blockedgame" }.count >= 21 && apps.contains("latergame"), "\(apps)")
        #expect(Set(apps) == ["blockedgame", "latergame"] && denied.allSatisfy { $0["user"] as? String == Self.child }, "\(denied)")
        #expect(agent.log.contains("denied an app's exec"))
        #expect(agent.stop() == 0)
        #expect(agent.log.contains("exec guard stopped: marks removed"), "\(agent.log.suffix(1000))")
        // No agent, no guard: the child's exec is the kernel's business again.
        #expect(try run(as: setup.child.name, [setup.game, "0.1"]).status == 0)
    }

    /// 10,000 execs of /bin/true by an unmanaged user, with the guard on (while a child has an app
    /// blocked, so each exec's uid is looked up) and off: every one succeeds, none waits for the watchdog.
    @Test(arguments: ["on", "off"])
    func tenThousandExecsOfAnUnmanagedUserAllSucceed(mode: String) throws {
        let setup = try setUp()
        let runner = setup.runner
        defer { runner.cleanUp() }
        let agent = try agent(runner, mode: mode)
        defer { _ = agent.stop() }
        #expect(agent.log.contains("exec.guard=\(mode)"), "\(agent.log.suffix(2000))")
        let loop = try run(
            as: Self.unmanaged,
            ["/bin/sh", "-c", "i=0; while [ $i -lt 10000 ]; do /bin/true || exit 7; i=$((i+1)); done; echo done >&2"],
            seconds: 600)
        #expect(loop.status == 0 && loop.stderr == "done\n", "\(loop)")
        print("10000 execs of /bin/true by an unmanaged user, exec guard \(mode): \(String(format: "%.1f", loop.seconds)) s")
        #expect(!agent.log.contains("longer than the deadline"), "\(agent.log.suffix(2000))")
        // The guard was deciding all along: the child's exec of the game is still denied (or, off, stopped).
        let game = try run(as: setup.child.name, ["/bin/sh", "-c", "\(setup.game) 30"])
        #expect(mode == "on" ? game.status == 126 : game.status != 0 && game.status != 126, "\(game)")
    }

    /// The guard's thread held up (a test hook) past its 100 ms deadline, as under heavy CPU
    /// starvation: the watchdog answers the late execs as the guard would (docs/security.md, "The exec
    /// guard cannot be stalled"), so the child's blocked game is denied every time, never let through,
    /// while the child's other programs, the other child's and an unmanaged user's run.
    @Test func aStalledGuardNeverLetsABlockedExecThrough() throws {
        let setup = try setUp()
        let runner = setup.runner
        defer { runner.cleanUp() }
        let agent = try agent(runner, mode: "on", extra: ["--exec-guard-stall", "1500"])
        defer { _ = agent.stop() }
        for launch in 0..<5 {
            let shell = try run(as: setup.child.name, ["/bin/sh", "-c", "\(setup.game) 30"], seconds: 20)
            #expect(shell.status == 126, "launch \(launch): \(shell)\n\(agent.log.suffix(2000))")
            #expect(shell.seconds < 5, "launch \(launch) took \(shell.seconds) s")
            // The child's other programs still run.
            let mine = try run(as: setup.child.name, ["/bin/sh", "-c", "/bin/sleep 0.1 && /bin/true"], seconds: 20)
            #expect(mine.status == 0, "\(mine)")
            // Meanwhile the other child's and an unmanaged user's execs are not held up for the stall.
            let other = try run(as: setup.otherChild.name, ["/bin/true"])
            #expect(other.status == 0 && other.seconds < 3, "\(other)")
            let unmanaged = try run(as: Self.unmanaged, ["/bin/true"])
            #expect(unmanaged.status == 0 && unmanaged.seconds < 3, "\(unmanaged)")
        }
        #expect(agent.log.contains("longer than the deadline"), "\(agent.log.suffix(3000))")
        #expect(agent.log.contains("denied an app's exec"), "\(agent.log.suffix(3000))")
        #expect(!agent.log.contains("stopped an app"), "\(agent.log.suffix(3000))")
    }

    @Test func aBadExecGuardModeIsRefused() throws {
        let process = Process()
        process.executableURL = CurfewRunner.binDirectory.appendingPathComponent("curfewd")
        process.arguments = ["--exec-guard", "maybe"]
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 64, "\(stderr)")
        #expect(stderr.contains("exec guard must be on or off, got maybe"), "\(stderr)")
    }
}
