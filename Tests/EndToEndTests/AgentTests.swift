import CurfewLinux
import CurfewTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A real unprivileged account for the tests (CI runs as root), created on first use.
enum TestAccount {
    static let name = "curfewkid"
    /// The enforcement tests' own account: their agents stop every process of it, which must never
    /// hit the processes other suites (running in parallel) count for `curfewkid`.
    static let enforced = "curfewlocked"

    static func ensure(_ name: String = TestAccount.name) throws -> Accounts.Account {
        if let account = Accounts.account(named: name) { return account }
        let result = try CurfewRunner.runTool("/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/bin/sh", name])
        #expect(result == 0, "useradd \(name)")
        guard let account = Accounts.account(named: name) else { throw TestFailure("cannot create the account \(name)") }
        return account
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `curfewd` running in the foreground against a private state directory.
final class AgentProcess {
    let runner: CurfewRunner
    let pid: Int32
    let logPath: String
    var socketPath: String { runner.root.appendingPathComponent("run/curfewd.sock").path }

    /// `launcher`: a program and its arguments that start `curfewd` by exec, keeping its pid (say
    /// `unshare --mount` for a mount namespace of the agent's own).
    init(
        _ runner: CurfewRunner, extraEnvironment: [String: String] = [:], logindBus: String = "none", arguments: [String] = [],
        launcher: [String] = []
    ) throws {
        self.runner = runner
        logPath = runner.root.appendingPathComponent("curfewd-\(UUID().uuidString.prefix(8)).log").path
        var environment = ProcessInfo.processInfo.environment
        environment["CURFEW_STATE_DIR"] = runner.stateDir
        environment["CURFEW_CATALOG_DIRS"] = runner.catalogDirectory
        environment["CURFEW_LOG"] = "stderr"
        environment.removeValue(forKey: "NOTIFY_SOCKET")
        for (key, value) in extraEnvironment { environment[key] = value }
        let binary = CurfewRunner.binDirectory.appendingPathComponent("curfewd").path
        let agentArguments =
            ["--socket", runner.root.appendingPathComponent("run/curfewd.sock").path, "--logind-bus", logindBus, "--tick", "0.25"]
            // Suites test stopping apps after they start; the exec guard's suite turns the guard on.
            + (arguments.contains { $0.hasPrefix("--exec-guard") } ? [] : ["--exec-guard", "off"])
            + arguments
        pid = try spawnLogged(
            launcher.first ?? binary, launcher.isEmpty ? agentArguments : launcher.dropFirst() + [binary] + agentArguments,
            environment: environment, log: logPath)
        // Ready: the tracker has made its first observation and the socket answers.
        do {
            try waitUntil(seconds: 10, "curfewd ready") {
                FileManager.default.fileExists(atPath: self.socketPath) && self.log.contains("curfewd ready")
            }
        } catch {
            kill(pid, SIGKILL)
            _ = waitForExit(pid)
            let run = (try? FileManager.default.contentsOfDirectory(atPath: runner.root.appendingPathComponent("run").path)) ?? []
            throw TestFailure("\(error); run/ holds \(run); its log:\n\(log)")
        }
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// SIGTERM, and the exit status.
    func stop() -> Int32 {
        kill(pid, SIGTERM)
        return waitForExit(pid)
    }

    func killHard() {
        kill(pid, SIGKILL)
        _ = waitForExit(pid)
    }
}

func waitUntil(seconds: Double, _ what: String, _ condition: () -> Bool) throws {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        guard Date() < deadline else { throw TestFailure("timed out waiting for \(what)") }
        usleep(20_000)
    }
}

func waitForExit(_ pid: Int32) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    if status & 0x7f == 0 { return (status >> 8) & 0xff }
    return 128 + (status & 0x7f)
}

/// Started with a clean signal mask (CurfewLinux's spawnProcess), output appended to `log`.
func spawnLogged(_ path: String, _ arguments: [String], environment: [String: String], log: String) throws -> Int32 {
    try spawnProcess(path, arguments, options: SpawnOptions(environment: environment, output: log))
}

