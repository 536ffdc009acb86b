import Foundation
import Testing

/// `curfew report` and `curfew events` over usage rows put straight into the database.
@Suite struct ReportTests {
    /// A state directory managing kid in UTC: 2h a day, 3h on saturdays.
    static func reportRunner() throws -> CurfewRunner {
        let runner = try CurfewRunner()
        try runner.ok(["init"])
        try runner.ok(["user", "add", "kid"])
        try runner.ok(["timezone", "kid", "UTC"])
        try runner.ok(["limit", "kid", "3h", "--day", "sat"])
        return runner
    }

    func prepared() throws -> CurfewRunner {
        let runner = try Self.reportRunner()
        let sql = """
            INSERT INTO usage VALUES ('kid', '2026-11-20', 9, '', 3600000);
            INSERT INTO usage VALUES ('kid', '2026-11-20', 9, 'minecraft', 1800000);
            INSERT INTO usage VALUES ('kid', '2026-11-20', 10, '', 1200400);
            INSERT INTO usage VALUES ('kid', '2026-11-20', 10, 'firefox', 1200400);
            INSERT INTO usage VALUES ('kid', '2026-11-21', 20, '', 900000);
            INSERT INTO usage VALUES ('kid', '2026-11-21', 20, 'minecraft', 900000);
            INSERT INTO usage VALUES ('teen', '2026-11-21', 20, '', 999000);
            INSERT INTO events (time_ms, user, kind, message) VALUES (1795262400000, 'kid', 'clock-jump', 'jumped');
            INSERT INTO events (time_ms, user, kind, message) VALUES (1795262460000, NULL, 'agent-started', 'started');
            INSERT INTO events (time_ms, user, kind, message) VALUES (1795262520000, 'teen', 'policy-loaded', 'v1');
            """
        let status = try CurfewRunner.runTool("/usr/bin/sqlite3", ["\(runner.stateDir)/curfew.db", sql])
        #expect(status == 0)
        return runner
    }

    @Test func csvByDayAppAndHour() throws {
        let runner = try prepared()
        defer { runner.cleanUp() }
        let period = ["--from", "2026-11-20", "--to", "2026-11-21"]
        let byDay = try runner.ok(["report", "kid"] + period + ["--format", "csv"])
        #expect(byDay.stdout == "date,screen_seconds,limit_minutes\n2026-11-20,4800,120\n2026-11-21,900,180\n")
        let byApp = try runner.ok(["report", "kid"] + period + ["--format", "csv", "--by", "app"])
        #expect(
            byApp.stdout
                == "date,app,seconds\n2026-11-20,minecraft,1800\n2026-11-20,firefox,1200\n2026-11-21,minecraft,900\n")
        let byHour = try runner.ok(["report", "kid", "--day", "2026-11-20", "--format", "csv", "--by", "hour"])
        let lines = byHour.stdout.split(separator: "\n")
        #expect(lines.count == 25)
        #expect(lines[10] == "2026-11-20,9,3600")
        #expect(lines[11] == "2026-11-20,10,1200")
        #expect(lines[1] == "2026-11-20,0,0")
    }

    @Test func jsonHasTheDocumentedFieldsAndAgreesWithCSV() throws {
        let runner = try prepared()
        defer { runner.cleanUp() }
        let result = try runner.ok(["report", "kid", "--from", "2026-11-20", "--to", "2026-11-21", "--format", "json"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(json["user"] as? String == "kid")
        #expect(json["screenSeconds"] as? Int == 5700)
        let days = try #require(json["days"] as? [[String: Any]])
        #expect(days.map { $0["date"] as? String } == ["2026-11-20", "2026-11-21"])
        #expect(days.map { $0["screenSeconds"] as? Int } == [4800, 900])
        #expect(days.map { $0["limitMinutes"] as? Int } == [120, 180])
        let apps = try #require(days[0]["apps"] as? [[String: Any]])
        #expect(apps.map { $0["app"] as? String } == ["minecraft", "firefox"])
        #expect(apps.map { $0["seconds"] as? Int } == [1800, 1200])
        let hours = try #require(days[0]["hours"] as? [[String: Any]])
        #expect(hours.count == 24)
        #expect(hours[9]["screenSeconds"] as? Int == 3600)
    }

    @Test func tableShowsBarsAgainstTheLimit() throws {
        let runner = try prepared()
        defer { runner.cleanUp() }
        let result = try runner.ok(["report", "kid", "--from", "2026-11-20", "--to", "2026-11-21"])
        #expect(
            result.stdout == """
                kid: 2026-11-20 to 2026-11-21 (UTC)
                  DATE        DAY  SCREEN  LIMIT  
                  2026-11-20  fri  1h20m   2h     ##############......
                  2026-11-21  sat  15m     3h     ##..................
                  total 1h35m in 2 days, no day over the limit

                """)
    }

    @Test func badPeriodsAreRefused() throws {
        let runner = try prepared()
        defer { runner.cleanUp() }
        let both = try runner.run(["report", "kid", "--week", "--day", "2026-11-20"])
        #expect(both.status == 64)
        #expect(both.stderr == "curfew: give one period: --day, --week, --month or --from/--to\n")
        let backwards = try runner.run(["report", "kid", "--from", "2026-11-21", "--to", "2026-11-20"])
        #expect(backwards.status == 64)
        #expect(backwards.stderr == "curfew: --to must not be before --from, got 2026-11-21 to 2026-11-20\n")
        let half = try runner.run(["report", "kid", "--from", "2026-11-21"])
        #expect(half.stderr == "curfew: --from and --to go together\n")
        let format = try runner.run(["report", "kid", "--format", "pdf"])
        #expect(format.status == 64)
    }

    @Test func eventsOfAUserIncludeTheAgentsOwn() throws {
        let runner = try prepared()
        defer { runner.cleanUp() }
        let kid = try runner.ok(["events", "kid", "--json"])
        let list = try #require(try JSONSerialization.jsonObject(with: Data(kid.stdout.utf8)) as? [[String: Any]])
        #expect(list.map { $0["kind"] as? String } == ["clock-jump", "agent-started"])
        let all = try runner.ok(["events", "--since", "2026-11-21"])
        #expect(all.stdout.contains("teen  policy-loaded  v1"))
        let bad = try runner.run(["events", "--since", "yesterday"])
        #expect(bad.status == 64)
        #expect(bad.stderr == "curfew: since must be a date (YYYY-MM-DD) or a duration (2h, 30m), got \"yesterday\"\n")
    }
}
