import CLinux
import CurfewLinux
import CurfewTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A pseudo-terminal whose slave belongs to a user, as login or sshd hands one over: what the agent
/// writes to that user's terminals arrives on the master side.
final class UserTerminal {
    let master: Int32
    let path: String

    init(owner: Accounts.Account) throws {
        master = posix_openpt(O_RDWR | O_NOCTTY)
        var name = [CChar](repeating: 0, count: 128)
        guard master >= 0, grantpt(master) == 0, unlockpt(master) == 0, ptsname_r(master, &name, name.count) == 0 else {
            throw TestFailure("cannot open a pty: errno \(errno)")
        }
        path = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard chown(path, owner.uid, owner.gid) == 0 else { throw TestFailure("chown \(path): errno \(errno)") }
        _ = fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK)
    }

    deinit { close(master) }

    /// Everything written to the terminal so far.
    private(set) var text = ""

    func read() -> String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = Glibc.read(master, &buffer, buffer.count)
            guard count > 0 else { break }
            text += String(decoding: buffer[0..<count], as: UTF8.self)
        }
        return text
    }
}

/// Enforcement end to end: the real agent, real processes of the real test account, real signals.
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: a test account, its processes and signals"))
struct EnforcementEndToEndTests {
    let base = AgentTests()

    /// The test account managed in UTC with `limit`, no bedtime, and the test game blocked or limited.
    func setUp(limit: String = "8h", game rule: [String]? = nil) throws -> (
        CurfewRunner, Accounts.Account, game: String, renamed: String
    ) {
        let (runner, account, game, renamed) = try base.setUp(account: TestAccount.enforced)
        try runner.ok(["timezone", account.name, "UTC"])
        try runner.ok(["limit", account.name, limit])
        if let rule { try runner.ok(["app"] + rule) }
        return (runner, account, game, renamed)
    }

    /// Adds used time to today (UTC) in the database before the agent starts.
    func seedUsage(_ runner: CurfewRunner, user: String, app: String = "", milliseconds: Int64) throws {
        let formatter = DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        let day = formatter.string(from: Date())
        let sql = "INSERT INTO usage (user, day, hour, app, milliseconds) VALUES ('\(user)', '\(day)', 0, '\(app)', \(milliseconds));"
        #expect(try CurfewRunner.runTool("/usr/bin/sqlite3", ["\(runner.stateDir)/curfew.db", sql]) == 0)
    }

    func agent(_ runner: CurfewRunner, logindBus: String = "none", arguments: [String] = []) throws -> AgentProcess {
        try AgentProcess(
            runner, extraEnvironment: ["TZ": "UTC"], logindBus: logindBus,
            arguments: ["--no-process-connector", "--stop-grace", "1"] + arguments)
    }

    /// Waits up to `seconds` for our child `pid` to die; how long it lived, nil if it still runs.
    func death(of pid: Int32, within seconds: Double) -> Double? {
        let start = Date()
        var status: Int32 = 0
        while Date().timeIntervalSince(start) < seconds {
            if waitpid(pid, &status, WNOHANG) == pid { return Date().timeIntervalSince(start) }
            usleep(2_000)
        }
        return nil
    }

