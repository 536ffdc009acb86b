import CurfewLinux
import CurfewTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Lockouts that hold, end to end with the real agent and the real test account.
extension EnforcementEndToEndTests {
    /// Without logind, `logout` stops the child's processes, but not an always-allowed app: limits and
    /// bedtime do not stop those. Logins stay refused meanwhile.
    @Test func withoutLogindAnAlwaysAllowedAppSurvivesALogoutLockout() throws {
        let (runner, account, game, _) = try setUp(limit: "15m", game: ["allow", TestAccount.enforced, "testgame"])
        defer { runner.cleanUp() }
        try seedUsage(runner, user: account.name, milliseconds: 15 * 60 * 1000)
        let allowed = try base.runAs(account, game, ["600"])
        let other = try base.runAs(account, "/usr/bin/tail", ["-f", "/dev/null"])
        defer {
            for pid in [allowed, other] {
                kill(pid, SIGKILL)
                _ = waitForExit(pid)
            }
        }
        let agent = try agent(runner)
        defer { _ = agent.stop() }
        #expect(death(of: other, within: 3) != nil, "the process that is not always allowed outlived the lockout\n\(agent.log)")
        // Several passes of the enforcement later, the allowed app still runs.
        usleep(2_000_000)
        #expect(kill(allowed, 0) == 0 && waitpid(allowed, nil, WNOHANG) == 0, "the always-allowed app was stopped\n\(agent.log)")
        let refused = try runner.run(["check-login", "--user", account.name, "--socket", agent.socketPath])
        #expect(refused.status == 77, "\(refused)")
        var stopped: [[String: Any]] = []
        try waitUntil(seconds: 5, "the app-stopped event") {
            stopped = (try? events(runner, kind: "app-stopped")) ?? []
            return !stopped.isEmpty
        }
        #expect(!stopped.contains { ($0["message"] as? String ?? "").contains("testgame") }, "\(stopped)")
    }

    /// With logind (python-dbusmock): while an always-allowed app runs, `logout` neither ends nor
    /// locks the session but stops everything else; when the allowed app exits the lockout completes.
    @Test func withLogindAnAlwaysAllowedAppHoldsOffTheLogoutUntilItExits() throws {
        let (runner, account, game, _) = try setUp(limit: "15m", game: ["allow", TestAccount.enforced, "testgame"])
        defer { runner.cleanUp() }
        try seedUsage(runner, user: account.name, milliseconds: 15 * 60 * 1000)
        let bus = try PrivateLogindBus()
        defer { bus.shutdown() }
        try bus.mock([
            ["new_session", "c9", "seat0", Int(account.uid), account.name, true], ["set_session_property", "c9", "Type", "x11"],
        ])
        let allowed = try base.runAs(account, game, ["600"])
        let other = try base.runAs(account, "/usr/bin/tail", ["-f", "/dev/null"])
        defer {
            for pid in [allowed, other] {
                kill(pid, SIGKILL)
                _ = waitForExit(pid)
            }
        }
        let agent = try agent(runner, logindBus: bus.address)
        defer { _ = agent.stop() }
        #expect(death(of: other, within: 4) != nil, "the app that is not always allowed outlived the lockout\n\(agent.log)")
        usleep(2_000_000)
        #expect(kill(allowed, 0) == 0 && waitpid(allowed, nil, WNOHANG) == 0, "the always-allowed app was stopped\n\(agent.log)")
        #expect(try bus.methodCalls("TerminateSession").isEmpty, "the session of an always-allowed app was ended")
        #expect(try bus.methodCalls("LockSession").isEmpty)
        // The allowed app exits: the lockout completes.
        kill(allowed, SIGKILL)
        _ = waitForExit(allowed)
        try waitUntil(seconds: 8, "TerminateSession once the allowed app exited") {
            (try? bus.methodCalls("TerminateSession").isEmpty) == false
        }
        #expect(try bus.methodCalls("TerminateSession").first == ["c9"])
    }

    /// With logind (python-dbusmock), `lock` ends a session that has no screen to lock (a text console).
    @Test func lockEndsASessionThatCannotBeLocked() throws {
        let (runner, account, _, _) = try setUp(limit: "15m")
        defer { runner.cleanUp() }
        try runner.ok(["lockout", account.name, "lock"])
        try seedUsage(runner, user: account.name, milliseconds: 15 * 60 * 1000)
        let bus = try PrivateLogindBus()
        defer { bus.shutdown() }
        try bus.mock([
            ["new_session", "c8", "seat0", Int(account.uid), account.name, true], ["set_session_property", "c8", "Type", "tty"],
        ])
        let agent = try agent(runner, logindBus: bus.address)
        defer { _ = agent.stop() }
        try waitUntil(seconds: 5, "TerminateSession") { (try? bus.methodCalls("TerminateSession").isEmpty) == false }
        #expect(try bus.methodCalls("TerminateSession").first == ["c8"])
        #expect(try bus.methodCalls("LockSession").isEmpty)
    }
}
