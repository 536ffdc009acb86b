import CurfewCore
import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Today's date in UTC, as the CLI sees it under TZ=UTC.
func todayUTC() -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "UTC")
    formatter.dateFormat = "yyyy-MM-dd"
    return formatter.string(from: Date())
}

func jsonObject(_ text: String) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
        throw TestFailure("not a JSON object: \(text)")
    }
    return object
}

/// Extra time granted through signed records: `curfew grant`, shown by `schedule` and `status`.
@Suite struct GrantCLITests {
    func initialised() throws -> CurfewRunner {
        let runner = try CurfewRunner()
        try runner.ok(["init"])
        try runner.ok(["user", "add", "kid"])
        try runner.ok(["timezone", "kid", "UTC"])
        return runner
    }

    @Test func aGrantIsASignedRecordThatScheduleAndStatusShow() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        let before = Set(try runner.recordFiles())
        let result = try runner.ok(["grant", "kid", "30m"])
        let added = Set(try runner.recordFiles()).subtracting(before)
        #expect(added.count == 1)
        let id = added.first ?? "?"
        #expect(result.stdout == "granted 30m extra for kid on \(todayUTC()) (record \(id))\nno computer has confirmed it yet\n")
        let file = try String(contentsOfFile: "\(runner.sharedDir)/records/\(id)", encoding: .utf8)
        #expect(file.contains(#""kind":"grant""#))
        #expect(file.contains(#""extraMinutes":30"#))
        #expect(sha256(file) + ".json" == id)

