import CurfewCore
import CurfewLinux
import CurfewSync
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// Extra time that answers the need, with the real agent and a real child account: the
// request records what blocks the child, the approval lifts that, and the child is told.

extension ScheduleAgentTests {
    /// A child in a downtime window asks for 30 minutes; the request names the window, and `approve`
    /// moves the window's start to 30 minutes from now, so the child may log in again until then.
    @Test func approveInADowntimeWindowLetsTheChildBackInUntilTheWindowResumes() throws {
        let account = try TestAccount.ensure(Self.account)
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        chmod(runner.root.path, 0o755)
        try runner.ok(["init"])
        try runner.ok(["user", "add", account.name])
        try runner.ok(["limit", account.name, "unlimited"])
        try runner.ok(["bedtime", account.name, "off"])
        try runner.ok(["timezone", account.name, "UTC"])
        // `apps` leaves the child's own `curfew request` running (see the bedtime test above).
        try runner.ok(["lockout", account.name, "apps"])
        let now = Int64(Date().timeIntervalSince1970)
        let start = now / 60 * 60 - 3600
        let end = start + 3 * 3600
        try runner.ok(["downtime", account.name, "add", "chores", "\(utcClock(start))-\(utcClock(end))"])
        let terminal = try UserTerminal(owner: account)
        let agent = try AgentProcess(runner)
        defer { agent.killHard() }
        let socket = ["--socket", agent.socketPath]
        let refused = try runner.run(["check-login", "--user", account.name] + socket)
        #expect(refused.status == 77 && refused.stdout.contains("downtime: chores until \(utcClock(end))"), "\(refused)")

        let asked = try runner.run(["request", "30m", "--reason", "<b>finish</b> homework"] + socket, asUser: account.name)
        #expect(asked.status == 0, "\(asked)")
        #expect(asked.stdout == "asked for 30m more (request 1, blocked by downtime chores); a parent will answer\n", "\(asked)")
        let listed = try runner.ok(["requests"]).stdout.split(separator: "\n").map(String.init)
        #expect(listed.first == "id  user         asked  reason                  blocked by       asked at          status", "\(listed)")
        #expect(
            listed.last?.hasPrefix("1   \(account.name)  30m    <b>finish</b> homework  downtime chores  \(todayUTC()) ") == true,
            "\(listed)")
        let json = try runner.ok(["requests", "--json"]).stdout
        #expect(json.contains(#""cause": "downtime:chores""#), "\(json)")

        let approved = try runner.ok(["approve", "1"])
        let delay = Int((Int64(Date().timeIntervalSince1970) - start + 59) / 60) + 30
        let moved = start + Int64(delay) * 60
        let until = utcClock(moved)
        #expect(
            approved.stdout.hasPrefix("approved request 1: granted \(account.name) until \(utcWhen(moved)) (downtime chores moved) (record "),
            "\(approved)")
        var allowed = try runner.run(["check-login", "--user", account.name] + socket)
        for _ in 0..<40 where allowed.status != 0 {
            usleep(250_000)
            allowed = try runner.run(["check-login", "--user", account.name] + socket)
        }
        #expect(allowed.status == 0, "\(allowed)\n\(agent.log)")
        let status = try runner.ok(["status", account.name, "--json"] + socket).stdout
        #expect(status.contains(#""state": "allowed""#) && status.contains(#""downtimeDelayMinutes": {"#), "\(status)")
        #expect(status.contains(#""chores": \#(delay)"#), "\(status)")
        // Until the window starts again: about 30 minutes, not more.
        let report = try JSONSerialization.jsonObject(with: Data(status.utf8)) as? [String: Any]
        let remaining = report?["remainingSeconds"] as? Int ?? 0
        #expect((29 * 60...31 * 60).contains(remaining), "\(status)")
        let text = try runner.run(["status"] + socket, asUser: account.name).stdout
        #expect(text.contains("chores \(TimeAllowance.format(minutes: delay)) later today (granted)"), "\(text)")
        // Today's periods end at midnight: a window that runs into tomorrow is shown up to 24:00, and
        // one moved past midnight is not today's any more (near midnight, today shows only the end
        // of last night's window).
        let movedToday = moved / 86_400 == Int64(Date().timeIntervalSince1970) / 86_400
        let shownEnd = end / 86_400 > moved / 86_400 ? "24:00" : utcClock(end)
        #expect(!movedToday || text.contains("downtime chores \(until)-\(shownEnd)"), "\(text)")
        #expect(movedToday || text.contains("next change  downtime tomorrow at \(until)"), "\(text)")
        // The child's own schedule (through the agent) has the window where it now is.
        let schedule = try runner.run(["schedule"] + socket, asUser: account.name)
        #expect(schedule.stdout.contains("(granted: downtime chores \(TimeAllowance.format(minutes: delay)) later)"), "\(schedule)")
        #expect(!movedToday || schedule.stdout.contains("\(until)-"), "\(schedule)")
        try waitUntil(seconds: 5, "the child is told what they got and until when") {
            terminal.read().contains("a parent moved downtime chores: you may use the computer until \(utcWhen(moved))")
        }
        let events = try enforcement.events(runner, kind: "extra-time-granted")
        #expect(events.count == 1 && (events.first?["message"] as? String)?.contains("downtime chores") == true, "\(events)")
    }
}

