import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 16's rules enforced by the real agent on a real child account of their own (`curfewsched`),
/// so the suites that count or stop `curfewkid` and `curfewlocked` are not touched.
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: a test account, its processes and signals"))
struct ScheduleAgentTests {
    static let account = "curfewsched"
    let enforcement = EnforcementEndToEndTests()

    /// `HH:MM` in UTC of an instant.
    static func clock(_ instant: Int64) -> String {
        let minutes = Int(instant % 86_400) / 60
        return String(format: "%02d:%02d", minutes / 60, minutes % 60)
    }

    /// A downtime window that starts at the next minute (at least 3 seconds away) stops the child's
    /// process when it starts, and a login is then refused naming the window and its end.
    @Test func aDowntimeWindowStopsTheChildAndRefusesTheLoginByName() throws {
        let (runner, account, _, _) = try enforcement.base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        try runner.ok(["timezone", account.name, "UTC"])
        let now = Int64(Date().timeIntervalSince1970)
        let start = (now + 3 + 59) / 60 * 60
        let end = start + 120
        try runner.ok(["downtime", account.name, "add", "chores", "\(Self.clock(start))-\(Self.clock(end))"])
        let process = try enforcement.base.runAs(account, "/usr/bin/tail", ["-f", "/dev/null"])
        defer {
            kill(process, SIGKILL)
            _ = waitForExit(process)
        }
        let agent = try enforcement.agent(runner)
        defer { _ = agent.stop() }
        let before = try runner.run(["check-login", "--user", account.name, "--socket", agent.socketPath])
        #expect(before.status == 0, "\(before)")
        let wait = Double(start - Int64(Date().timeIntervalSince1970))
        #expect(enforcement.death(of: process, within: wait - 0.5) == nil, "stopped before the window\n\(agent.log)")
        #expect(enforcement.death(of: process, within: 3.5) != nil, "the window did not stop the child's process\n\(agent.log)")
        let refused = try runner.run(["check-login", "--user", account.name, "--socket", agent.socketPath])
        #expect(refused.status == 77, "\(refused)")
        let again = end / 86_400 > start / 86_400 ? "tomorrow at \(Self.clock(end))" : "at \(Self.clock(end))"
        #expect(
            refused.stdout
                == "Curfew: \(account.name) may not log in now: downtime: chores until \(Self.clock(end)). You may log in again \(again).\n",
            "\(refused)")
        usleep(300_000)
        let lockouts = try enforcement.events(runner, kind: "lockout")
        #expect(lockouts.count == 1 && (lockouts.first?["message"] as? String)?.hasPrefix("downtime: chores until \(Self.clock(end))") == true, "\(lockouts)")
    }
}