        // Another day: extra time and a later bedtime, added on top of each other.
        try runner.ok(["grant", "kid", "1h", "--date", "2026-12-24"])
        let both = try runner.ok(["grant", "kid", "15m", "--bedtime", "30m", "--date", "2026-12-24"])
        #expect(both.stdout.hasPrefix("granted 15m extra and bedtime 30m later for kid on 2026-12-24 (record "))
        let bedtimeOnly = try runner.ok(["grant", "kid", "0", "--bedtime", "15m", "--date", "2026-12-24", "--json"])
        let json = try jsonObject(bedtimeOnly.stdout)
        #expect(json["extraMinutes"] as? Int == 0)
        #expect(json["bedtimeDelayMinutes"] as? Int == 15)
        #expect(json["date"] as? String == "2026-12-24")
        let schedule = try runner.ok(["schedule", "kid", "--date", "2026-12-24"])
        #expect(
            schedule.stdout == """
                kid on Thursday 2026-12-24 (UTC, a day of 24h)
                  00:00-07:00  bedtime  7h
                  07:00-20:45  allowed  13h45m
                  20:45-24:00  bedtime  3h15m
                daily limit 3h15m within 13h45m allowed (granted: 1h15m extra, bedtime 45m later)

                """)
        let scheduleJSON = try jsonObject(try runner.ok(["schedule", "kid", "--date", "2026-12-24", "--json"]).stdout)
        #expect(scheduleJSON["limitMinutes"] as? Int == 195)
        #expect(scheduleJSON["extraMinutes"] as? Int == 75)
        #expect(scheduleJSON["bedtimeDelayMinutes"] as? Int == 45)
        // The next day is untouched.
        let nextDay = try runner.ok(["schedule", "kid", "--date", "2026-12-25"])
        #expect(nextDay.stdout.hasSuffix("daily limit 2h within 13h allowed\n"))

        // The agent is not running: the parent's status comes from the database and includes today's grant.
        let noSocket = runner.root.appendingPathComponent("no-agent.sock").path
        let status = try jsonObject(try runner.ok(["status", "kid", "--json", "--socket", noSocket]).stdout)
        #expect(status["limitMinutes"] as? Int == 150)
        #expect(status["extraMinutes"] as? Int == 30)
        let text = try runner.ok(["status", "kid", "--socket", noSocket])
        #expect(text.stdout.contains(" 0 of 2h30m (30m extra granted)\n"), "\(text.stdout)")
    }

    @Test func invalidGrantsAndAnswersChangeNothing() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        try runner.ok(["schedule", "kid"])
        let before = try runner.snapshot()
        let cases: [([String], String)] = [
            (["grant", "kid", "500m"], "extra time must be between 1 and 480 minutes, got 500"),
            (["grant", "kid", "0"], "extra time must be between 1 and 480 minutes, got 0"),
            (["grant", "kid", "30m", "--bedtime", "9h"], "bedtime delay must be between 0 and 480 minutes, got 540"),
            (["grant", "kid", "0", "--bedtime", "0"], "extra time must be between 1 and 480 minutes, got 0"),
            (["grant", "kid", "unlimited"], #"extra time must be a duration like 30m, 1h30m or 0, got "unlimited""#),
            (["grant", "kid", "30m", "--date", "24.12.2026"], #"date must look like YYYY-MM-DD, got "24.12.2026""#),
            (["grant", "kid", "30m", "--date", "2020-12-24"], "2020-12-24 is already over (today is \(todayInBerlin(zone: "UTC"))); extra time is for today or a later day"),
            (
                ["grant", "sis", "30m"],
                #"unknown user "sis": no policy for this user (add one with curfew user add sis)"#
            ),
            (["approve", "first"], #"request id must be a positive whole number, got "first""#),
            (["approve", "1", "600m"], "extra time must be between 1 and 480 minutes, got 600"),
            (["approve", "7"], "there is no request 7"),
            (["deny", "0"], #"request id must be a positive whole number, got "0""#),
            (["deny", "7"], "there is no request 7"),
            (["request", "0"], "requested time must be between 1 and 480 minutes, got 0"),
            (
                ["request", "30m", "--reason", String(repeating: "x", count: 201)],
                "reason must be at most 200 characters, got 201"
            ),
        ]
        for (arguments, message) in cases {
            let result = try runner.run(arguments)
            #expect(result.status == 64, "\(arguments): \(result)")
            #expect(result.stderr == "curfew: \(message)\n", "\(arguments)")
            #expect(result.stdout == "", "\(arguments)")
        }
        #expect(try runner.snapshot() == before)
        let none = try runner.ok(["requests"])
        #expect(none.stdout == "no pending requests\n")
        #expect(try runner.ok(["requests", "--json"]).stdout == "[]\n")
        // A request needs the agent.
        let socket = runner.root.appendingPathComponent("no-agent.sock").path
        let offline = try runner.run(["request", "30m", "--socket", socket])
        #expect(offline.status == 69)
        #expect(offline.stderr == "curfew: the agent is not running (cannot reach \(socket))\n")
    }

    /// After midnight, in last night's bedtime: `--bedtime` moves that night's when it lets the child
    /// back in now, and tonight's otherwise; with extra time as well it is refused, changing nothing.
    @Test func aBedtimeGrantAfterMidnightMovesTheNightTheChildIsIn() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        // A fixed zone whose clock reads 00:MM now, whatever the hour in UTC.
        let now = Int64(Date().timeIntervalSince1970)
        let hour = Int(now % 86_400 / 3600)
        let zone = hour == 0 ? "UTC" : hour <= 12 ? "Etc/GMT+\(hour)" : "Etc/GMT-\(24 - hour)"
        try runner.ok(["timezone", "kid", zone])
        try runner.ok(["bedtime", "kid", "22:00-03:00"])
        let rules = try #require(ZoneRules(identifier: zone))
        let today = rules.localTime(at: now).date
        #expect(rules.localTime(at: now).secondOfDay < 3600, "\(zone)")
        // 22:00 + 1 h is past: that would lift nothing now, so it is tonight's.
        let tonight = try runner.ok(["grant", "kid", "0", "--bedtime", "1h"])
        #expect(tonight.stdout.hasPrefix("granted bedtime 1h later for kid on \(today) (record "), "\(tonight)")
        let before = try runner.snapshot()
        let both = try runner.run(["grant", "kid", "30m", "--bedtime", "3h"])
        #expect(both.status == 64, "\(both)")
        #expect(
            both.stderr == "curfew: last night's bedtime lasts until 03:00: move it with a grant of its own "
                + "(curfew grant kid 0 --bedtime 3h) and give today's time in another\n", "\(both)")
        #expect(try runner.snapshot() == before)
        // 22:00 + 3 h is 01:00: the child may use the computer until then.
        let lastNight = try runner.ok(["grant", "kid", "0", "--bedtime", "3h"])
        #expect(lastNight.stdout.hasPrefix("granted bedtime 3h later for kid on \(today.adding(days: -1)) (record "), "\(lastNight)")
        let schedule = try runner.ok(["schedule", "kid"]).stdout
        #expect(schedule.contains("  00:00-01:00  allowed  1h\n  01:00-03:00  bedtime  2h\n"), "\(schedule)")
        // What the day says it was granted is tonight's own (last night's shows in the periods).
        #expect(schedule.contains("(granted: bedtime 1h later)"), "\(schedule)")
    }
}