extension ScheduleAgentTests {
    /// A child in a break (the agent's clock moved 15 minutes, as in the break test above) asks for
    /// more time; the request names the break, and `approve` ends it: logins are allowed again.
    @Test func approveInABreakEndsTheBreak() throws {
        let (runner, account, _, _) = try enforcement.base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        // The agent lives 15 minutes ahead and `approve` (the CLI) on the machine's clock: the grant
        // is for the CLI's day. Within 20 minutes of midnight UTC the child's day is an hour east, so
        // both clocks are on the same day.
        let secondOfDay = Int64(Date().timeIntervalSince1970) % 86_400
        try runner.ok(["timezone", account.name, secondOfDay > 86_400 - 20 * 60 ? "Etc/GMT-1" : "UTC"])
        try runner.ok(["breaks", account.name, "15m", "5m"])
        // `apps` leaves the child's own `curfew request` running.
        try runner.ok(["lockout", account.name, "apps"])
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
        let socket = ["--socket", agent.socketPath]
        usleep(2_000_000)
        try moveClock(byMilliseconds: 15 * 60_000)
        var refused = try runner.run(["check-login", "--user", account.name] + socket)
        for _ in 0..<20 where refused.status == 0 {
            usleep(250_000)
            refused = try runner.run(["check-login", "--user", account.name] + socket)
        }
        #expect(refused.status == 77 && refused.stdout.contains("break"), "\(refused)\n\(agent.log)")

        let asked = try runner.run(["request", "30m"] + socket, asUser: account.name)
        #expect(asked.stdout == "asked for 30m more (request 1, blocked by break); a parent will answer\n", "\(asked)")
        let approved = try runner.ok(["approve", "1"])
        #expect(
            approved.stdout.hasPrefix(
                "approved request 1: granted \(account.name) the end of the break now (the next one after 15m of use) (record "),
            "\(approved)")
        var allowed = try runner.run(["check-login", "--user", account.name] + socket)
        for _ in 0..<40 where allowed.status != 0 {
            usleep(250_000)
            allowed = try runner.run(["check-login", "--user", account.name] + socket)
        }
        #expect(allowed.status == 0, "\(allowed)\n\(agent.log)")
    }
}