/// The agent end to end: real processes of a real unprivileged user, counted and stored.
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: a test account and its processes"))
struct AgentTests {
    /// A state directory with the test account managed, and a catalog with one game whose binary is
    /// a copy of /bin/sleep.
    func setUp(account name: String = TestAccount.name) throws -> (CurfewRunner, Accounts.Account, game: String, renamedCopy: String) {
        let account = try TestAccount.ensure(name)
        var runner = try CurfewRunner()
        // World-readable so the test account can run the game binaries inside.
        chmod(runner.root.path, 0o755)
        let games = runner.root.appendingPathComponent("games")
        try FileManager.default.createDirectory(at: games, withIntermediateDirectories: true)
        let game = games.appendingPathComponent("testgame").path
        let renamed = games.appendingPathComponent("not-a-game").path
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: game)
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: renamed)
        let catalog = runner.root.appendingPathComponent("apps")
        try FileManager.default.createDirectory(at: catalog, withIntermediateDirectories: true)
        try Data(
            """
            {"name": "testgame", "displayName": "Test Game", "category": "game",
             "match": {"executablePaths": ["\(game)"]}}
            """.utf8
        ).write(to: catalog.appendingPathComponent("testgame.json"))
        runner.catalogDirectory = catalog.path
        try runner.ok(["init"])
        try runner.ok(["user", "add", account.name])
        try runner.ok(["limit", account.name, "8h"])
        try runner.ok(["bedtime", account.name, "off"])
        return (runner, account, game, renamed)
    }

    func runAs(_ account: Accounts.Account, _ path: String, _ arguments: [String]) throws -> Int32 {
        try spawnLogged(
            "/usr/bin/setpriv",
            ["--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--", path] + arguments,
            environment: ["PATH": "/usr/bin:/bin"], log: "/dev/null")
    }

    func report(_ runner: CurfewRunner, _ user: String) throws -> (screen: Int64, apps: [String: Int64]) {
        let result = try runner.ok(["report", user, "--format", "json"])
        guard let data = result.stdout.data(using: .utf8),
            let json = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let days = json["days"] as? [[String: Any]], let today = days.last
        else { throw TestFailure("bad report: \(result.stdout)") }
        var apps: [String: Int64] = [:]
        for app in today["apps"] as? [[String: Any]] ?? [] {
            apps[app["app"] as? String ?? "?"] = (app["seconds"] as? NSNumber)?.int64Value
        }
        return ((today["screenSeconds"] as? NSNumber)?.int64Value ?? -1, apps)
    }

    @Test func countsRealProcessesOfARealUserWithinASecond() throws {
        let (runner, account, game, renamed) = try setUp()
        defer { runner.cleanUp() }
        let agent = try AgentProcess(runner)
        // 4 s of the game, then 3 s of a renamed copy of the same binary, then nothing for 1.5 s.
        let started = Date()
        let first = try runAs(account, game, ["30"])
        usleep(4_000_000)
        kill(first, SIGKILL)
        _ = waitForExit(first)
        let second = try runAs(account, renamed, ["30"])
        usleep(3_000_000)
        kill(second, SIGKILL)
        _ = waitForExit(second)
        let truth = Date().timeIntervalSince(started)
        usleep(1_500_000)
        #expect(agent.stop() == 0, "\(agent.log)")
        let (screen, apps) = try report(runner, account.name)
        #expect(abs(Double(screen) - truth) <= 1.0, "screen \(screen) s, truth \(truth) s; \(apps)")
        #expect(abs(Double(apps["testgame"] ?? 0) - truth) <= 1.0, "testgame \(apps), truth \(truth) s")
        #expect(apps["not-a-game"] == nil, "the renamed copy is the same app: \(apps)")
        #expect(apps["sleep"] == nil)
        let events = try runner.ok(["events", "--json"]).stdout
        #expect(events.contains("\"kind\": \"agent-started\""))
        #expect(events.contains("\"kind\": \"agent-stopped\""))
        #expect(events.contains("\"kind\": \"logind-unavailable\""))
        // The agent's threads appended these events; their chain is whole.
        let verified = try runner.ok(["events", "--verify"]).stdout
        #expect(verified.hasPrefix("audit log intact: "), "\(verified)")
    }

    /// A launcher (here a shell script) that later execs the game: from the exec on, the same
    /// process counts as the game, even without the process connector.
    @Test func aLauncherThatExecsTheGameCountsAsTheGameFromTheExec() throws {
        let (runner, account, game, _) = try setUp()
        defer { runner.cleanUp() }
        let agent = try AgentProcess(runner, arguments: ["--no-process-connector"])
        let started = Date()
        // Not `sleep` for the pause: the test game is a copy of /bin/sleep, so sleep would count as it.
        let launcher = try runAs(account, "/bin/sh", ["-c", "timeout 2 tail -f /dev/null; exec \(game) 30"])
        usleep(2_000_000)
        let execAt = Date()
        usleep(3_000_000)
        kill(launcher, SIGKILL)
        _ = waitForExit(launcher)
        let ended = Date()
        usleep(500_000)
        #expect(agent.stop() == 0, "\(agent.log)")
        let (screen, apps) = try report(runner, account.name)
        #expect(abs(Double(screen) - ended.timeIntervalSince(started)) <= 1.0, "screen \(screen) s; \(apps)")
        #expect(abs(Double(apps["testgame"] ?? 0) - ended.timeIntervalSince(execAt)) <= 1.0, "\(apps)")
    }

    @Test func aChildSeesOnlyTheirOwnStatus() throws {
        let (runner, account, game, _) = try setUp()
        defer { runner.cleanUp() }
        try runner.ok(["user", "add", "nobody"])
        // The agent enforces what it manages: keep "nobody" (daemons run as it) unrestricted.
        try runner.ok(["limit", "nobody", "unlimited"])
        try runner.ok(["bedtime", "nobody", "off"])
        let agent = try AgentProcess(runner)
        defer { _ = agent.stop() }
        let process = try runAs(account, game, ["30"])
        defer {
            kill(process, SIGKILL)
            _ = waitForExit(process)
        }
        usleep(1_500_000)
        let own = try runner.run(["status", "--json", "--socket", agent.socketPath], asUser: account.name)
        #expect(own.status == 0, "\(own)")
        #expect(own.stdout.contains("\"user\": \"\(account.name)\""))
        #expect(own.stdout.contains("\"app\": \"testgame\""))
        #expect(own.stdout.contains("\"running\": true"))
        #expect(own.stdout.contains("\"state\": \"allowed\""))
        let other = try runner.run(["status", "nobody", "--socket", agent.socketPath], asUser: account.name)
        #expect(other.status == 77)
        #expect(other.stderr == "curfew: you may only see your own status, not nobody's\n")
        // Asking the agent directly for someone else is refused by the agent itself (SO_PEERCRED).
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            s.sendall(b'{"command":"status","user":"nobody"}\\n'); print(s.makefile().readline().strip())
            """
        let direct = try CurfewRunner.capture("/usr/bin/python3", ["-c", script, agent.socketPath], asUser: account.name)
        #expect(direct == "{\"error\":\"not-permitted\",\"message\":\"you may only see your own status\",\"ok\":false}\n")
        // The parent sees anyone.
        let parent = try runner.ok(["status", account.name, "--socket", agent.socketPath])
        #expect(parent.stdout.hasPrefix("\(account.name) on "))
        // A child reads their own report through the agent, never another's: the state directory is the parent's.
        let report = try runner.run(["report", "nobody", "--socket", agent.socketPath], asUser: account.name)
        #expect(report.status == 77, "\(report)")
        #expect(report.stderr == "curfew: you may only see your own report, not nobody's\n")
        #expect(try runner.run(["events"], asUser: account.name).status == 77)
    }

    /// With logind (python-dbusmock's template on a private bus): screen time counts only while a
    /// session of the user is active, unlocked and not idle, and not while the machine sleeps.
    @Test func countsOnlyWhileTheSessionIsActiveUnlockedAndNotIdle() throws {
        let (runner, account, _, _) = try setUp()
        defer { runner.cleanUp() }
        let bus = try PrivateLogindBus()
        defer { bus.shutdown() }
        let agent = try AgentProcess(runner, logindBus: bus.address)
        var counted: TimeInterval = 0
        var since = Date()
        func phase(_ commands: [[Any]], counting: Bool, seconds: Double) throws {
            try bus.mock(commands)
            let now = Date()
            since = now
            usleep(UInt32(seconds * 1_000_000))
            if counting { counted += Date().timeIntervalSince(since) }
        }
        try phase([["new_session", "c1", "seat0", Int(account.uid), account.name, true]], counting: true, seconds: 3)
        try phase([["set_session_property", "c1", "LockedHint", true]], counting: false, seconds: 2)
        try phase([["set_session_property", "c1", "LockedHint", false]], counting: true, seconds: 2)
        try phase([["set_session_property", "c1", "IdleHint", true]], counting: false, seconds: 2)
        try phase([["set_session_property", "c1", "IdleHint", false]], counting: true, seconds: 1.5)
        try phase([["prepare_for_sleep", true]], counting: false, seconds: 2)
        try phase([["prepare_for_sleep", false]], counting: true, seconds: 1.5)
        try phase([["remove_session", "c1"]], counting: false, seconds: 2)
        #expect(agent.stop() == 0, "\(agent.log)")
        let (screen, _) = try report(runner, account.name)
        #expect(abs(Double(screen) - counted) <= 1.0, "screen \(screen) s, counted \(counted) s\n\(agent.log)")
        // Nothing was asked of logind: tracking only reads.
        #expect(try bus.methodCalls("LockSession").isEmpty)
        #expect(try bus.methodCalls("TerminateSession").isEmpty)
    }

    @Test func killNineLosesAtMostFiveSecondsAndNeverCountsTwice() throws {
        let (runner, account, game, _) = try setUp()
        defer { runner.cleanUp() }
        let started = Date()
        let process = try runAs(account, game, ["60"])
        defer {
            kill(process, SIGKILL)
            _ = waitForExit(process)
        }
        var agent = try AgentProcess(runner)
        usleep(6_000_000)
        agent.killHard()
        let restarted = Date()
        agent = try AgentProcess(runner)
        usleep(3_000_000)
        #expect(agent.stop() == 0)
        let truth = Date().timeIntervalSince(started)
        let downtime = Date().timeIntervalSince(restarted) - 3.0
        let (screen, _) = try report(runner, account.name)
        #expect(Double(screen) <= truth + 1.0, "screen \(screen) s, truth \(truth) s")
        #expect(Double(screen) >= truth - 5.0 - downtime - 1.0, "screen \(screen) s, truth \(truth) s, downtime \(downtime) s")
        let check = try CurfewRunner.capture("/usr/bin/sqlite3", ["\(runner.stateDir)/curfew.db", "PRAGMA integrity_check"])
        #expect(check == "ok\n")
    }

}