/// A child asks the running agent for more time; a parent lists, approves and denies.
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: a test account and runuser"))
struct RequestFlowTests {
    @Test func aChildAsksAParentApprovesAndStatusShowsTheExtraTime() throws {
        let account = try TestAccount.ensure()
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        chmod(runner.root.path, 0o755)
        try runner.ok(["init"])
        try runner.ok(["user", "add", account.name])
        try runner.ok(["limit", account.name, "1h"])
        try runner.ok(["bedtime", account.name, "off"])
        try runner.ok(["timezone", account.name, "UTC"])
        // The child's terminal, where the agent tells them the answers.
        let terminal = try UserTerminal(owner: account)
        let agent = try AgentProcess(runner)
        var running = true
        defer { if running { agent.killHard() } }
        let socket = ["--socket", agent.socketPath]

        let asked = try runner.run(["request", "30m", "--reason", "homework"] + socket, asUser: account.name)
        #expect(asked.status == 0, "\(asked)")
        #expect(asked.stdout == "asked for 30m more (request 1); a parent will answer\n")
        // Root is a parent, not a child; an unmanaged account has no limit to extend.
        let root = try runner.run(["request", "30m"] + socket)
        #expect(root.status == 77)
        #expect(root.stderr == "curfew: root cannot ask for more time; grant it with curfew grant\n")
        let stranger = try runner.run(["request", "30m"] + socket, asUser: "nobody")
        #expect(stranger.status == 77)
        #expect(stranger.stderr == "curfew: nobody is not managed on this computer; there is no limit to extend\n")
        // A child cannot list or answer requests.
        for arguments in [["requests"], ["approve", "1"], ["deny", "1"]] {
            let refused = try runner.run(arguments, asUser: account.name)
            #expect(refused.status == 77, "\(arguments): \(refused)")
        }

        let list = try runner.ok(["requests"])
        let lines = list.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(list.stdout)")
        #expect(lines.first == "id  user       asked  reason    blocked by  asked at          status")
        // Nothing blocked the child when they asked (an hour left, no bedtime): "-".
        #expect(lines.last?.hasPrefix("1   \(account.name)  30m    homework  -           \(todayUTC()) ") == true, "\(list.stdout)")
        #expect(lines.last?.hasSuffix("  pending") == true)
        let listJSON = try runner.ok(["requests", "--json"]).stdout
        #expect(listJSON.contains(#""reason": "homework""#))
        #expect(listJSON.contains(#""status": "pending""#))

        let approved = try runner.ok(["approve", "1"])
        #expect(
            approved.stdout.hasPrefix(
                "approved request 1: granted \(account.name) 30m more screen time today (record "), "\(approved)")
        let again = try runner.run(["approve", "1"])
        #expect(again.status == 64)
        #expect(again.stderr == "curfew: request 1 was already approved\n")
        try waitUntil(seconds: 5, "the answer on the child's terminal") {
            terminal.read().contains("a parent gave you 30m more screen time today")
        }

        // The agent picks the grant up from the shared directory and the child sees 30 more minutes.
        var status: [String: Any] = [:]
        try waitUntil(seconds: 5, "the agent applies the grant") {
            guard let result = try? runner.run(["status", "--json"] + socket, asUser: account.name),
                let object = try? jsonObject(result.stdout)
            else { return false }
            status = object
            return object["limitMinutes"] as? Int == 90
        }
        #expect(status["extraMinutes"] as? Int == 30)
        let text = try runner.run(["status"] + socket, asUser: account.name)
        #expect(text.stdout.contains("of 1h30m (30m extra granted)"), "\(text)")

        // A second request, denied.
        let second = try runner.run(["request", "15m"] + socket, asUser: account.name)
        #expect(second.stdout == "asked for 15m more (request 2); a parent will answer\n", "\(second)")
        let denied = try runner.ok(["deny", "2"])
        #expect(denied.stdout == "denied request 2 (\(account.name) asked for 15m)\n")
        try waitUntil(seconds: 5, "the refusal on the child's terminal") {
            terminal.read().contains("a parent said no to your request for 15m more.")
        }
        #expect(try runner.ok(["requests"]).stdout == "no pending requests\n")
        let all = try runner.ok(["requests", "--all"]).stdout.split(separator: "\n")
        #expect(all.count == 3)
        #expect(all.last?.hasSuffix("  denied") == true, "\(all)")
        #expect(all[1].hasSuffix("  approved 30m"), "\(all)")

        let events = try runner.ok(["events", "--json"]).stdout
        #expect(events.contains(#""kind": "time-requested""#))
        #expect(events.contains(#""kind": "extra-time-granted""#))
        // One event per grant, even after the agent restarts and reads the records again.
        running = false
        #expect(agent.stop() == 0)
        let restarted = try AgentProcess(runner)
        #expect(restarted.stop() == 0)
        let after = try runner.ok(["events", "--json"]).stdout
        #expect(after.components(separatedBy: #""kind": "extra-time-granted""#).count == 2, "\(after)")
    }
}