    func events(_ runner: CurfewRunner, kind: String) throws -> [[String: Any]] {
        let output = try runner.ok(["events", "--json"]).stdout
        guard let all = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]] else {
            throw TestFailure("bad events: \(output)")
        }
        return all.filter { $0["kind"] as? String == kind }
    }

    @Test func aBlockedAppDiesWithinASecondEveryTimeAndNothingElseIsTouched() throws {
        let (runner, account, game, renamed) = try setUp(game: ["block", TestAccount.enforced, "testgame"])
        defer { runner.cleanUp() }
        // An unrelated process of the same user, and one of root running the same binary.
        let unrelated = try base.runAs(account, "/usr/bin/tail", ["-f", "/dev/null"])
        let rootsCopy = try spawnLogged(game, ["600"], environment: [:], log: "/dev/null")
        defer {
            for pid in [unrelated, rootsCopy] {
                kill(pid, SIGKILL)
                _ = waitForExit(pid)
            }
        }
        let agent = try agent(runner)
        defer { _ = agent.stop() }
        let launches: [(String, [String])] = [
            (game, ["600"]),
            // A renamed copy of the same binary is the same app.
            (renamed, ["600"]),
            // A shell script launcher that execs the game.
            ("/bin/sh", ["-c", "exec \(game) 600"]),
            // A launcher that runs the game as its child: the game dies, the launcher goes on.
            ("/bin/sh", ["-c", "\(game) 600; sleep 0.2"]),
        ]
        var lifetimes: [Double] = []
        for index in 0..<52 {
            let (path, arguments) = launches[index % launches.count]
            let pid = try base.runAs(account, path, arguments)
            let started = Date()
            guard death(of: pid, within: 3) != nil else {
                kill(pid, SIGKILL)
                _ = waitForExit(pid)
                Issue.record("launch \(index) (\(path) \(arguments)) still ran after 3 s\n\(agent.log)")
                continue
            }
            lifetimes.append(Date().timeIntervalSince(started))
        }
        let slowest = lifetimes.max() ?? 99
        #expect(lifetimes.count == 52)
        #expect(slowest < 1.0, "lifetimes: \(lifetimes.map { String(format: "%.3f", $0) })")
        // Untouched: the same user's other process and root's copy of the game.
        #expect(kill(unrelated, 0) == 0 && waitpid(unrelated, nil, WNOHANG) == 0, "the unrelated process was hit")
        #expect(kill(rootsCopy, 0) == 0 && waitpid(rootsCopy, nil, WNOHANG) == 0, "another user's process was hit")
        // Events reach the database with the tracker's next flush (every 2 s).
        var stopped: [[String: Any]] = []
        try waitUntil(seconds: 5, "52 app-stopped events") {
            stopped = (try? events(runner, kind: "app-stopped")) ?? []
            return stopped.count >= 52
        }
        #expect(stopped.allSatisfy { $0["message"] as? String == "testgame was stopped: a parent blocked it" })
    }

    @Test func anAppPastItsOwnLimitIsStoppedAndTheChildIsTold() throws {
        let (runner, account, game, _) = try setUp(game: ["limit", TestAccount.enforced, "testgame", "15m"])
        defer { runner.cleanUp() }
        try seedUsage(runner, user: account.name, app: "testgame", milliseconds: 15 * 60 * 1000)
        let terminal = try UserTerminal(owner: account)
        let other = try base.runAs(account, "/usr/bin/tail", ["-f", "/dev/null"])
        defer {
            kill(other, SIGKILL)
            _ = waitForExit(other)
        }
        let agent = try agent(runner)
        defer { _ = agent.stop() }
        let pid = try base.runAs(account, game, ["600"])
        #expect(death(of: pid, within: 1.5) != nil, "the game outlived its limit\n\(agent.log)")
        try waitUntil(seconds: 3, "the message on the child's terminal") {
            terminal.read().contains("testgame was stopped: its daily limit of 15m is used up")
        }
        #expect(kill(other, 0) == 0 && waitpid(other, nil, WNOHANG) == 0, "screen time is left: other processes stay")
    }

    /// Without logind, `logout` stops every process of the user; logins are refused with the reason and
    /// the time they may log in again; root and users Curfew does not manage always get in.
    @Test func atTheLimitTheUsersProcessesStopAndLoginsAreRefused() throws {
        let (runner, account, _, _) = try setUp(limit: "15m")
        defer { runner.cleanUp() }
        try seedUsage(runner, user: account.name, milliseconds: 15 * 60 * 1000)
        let process = try base.runAs(account, "/usr/bin/tail", ["-f", "/dev/null"])
        let agent = try agent(runner)
        defer { _ = agent.stop() }
        #expect(death(of: process, within: 2) != nil, "the user's process outlived the lockout\n\(agent.log)")
        let refused = try runner.run(["check-login", "--user", account.name, "--socket", agent.socketPath])
        #expect(refused.status == 77, "\(refused)")
        #expect(
            refused.stdout
                == "Curfew: \(account.name) may not log in now: today's limit of 15m is used up. You may log in again tomorrow at 00:00.\n",
            "\(refused)")
        let root = try runner.run(["check-login", "--user", "root", "--socket", agent.socketPath])
        #expect(root.status == 0 && root.stdout.isEmpty, "\(root)")
        let unmanaged = try runner.run(["check-login", "--user", "daemon", "--socket", agent.socketPath])
        #expect(unmanaged.status == 0 && unmanaged.stdout.isEmpty, "\(unmanaged)")
        // From pam_exec: the user comes in PAM_USER.
        let pam = try runner.run(
            ["check-login", "--socket", agent.socketPath], environment: ["PAM_USER": account.name, "PAM_SERVICE": "su"])
        #expect(pam.status == 77)
        usleep(300_000)
        let logins = try events(runner, kind: "login-refused")
        #expect(logins.count == 2, "\(logins)")
        #expect(try events(runner, kind: "lockout").count == 1)
        // Without the agent, the state on disk gives the same answer.
        #expect(agent.stop() == 0)
        let offline = try runner.run(["check-login", "--user", account.name, "--socket", agent.socketPath])
        #expect(offline.status == 77 && offline.stdout == refused.stdout, "\(offline)")
    }

    @Test func warningsReachTheChildsTerminalsThenTheLockoutBites() throws {
        let (runner, account, _, _) = try setUp(limit: "15m")
        defer { runner.cleanUp() }
        // 14 seconds left.
        try seedUsage(runner, user: account.name, milliseconds: (15 * 60 - 14) * 1000)
        let terminal = try UserTerminal(owner: account)
        let process = try base.runAs(account, "/usr/bin/tail", ["-f", "/dev/null"])
        let agent = try agent(runner)
        defer { _ = agent.stop() }
        try waitUntil(seconds: 3, "the first warning") { terminal.read().contains("of screen time left today") }
        #expect(terminal.text.contains("Curfew: 1"), "\(terminal.text)")
        try waitUntil(seconds: 8, "the 10-second countdown") { terminal.read().contains("10 seconds of screen time left today") }
        #expect(death(of: process, within: 14) != nil, "no lockout\n\(agent.log)")
        try waitUntil(seconds: 3, "the lockout message") { terminal.read().contains("Curfew: time is up") }
        let warnings = try events(runner, kind: "warning")
        #expect(warnings.count == 2, "\(warnings)")
    }

    /// With logind (python-dbusmock): `logout` asks logind to end the session; `lock` locks it, and
    /// locks it again after the child unlocks it.
    @Test func logindEndsOrLocksTheSessions() throws {
        for lockout in ["logout", "lock"] {
            let (runner, account, _, _) = try setUp(limit: "15m")
            defer { runner.cleanUp() }
            try runner.ok(["lockout", account.name, lockout])
            try seedUsage(runner, user: account.name, milliseconds: 15 * 60 * 1000)
            let bus = try PrivateLogindBus()
            defer { bus.shutdown() }
            // A desktop session: `lock` locks only graphical sessions (and ends the others).
            try bus.mock([
                ["new_session", "c7", "seat0", Int(account.uid), account.name, true], ["set_session_property", "c7", "Type", "x11"],
            ])
            let agent = try agent(runner, logindBus: bus.address)
            defer { _ = agent.stop() }
            if lockout == "logout" {
                try waitUntil(seconds: 3, "TerminateSession") { (try? bus.methodCalls("TerminateSession").isEmpty) == false }
                #expect(try bus.methodCalls("TerminateSession").first == ["c7"])
                #expect(try bus.methodCalls("LockSession").isEmpty)
                // The mock ignores TerminateSession, as a stuck desktop might: 5 s later every process
                // of the user is killed.
                try waitUntil(seconds: 8, "KillUser") { (try? bus.methodCalls("KillUser").isEmpty) == false }
                #expect(try bus.methodCalls("KillUser").first == ["\(account.uid)", "9"])
                #expect(try events(runner, kind: "user-killed").count >= 1)
            } else {
                try waitUntil(seconds: 3, "LockSession") { (try? bus.methodCalls("LockSession").isEmpty) == false }
                try bus.mock([["set_session_property", "c7", "LockedHint", true]])
                // The hint is the child's to set: locked again every few seconds whatever it says.
                let whileLocked = try bus.methodCalls("LockSession").count
                try waitUntil(seconds: 8, "LockSession while LockedHint says locked") {
                    ((try? bus.methodCalls("LockSession").count) ?? 0) > whileLocked
                }
                let afterUnlock = try bus.methodCalls("LockSession").count
                // The child unlocks: locked again.
                try bus.mock([["set_session_property", "c7", "LockedHint", false]])
                try waitUntil(seconds: 8, "LockSession again") { ((try? bus.methodCalls("LockSession").count) ?? 0) > afterUnlock }
                #expect(try bus.methodCalls("TerminateSession").isEmpty)
                #expect(try events(runner, kind: "session-locked").count >= 2)
            }
        }
    }

    /// `lock` on a graphical session that nothing locks (no screen locker answers logind's Lock, so
    /// LockedHint stays false): asked to lock every few seconds, then ended once it has stayed unlocked
    /// for 10 s, with the reason in the event.
    @Test func lockEndsAGraphicalSessionNothingLocks() throws {
        let (runner, account, _, _) = try setUp(limit: "15m")
        defer { runner.cleanUp() }
        try runner.ok(["lockout", account.name, "lock"])
        try seedUsage(runner, user: account.name, milliseconds: 15 * 60 * 1000)
        let bus = try PrivateLogindBus()
        defer { bus.shutdown() }
        try bus.mock([
            ["new_session", "c9", "seat0", Int(account.uid), account.name, true], ["set_session_property", "c9", "Type", "wayland"],
        ])
        let agent = try agent(runner, logindBus: bus.address)
        defer { _ = agent.stop() }
        try waitUntil(seconds: 3, "LockSession") { (try? bus.methodCalls("LockSession").isEmpty) == false }
        let firstLock = Date()
        #expect(try bus.methodCalls("TerminateSession").isEmpty, "a session is asked to lock before it is ended")
        try waitUntil(seconds: 20, "TerminateSession of the session nothing locked") {
            (try? bus.methodCalls("TerminateSession").isEmpty) == false
        }
        let waited = Date().timeIntervalSince(firstLock)
        #expect(waited >= 9, "ended \(waited) s after the first LockSession, before the locker had 10 s")
        #expect(try bus.methodCalls("TerminateSession").first == ["c9"])
        #expect(try bus.methodCalls("LockSession").count >= 3, "locked again every 3 s meanwhile")
        let ended = try events(runner, kind: "session-ended")
        #expect(ended.contains { ($0["message"] as? String)?.hasSuffix("was ended: nothing locked it within 10 s") == true }, "\(ended)")
    }

    /// The last good policy stays when the records go bad; a managed user with no policy at all is
    /// locked out, unless the agent fails open.
    @Test func aBrokenPolicyKeepsTheLastGoodOneAndNoneFailsClosed() throws {
        let (runner, account, _, _) = try setUp(limit: "15m")
        defer { runner.cleanUp() }
        try seedUsage(runner, user: account.name, milliseconds: 15 * 60 * 1000)
        var agent = try agent(runner)
        try waitUntil(seconds: 3, "the managed-users list") {
            (try? String(contentsOfFile: "\(runner.stateDir)/managed-users", encoding: .utf8)) == "\(account.name)\n"
        }
        #expect(agent.stop() == 0)
        // Every record gone (a child with write access to the shared folder, say): nothing changes.
        for record in try runner.recordFiles() { try FileManager.default.removeItem(atPath: "\(runner.sharedDir)/records/\(record)") }
        agent = try self.agent(runner)
        let kept = try runner.ok(["status", account.name, "--json", "--socket", agent.socketPath]).stdout
        #expect(kept.contains("\"limitMinutes\": 15"), "\(kept)")
        #expect(try events(runner, kind: "policy-kept").count >= 1)
        #expect(agent.stop() == 0)

        // No last good policy either (the database was lost): closed.
        for suffix in ["", "-wal", "-shm"] { unlink("\(runner.stateDir)/curfew.db\(suffix)") }
        agent = try self.agent(runner)
        let closed = try runner.run(["check-login", "--user", account.name, "--socket", agent.socketPath])
        #expect(closed.status == 77, "\(closed)")
        #expect(try events(runner, kind: "fail-closed").count == 1)
        #expect(agent.stop() == 0)
        agent = try self.agent(runner, arguments: ["--fail-open"])
        let open = try runner.run(["check-login", "--user", account.name, "--socket", agent.socketPath])
        #expect(open.status == 0, "\(open)")
        #expect(agent.stop() == 0)
    }
}
