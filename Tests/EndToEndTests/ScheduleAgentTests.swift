import CurfewCore
import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The schedule rules enforced by the real agent on a real child account of their own (`curfewsched`),
/// so the suites that count or stop `curfewkid` and `curfewlocked` are not touched.
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: a test account, its processes and signals"))
struct ScheduleAgentTests {
    static let account = "curfewsched"
    let enforcement = EnforcementEndToEndTests()

    /// A downtime window that starts at the next minute (at least 3 seconds away) stops the child's
    /// process when it starts, and a login is then refused naming the window and its end.
    @Test func aDowntimeWindowStopsTheChildAndRefusesTheLoginByName() throws {
        let (runner, account, _, _) = try enforcement.base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        try runner.ok(["timezone", account.name, "UTC"])
        let now = Int64(Date().timeIntervalSince1970)
        let start = (now + 3 + 59) / 60 * 60
        let end = start + 120
        try runner.ok(["downtime", account.name, "add", "chores", "\(utcClock(start))-\(utcClock(end))"])
        let process = try enforcement.base.runAs(account, "/usr/bin/tail", ["-f", "/dev/null"])
        defer {
            kill(process, SIGKILL)
            _ = waitForExit(process)
        }
        let agent = try enforcement.agent(runner)
        defer { _ = agent.stop() }
        let before = try runner.run(["check-login", "--user", account.name, "--socket", agent.socketPath])
        #expect(before.status == 0, "\(before)")
        // Exact, not whole seconds: a truncated now makes the wait up to a second too long, and the
        // agent then looks early when it is on time.
        let wait = Double(start) - Date().timeIntervalSince1970
        #expect(enforcement.death(of: process, within: wait - 0.5) == nil, "stopped before the window\n\(agent.log)")
        #expect(enforcement.death(of: process, within: 3.5) != nil, "the window did not stop the child's process\n\(agent.log)")
        let refused = try runner.run(["check-login", "--user", account.name, "--socket", agent.socketPath])
        #expect(refused.status == 77, "\(refused)")
        let again = (end / 86_400 > start / 86_400 ? "" : "at ") + utcWhen(end, now: start)
        #expect(
            refused.stdout
                == "Curfew: \(account.name) may not log in now: downtime: chores until \(utcClock(end)). You may log in again \(again).\n",
            "\(refused)")
        usleep(300_000)
        let lockouts = try enforcement.events(runner, kind: "lockout")
        #expect(lockouts.count == 1 && (lockouts.first?["message"] as? String)?.hasPrefix("downtime: chores until \(utcClock(end))") == true, "\(lockouts)")
    }

    /// A break enforced after `afterMinutes` of real screen time: the test moves the agent's clock
    /// (curfewd's hidden --clock-offset-file) instead of waiting 15 minutes. The child's process is
    /// stopped when the stretch reaches 15 minutes, logins are refused naming the break, and after a
    /// pause of the break's length they are allowed again.
    @Test func aBreakIsEnforcedAfterAfterMinutesOfScreenTimeAndEndsAfterItsLength() throws {
        let (runner, account, _, _) = try enforcement.base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        try runner.ok(["timezone", account.name, "UTC"])
        try runner.ok(["breaks", account.name, "15m", "5m"])
        let offsetFile = runner.root.appendingPathComponent("clock-offset").path
        func moveClock(byMilliseconds offset: Int64) throws {
            try "\(offset)\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
            chmod(offsetFile, 0o644)
        }
        try moveClock(byMilliseconds: 0)
        let process = try enforcement.base.runAs(account, "/usr/bin/tail", ["-f", "/dev/null"])
        defer {
            kill(process, SIGKILL)
            _ = waitForExit(process)
        }
        let agent = try enforcement.agent(runner, arguments: ["--clock-offset-file", offsetFile])
        defer { _ = agent.stop() }
        // Counting (no logind: a process of the child counts) for a moment, then 15 minutes pass.
        #expect(enforcement.death(of: process, within: 2) == nil, "stopped before any break\n\(agent.log)")
        try moveClock(byMilliseconds: 15 * 60_000)
        #expect(enforcement.death(of: process, within: 5) != nil, "the break did not stop the child's process\n\(agent.log)")
        let refused = try runner.run(["check-login", "--user", account.name, "--socket", agent.socketPath])
        #expect(refused.status == 77, "\(refused)")
        #expect(refused.stdout.contains("break"), "\(refused)")
        // Five minutes of pause (nothing of the child runs): the break is over. The agent credits an
        // interval by what it saw at its start, so the clock moves only once it has seen the child stop.
        for _ in 0..<40 {
            let status = try runner.run(["status", account.name, "--json", "--socket", agent.socketPath])
            if status.stdout.contains("\"counting\": false") { break }
            usleep(100_000)
        }
        usleep(1_500_000)
        try moveClock(byMilliseconds: 20 * 60_000 + 2_000)
        var allowed = try runner.run(["check-login", "--user", account.name, "--socket", agent.socketPath])
        for _ in 0..<20 where allowed.status != 0 {
            usleep(250_000)
            allowed = try runner.run(["check-login", "--user", account.name, "--socket", agent.socketPath])
        }
        #expect(allowed.status == 0, "\(allowed)\n\(agent.log)")
    }

    /// The stretch since the last break survives the agent: stopped (as by a reboot) and started again
    /// within less than a break's length, it goes on from where it was, not from zero.
    @Test func theStretchSinceTheLastBreakSurvivesARestart() throws {
        let (runner, account, _, _) = try enforcement.base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        try runner.ok(["breaks", account.name, "45m", "10m"])
        let process = try enforcement.base.runAs(account, "/usr/bin/tail", ["-f", "/dev/null"])
        defer {
            kill(process, SIGKILL)
            _ = waitForExit(process)
        }
        func stored() throws -> (continuous: Int64, pause: Int64)? {
            let text = try CurfewRunner.capture(
                "/usr/bin/sqlite3",
                ["\(runner.stateDir)/curfew.db", "SELECT value FROM agent_state WHERE key = 'break-clock:\(account.name)'"])
            let fields = text.split(separator: " ").compactMap { Int64($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            return fields.count == 3 ? (fields[0], fields[1]) : nil
        }
        /// Today's screen time as the running agent counts it.
        func counted(_ agent: AgentProcess) -> Int {
            let text = (try? runner.run(["status", account.name, "--json", "--socket", agent.socketPath]).stdout) ?? ""
            let report = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
            return report?["screenSeconds"] as? Int ?? 0
        }
        // Without logind the child counts while they have a process: at least 4 s of stretch, by the
        // agent's own count (a loaded machine starts the agent late, so not by a fixed sleep).
        let first = try enforcement.agent(runner)
        try waitUntil(seconds: 30, "4 s counted") { counted(first) >= 4 }
        #expect(first.stop() == 0, "\(first.log)")
        let before = try #require(try stored(), "no break clock written\n\(first.log)")
        #expect(before.continuous >= 3_000 && before.pause == 0, "\(before)")
        let second = try enforcement.agent(runner)
        let restarted = counted(second)
        try waitUntil(seconds: 30, "3 s more counted") { counted(second) >= restarted + 3 }
        #expect(second.stop() == 0, "\(second.log)")
        let after = try #require(try stored())
        // Went on: the first run's stretch plus most of the second's (a fresh clock would hold ~3 s).
        #expect(after.continuous >= before.continuous + 2_000, "before \(before), after \(after)")
    }

    /// `curfew extend` run by the child: twice it adds the allowance to today's limit, the third time
    /// in the week it is refused with the reason; each use is in `curfew requests --all` and the events.
    @Test func extendTwiceThenTheThirdTimeInAWeekIsRefused() throws {
        let account = try TestAccount.ensure(Self.account)
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        chmod(runner.root.path, 0o755)
        try runner.ok(["init"])
        try runner.ok(["user", "add", account.name])
        try runner.ok(["limit", account.name, "1h"])
        try runner.ok(["bedtime", account.name, "off"])
        try runner.ok(["timezone", account.name, "UTC"])
        let agent = try AgentProcess(runner)
        defer { agent.killHard() }
        let socket = ["--socket", agent.socketPath]
        let none = try runner.run(["extend"] + socket, asUser: account.name)
        #expect(none.status == 77, "\(none)")
        #expect(none.stderr == "curfew: \(account.name) has no extra time to take without asking; ask a parent with curfew request\n")

        try runner.ok(["allowance", account.name, "15m", "--per-week", "2"])
        var first = try runner.run(["extend"] + socket, asUser: account.name)
        for _ in 0..<20 where first.status != 0 {
            // The agent may not have read the new record yet.
            usleep(250_000)
            first = try runner.run(["extend"] + socket, asUser: account.name)
        }
        #expect(first.status == 0, "\(first)")
        #expect(first.stdout == "15m more today (1 of 2 this week); today's limit is now 1h15m\n")
        let second = try runner.run(["extend"] + socket, asUser: account.name)
        #expect(second.stdout == "15m more today (2 of 2 this week); today's limit is now 1h30m\n", "\(second)")
        let third = try runner.run(["extend"] + socket, asUser: account.name)
        #expect(third.status == 77, "\(third)")
        #expect(third.stderr == "curfew: extra time without asking is used up this week (2 of 2); ask a parent with curfew request\n")
        let root = try runner.run(["extend"] + socket)
        #expect(root.status == 77 && root.stderr == "curfew: root cannot take extra time; grant it with curfew grant\n", "\(root)")

        let status = try runner.ok(["status", account.name, "--json"] + socket).stdout
        #expect(status.contains(#""limitMinutes": 90,"#) && status.contains(#""extraMinutes": 30,"#), "\(status)")
        let requests = try runner.ok(["requests", "--all", "--json"]).stdout
        #expect(requests.components(separatedBy: #""answeredBy": "allowance""#).count == 3, "\(requests)")
        let events = try runner.ok(["events", "--json"]).stdout
        #expect(events.components(separatedBy: #""kind": "self-extension""#).count == 3, "\(events)")
        // Without the agent, the saved state gives the same limit.
        agent.killHard()
        let offline = try runner.ok(["status", account.name, "--json"] + socket).stdout
        #expect(offline.contains(#""limitMinutes": 90,"#), "\(offline)")
    }

    /// A child locked out at bedtime asks for 30 minutes; the parent's `approve` moves tonight's
    /// bedtime so the child may log in again, until the new bedtime.
    @Test func approveAtBedtimeLetsTheChildBackInUntilTheNewBedtime() throws {
        let account = try TestAccount.ensure(Self.account)
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        chmod(runner.root.path, 0o755)
        try runner.ok(["init"])
        try runner.ok(["user", "add", account.name])
        try runner.ok(["limit", account.name, "unlimited"])
        try runner.ok(["timezone", account.name, "UTC"])
        // Without logind the logout lockout stops every process of the child, the child's own
        // `curfew request` too (seen: killed by SIGTERM before it answered); `apps` leaves it running,
        // and logins are refused at bedtime whatever the lockout.
        try runner.ok(["lockout", account.name, "apps"])
        let now = Int64(Date().timeIntervalSince1970)
        let start = now / 60 * 60 - 3600
        try runner.ok(["bedtime", account.name, "\(utcClock(start))-\(utcClock(start + 3 * 3600))"])
        let agent = try AgentProcess(runner)
        defer { agent.killHard() }
        let socket = ["--socket", agent.socketPath]
        let refused = try runner.run(["check-login", "--user", account.name] + socket)
        #expect(refused.status == 77 && refused.stdout.contains("it is bedtime"), "\(refused)")
        let asked = try runner.run(["request", "30m", "--reason", "finish homework"] + socket, asUser: account.name)
        #expect(asked.status == 0, "\(asked)")
        let approved = try runner.ok(["approve", "1"])
        let delay = Int((Int64(Date().timeIntervalSince1970) - start + 59) / 60) + 30
        #expect(
            approved.stdout.hasPrefix(
                "approved request 1: granted \(account.name) until \(utcWhen(start + Int64(delay) * 60)) (bedtime moved) (record "),
            "\(approved)")
        var allowed = try runner.run(["check-login", "--user", account.name] + socket)
        for _ in 0..<40 where allowed.status != 0 {
            usleep(250_000)
            allowed = try runner.run(["check-login", "--user", account.name] + socket)
        }
        #expect(allowed.status == 0, "\(allowed)\n\(agent.log)")
        let status = try runner.ok(["status", account.name, "--json"] + socket).stdout
        #expect(status.contains(#""state": "allowed""#) && status.contains(#""bedtimeDelayMinutes": \#(delay),"#), "\(status)")
        // Until the new bedtime: about 30 minutes of use, not more.
        let report = try JSONSerialization.jsonObject(with: Data(status.utf8)) as? [String: Any]
        let remaining = report?["remainingSeconds"] as? Int ?? 0
        #expect((29 * 60...31 * 60).contains(remaining), "\(status)")
    }
}