extension EnforcementEndToEndTests {
    /// An app over its own limit is stopped; the child asks for more of it (an unknown app is refused);
    /// `curfew grant --app` gives it 30 minutes and the agent lets it run again, and tells the child.
    @Test func anAppOverItsLimitGetsMoreTimeThroughGrantApp() throws {
        let (runner, account, game, _) = try setUp(game: ["limit", TestAccount.enforced, "testgame", "15m"])
        defer { runner.cleanUp() }
        try seedUsage(runner, user: account.name, app: "testgame", milliseconds: 15 * 60 * 1000)
        let terminal = try UserTerminal(owner: account)
        let agent = try agent(runner)
        defer { _ = agent.stop() }
        let socket = ["--socket", agent.socketPath]
        let pid = try base.runAs(account, game, ["600"])
        // How fast is another test's subject; here the game only has to be stopped (3 s on a loaded machine).
        #expect(death(of: pid, within: 3) != nil, "the game outlived its limit\n\(agent.log)")

        let unknown = try runner.run(["request", "30m", "--app", "nosuchgame"] + socket, asUser: account.name)
        #expect(unknown.status == 64, "\(unknown)")
        #expect(
            unknown.stderr
                == "curfew: unknown app \"nosuchgame\": not in the app catalog and \(account.name)'s policy has no rule for it\n",
            "\(unknown)")
        let invalid = try runner.run(["request", "30m", "--app", "No Game"] + socket, asUser: account.name)
        #expect(invalid.status == 64, "\(invalid)")
        let asked = try runner.run(["request", "30m", "--app", "testgame"] + socket, asUser: account.name)
        #expect(
            asked.stdout == "asked for 30m more of testgame (request 1, blocked by testgame's limit); a parent will answer\n",
            "\(asked)")

        let wrongApp = try runner.run(["grant", account.name, "30m", "--app", "nosuchgame"])
        #expect(wrongApp.status == 64, "\(wrongApp)")
        #expect(
            wrongApp.stderr
                == "curfew: unknown app \"nosuchgame\": not in the app catalog and \(account.name)'s policy has no rule for it\n")
        let granted = try runner.ok(["grant", account.name, "30m", "--app", "testgame"])
        #expect(granted.stdout.hasPrefix("granted \(account.name) 30m more of testgame today (record "), "\(granted)")
        try waitUntil(seconds: 5, "the child is told what they got") {
            terminal.read().contains("a parent gave you 30m more of testgame today")
        }
        // The agent has applied it: the game runs again.
        let again = try base.runAs(account, game, ["600"])
        defer {
            kill(again, SIGKILL)
            _ = waitForExit(again)
        }
        #expect(death(of: again, within: 2) == nil, "the game was stopped despite its extra time\n\(agent.log)")
        let status = try runner.ok(["status", account.name, "--json"] + socket).stdout
        #expect(status.contains(#""limitMinutes": 45,"#) && status.contains(#""extraMinutes": 30"#), "\(status)")
        let text = try runner.run(["status"] + socket, asUser: account.name).stdout
        #expect(text.contains("testgame 15 min of 45 min (30 min extra granted today)"), "\(text)")
        // The request is still there for the parent; approving it gives the app 30 minutes more.
        let approved = try runner.ok(["approve", "1"])
        #expect(approved.stdout.hasPrefix("approved request 1: granted \(account.name) 30m more of testgame today (record "), "\(approved)")
    }
}

/// `curfew grant --app` and `curfew approve` of what blocks the child, from the command line.
@Suite struct ExtraTimeCLITests {
    let grants = GrantCLITests()

    @Test func grantForAnApp() throws {
        let runner = try grants.initialised()
        defer { runner.cleanUp() }
        try runner.ok(["app", "limit", "kid", "minecraft", "1h"])
        let before = Set(try runner.recordFiles())
        let result = try runner.ok(["grant", "kid", "30m", "--app", "minecraft"])
        let added = Set(try runner.recordFiles()).subtracting(before)
        #expect(added.count == 1)
        let id = added.first ?? "?"
        #expect(result.stdout == "granted kid 30m more of minecraft today (record \(id))\nno computer has confirmed it yet\n")
        let file = try String(contentsOfFile: "\(runner.sharedDir)/records/\(id)", encoding: .utf8)
        #expect(file.contains(#""app":"minecraft","appMinutes":30"#) && file.contains(#""extraMinutes":0"#), "\(file)")
        let json = try jsonObject(try runner.ok(["grant", "kid", "15m", "--app", "minecraft", "--date", "2099-01-01", "--json"]).stdout)
        #expect(json["app"] as? String == "minecraft" && json["appMinutes"] as? Int == 15 && json["extraMinutes"] as? Int == 0)
        #expect((json["message"] as? String)?.hasPrefix("granted kid 15m more of minecraft on 2099-01-01 (record ") == true, "\(json)")
        // The parent's status (no agent) shows the app's limit with its extra time.
        let noSocket = runner.root.appendingPathComponent("no-agent.sock").path
        let status = try runner.ok(["status", "kid", "--json", "--socket", noSocket]).stdout
        #expect(status.contains(#""app": "minecraft","#) && status.contains(#""limitMinutes": 90,"#), "\(status)")
        #expect(status.contains(#""extraMinutes": 30"#), "\(status)")
        let text = try runner.ok(["status", "kid", "--socket", noSocket]).stdout
        #expect(text.contains("minecraft 0 min of 1 h 30 min (30 min extra granted today)"), "\(text)")
    }

    @Test func invalidGrantsForAnAppChangeNothing() throws {
        let runner = try grants.initialised()
        defer { runner.cleanUp() }
        try runner.ok(["app", "limit", "kid", "minecraft", "1h"])
        try runner.ok(["app", "block", "kid", "steam"])
        let before = try runner.snapshot()
        let today = try LocalDate.parse(todayUTC())
        let cases: [([String], String)] = [
            (["grant", "kid", "30m", "--app", "nosuchgame"], #"unknown app "nosuchgame": not in the app catalog and kid's policy has no rule for it"#),
            (["grant", "kid", "30m", "--app", "steam"], "steam has no daily limit for kid; more time for it would lift nothing"),
            (["grant", "kid", "30m", "--app", "firefox"], "firefox has no daily limit for kid; more time for it would lift nothing"),
            (["grant", "kid", "30m", "--app", "Mine Craft"], #"app name must be 1 to 64 lowercase letters, digits, '-', '_', '.' or '+', starting with a letter or digit, got "Mine Craft""#),
            (["grant", "kid", "1x", "--app", "minecraft"], #"extra time must be a duration like 30m, 1h30m or 0, got "1x""#),
            (["grant", "kid", "0", "--app", "minecraft"], "extra time for minecraft must be between 1 and 480 minutes, got 0"),
            (["grant", "kid", "9h", "--app", "minecraft"], "extra time for minecraft must be between 1 and 480 minutes, got 540"),
            (
                ["grant", "kid", "30m", "--app", "minecraft", "--date", "\(today.adding(days: -1))"],
                "\(today.adding(days: -1)) is already over (today is \(today)); extra time is for today or a later day"
            ),
            (
                ["grant", "kid", "30m", "--date", "\(today.adding(days: -1))"],
                "\(today.adding(days: -1)) is already over (today is \(today)); extra time is for today or a later day"
            ),
            (["request", "30m", "--app", "Mine Craft"], #"app name must be 1 to 64 lowercase letters, digits, '-', '_', '.' or '+', starting with a letter or digit, got "Mine Craft""#),
        ]
        for (arguments, message) in cases {
            let result = try runner.run(arguments)
            #expect(result.status == 64, "\(arguments): \(result)")
            #expect(result.stderr == "curfew: \(message)\n", "\(arguments)")
            #expect(result.stdout == "", "\(arguments)")
        }
        #expect(try runner.snapshot() == before)
    }

    /// A request recorded by an agent (written here as the agent writes it): `approve` lifts its cause,
    /// and grants nothing (exit 64, the request still pending) when nothing would be lifted.
    @Test func approveLiftsTheRecordedCauseOrNothing() throws {
        let runner = try grants.initialised()
        defer { runner.cleanUp() }
        try runner.ok(["app", "limit", "kid", "minecraft", "1h"])
        try runner.ok(["bedtime", "kid", "off"])
        _ = try runner.ok(["requests"])
        let now = Int64(Date().timeIntervalSince1970) * 1000
        let sql = """
            INSERT INTO requests (user, minutes, reason, created_ms, cause, app) VALUES ('kid', 30, 'level 3', \(now), 'app-limit:minecraft', 'minecraft');
            INSERT INTO requests (user, minutes, reason, created_ms, cause, app) VALUES ('kid', 20, NULL, \(now), 'daily-limit', NULL);
            INSERT INTO requests (user, minutes, reason, created_ms, cause, app) VALUES ('kid', 20, NULL, \(now), 'daily-limit', NULL);
            """
        #expect(try CurfewRunner.runTool("/usr/bin/sqlite3", ["\(runner.stateDir)/curfew.db", sql]) == 0)
        let listed = try runner.ok(["requests"]).stdout.split(separator: "\n").map(String.init)
        #expect(listed.count == 4, "\(listed)")
        #expect(listed[1].hasPrefix("1   kid   30m of minecraft  level 3  minecraft's limit  "), "\(listed)")
        #expect(listed[2].hasPrefix("2   kid   20m               -        daily limit        "), "\(listed)")

        let bad = try runner.run(["approve", "1", "1x"])
        #expect(bad.status == 64 && bad.stderr == "curfew: extra time must be a duration like 30m, 1h30m or 0, got \"1x\"\n", "\(bad)")
        let app = try runner.ok(["approve", "1", "45m"])
        #expect(app.stdout.hasPrefix("approved request 1: granted kid 45m more of minecraft today (record "), "\(app)")
        let screen = try runner.ok(["approve", "2"])
        #expect(screen.stdout.hasPrefix("approved request 2: granted kid 20m more screen time today (record "), "\(screen)")

        // No daily limit: more screen time would lift nothing, so nothing is granted.
        try runner.ok(["limit", "kid", "unlimited"])
        let records = try runner.recordFiles()
        let nothing = try runner.run(["approve", "3"])
        #expect(nothing.status == 64, "\(nothing)")
        #expect(nothing.stderr == "curfew: kid has no daily limit or weekly budget today; more screen time would lift nothing\n")
        #expect(nothing.stdout == "")
        #expect(try runner.recordFiles() == records)
        #expect(try runner.ok(["requests"]).stdout.contains("pending"))
    }
}

/// `curfew report` judges past days by the policy of their day and their grants, lists grants and
/// requests with the child's reason, and works for a user who is no longer managed.
@Suite struct ReportHistoryTests {
    @Test func pastDaysByTheirOwnPolicyAndGrantsForAUserNoLongerManaged() throws {
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        try runner.ok(["init"])
        // Records made in the past (signed here with the parent's key, as the CLI would have then):
        // limit 2h from the 10th, 1h from the 12th, the user removed on the 14th; 1h extra on the 13th.
        let key = try KeyRing(stateDirectory: runner.stateDir).loadSigningKey()
        let shared = SharedDirectory(path: runner.sharedDir)
        var policy = Policy(user: "kid", dailyLimit: .minutes(120))
        policy.timezone = "UTC"
        let times = ["2026-11-10T12:00:00Z", "2026-11-12T08:00:00Z", "2026-11-14T08:00:00Z"].map { parseUTCTimestamp($0)! }
        _ = try shared.publish(PolicyRecord(user: "kid", version: 1, baseVersion: 0, author: key.id, time: times[0], policy: policy), signedBy: key)
        policy.dailyLimit = .minutes(60)
        _ = try shared.publish(PolicyRecord(user: "kid", version: 2, baseVersion: 1, author: key.id, time: times[1], policy: policy), signedBy: key)
        _ = try shared.publish(PolicyRecord(user: "kid", version: 3, baseVersion: 2, author: key.id, time: times[2], policy: nil), signedBy: key)
        let grant = GrantRecord(
            user: "kid", date: try LocalDate.parse("2026-11-13"), extraMinutes: 60, bedtimeDelayMinutes: 0, author: key.id,
            time: times[1] + 86_400, nonce: String(repeating: "0f", count: 16))
        _ = try shared.publish(grant, signedBy: key)
        _ = try runner.ok(["requests"])
        let requested = parseUTCTimestamp("2026-11-13T18:00:00Z")! * 1000
        let sql = """
            INSERT INTO usage VALUES ('kid', '2026-11-11', 18, '', 5400000);
            INSERT INTO usage VALUES ('kid', '2026-11-13', 18, '', 5400000);
            INSERT INTO usage VALUES ('kid', '2026-11-15', 18, '', 5400000);
            INSERT INTO events (time_ms, user, kind, message, data) VALUES (\(requested), 'kid', 'time-requested', 'asked for 30m more (blocked by daily limit)',
                '{"request":1,"minutes":30,"reason":"<b>level</b> 3","cause":"daily-limit","app":null}');
            """
        #expect(try CurfewRunner.runTool("/usr/bin/sqlite3", ["\(runner.stateDir)/curfew.db", sql]) == 0)

        let period = ["--from", "2026-11-11", "--to", "2026-11-15"]
        let json = try jsonObject(try runner.ok(["report", "kid", "--format", "json"] + period).stdout)
        let days = try #require(json["days"] as? [[String: Any]])
        #expect(days.map { $0["limitMinutes"] as? Int } == [120, 60, 120, 60, 60], "\(days)")
        #expect(days.map { $0["extraMinutes"] as? Int } == [0, 0, 60, 0, 0])
        #expect(days.map { $0["overLimit"] as? Bool } == [false, false, false, false, true])
        let events = try #require(json["events"] as? [[String: Any]])
        #expect(events.map { $0["message"] as? String } == [
            "1h extra on 2026-11-13", "asked for 30m more (blocked by daily limit), reason: <b>level</b> 3",
        ], "\(events)")
        #expect(events.map { $0["kind"] as? String } == ["extra-time-granted", "time-requested"])

        let table = try runner.ok(["report", "kid"] + period).stdout
        #expect(
            table == """
                kid: 2026-11-11 to 2026-11-15 (UTC)
                  DATE        DAY  SCREEN  LIMIT  
                  2026-11-11  wed  1h30m   2h     ###############.....
                  2026-11-12  thu  0       1h     ....................
                  2026-11-13  fri  1h30m   2h     ###############.....
                  2026-11-14  sat  0       1h     ....................
                  2026-11-15  sun  1h30m   1h     #################### !
                  extra time:
                    2026-11-13 08:00  1h extra on 2026-11-13
                    2026-11-13 18:00  asked for 30m more (blocked by daily limit), reason: <b>level</b> 3
                  total 4h30m in 5 days, 1 day over the limit

                """, "\(table)")
        let html = try runner.ok(["report", "kid", "--format", "html"] + period).stdout
        #expect(html.contains("reason: &lt;b&gt;level&lt;/b&gt; 3") && !html.contains("<b>level</b>"))
        // Still an unknown user for what needs a policy in force.
        let status = try runner.run(["grant", "kid", "30m"])
        #expect(status.status == 64, "\(status)")
    }
}
