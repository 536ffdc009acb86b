import CurfewCore
import Foundation
import Testing

/// The schedule rules' commands through the built binary: downtime, limit --week, breaks, exception, allowance.
@Suite struct ScheduleCLITests {
    func initialised() throws -> CurfewRunner {
        let runner = try CurfewRunner()
        try runner.ok(["init"])
        try runner.ok(["user", "add", "kid"])
        try runner.ok(["timezone", "kid", "Europe/Berlin"])
        return runner
    }

    @Test func scheduleRulesAreSetListedShownAndPreviewed() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        func says(_ arguments: [String], _ expected: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let result = try runner.ok(arguments + ["--no-wait"])
            #expect(result.stdout == expected, sourceLocation: sourceLocation)
        }
        try says(["downtime", "kid", "add", "school", "08:00-15:00", "--day", "mon-fri"], "kid: downtime school is now 08:00-15:00 mon-fri\npublished version 3; no computer has confirmed it yet\n")
        try says(["downtime", "kid", "add", "dinner", "18:30-19:15"], "kid: downtime dinner is now 18:30-19:15 every day\npublished version 4; no computer has confirmed it yet\n")
        try says(["downtime", "kid", "add", "gaming", "22:00-01:00", "--day", "fri,sat"], "kid: downtime gaming is now 22:00-01:00 fri,sat\npublished version 5; no computer has confirmed it yet\n")
        try says(
            ["downtime", "kid", "add", "school", "08:00-14:00", "--day", "weekdays"],
            "kid: downtime school is now 08:00-14:00 mon-fri (was 08:00-15:00 mon-fri)\npublished version 6; no computer has confirmed it yet\n")
        try says(["downtime", "kid", "add", "school", "08:00-14:00", "--day", "mon-fri"], "kid: downtime school is already 08:00-14:00 mon-fri; nothing to publish\n")
        try says(["downtime", "kid", "remove", "gaming"], "kid: downtime gaming removed (was 22:00-01:00 fri,sat)\npublished version 7; no computer has confirmed it yet\n")
        #expect(try runner.ok(["downtime", "kid", "list"]).stdout == "dinner  18:30-19:15  every day\nschool  08:00-14:00  mon-fri\n")
        try says(["limit", "kid", "--week", "10h"], "kid: weekly limit is now 10h (was off)\npublished version 8; no computer has confirmed it yet\n")
        try says(["breaks", "kid", "45m", "10m"], "kid: breaks are now 10m after 45m of screen time (were off)\npublished version 9; no computer has confirmed it yet\n")
        try says(
            ["exception", "kid", "2099-12-24", "--limit", "unlimited", "--bedtime", "off"],
            "kid: exception 2099-12-24 is now limit unlimited, bedtime off\npublished version 10; no computer has confirmed it yet\n")
        try says(
            ["exception", "kid", "2099-12-26..2100-01-03", "--limit", "3h", "--bedtime", "22:00-08:00", "--downtime", "off"],
            "kid: exception 2099-12-26..2100-01-03 is now limit 3h, bedtime 22:00-08:00, no downtime\npublished version 11; no computer has confirmed it yet\n")
        try says(
            ["exception", "kid", "2099-12-24", "--limit", "4h"],
            "kid: exception 2099-12-24 is now limit 4h (was limit unlimited, bedtime off)\npublished version 12; no computer has confirmed it yet\n")
        try says(["allowance", "kid", "15m", "--per-week", "3"], "kid: self-service extra time is now 15m, 3 times a week (was off)\npublished version 13; no computer has confirmed it yet\n")
        #expect(
            try runner.ok(["exception", "kid", "list"]).stdout
                == "2099-12-24              limit 4h\n2099-12-26..2100-01-03  limit 3h, bedtime 22:00-08:00, no downtime\n")
        let shown = try runner.ok(["policy", "show", "kid"]).stdout
        #expect(
            shown.split(separator: "\n").dropFirst().joined(separator: "\n") + "\n" == """
                  daily limit   2h
                  weekly limit  10h
                  bedtime       20:00-07:00
                  downtime      dinner 18:30-19:15 every day
                                school 08:00-14:00 mon-fri
                  breaks        10m after 45m of screen time
                  exceptions    2099-12-24: limit 4h
                                2099-12-26..2100-01-03: limit 3h, bedtime 22:00-08:00, no downtime
                  extra time    15m, 3 times a week without asking
                  apps          no rules
                  warnings      15, 5, 1 minutes before
                  lockout       logout
                  time zone     Europe/Berlin

                """)
        let json = try runner.ok(["policy", "show", "kid", "--json"]).stdout
        #expect(json.contains(#""downtime": ["#) && json.contains(#""weeklyLimitMinutes": 600"#))
        #expect(json.contains(#""selfExtension": {"#) && json.contains(#""downtime": false"#))

        // 2099-12-23 is a Wednesday: school, dinner, bedtime from 20:00.
        #expect(
            try runner.ok(["schedule", "kid", "--date", "2099-12-23"]).stdout == """
                kid on Wednesday 2099-12-23 (Europe/Berlin, a day of 24h)
                  00:00-07:00  bedtime          7h
                  07:00-08:00  allowed          1h
                  08:00-14:00  downtime school  6h
                  14:00-18:30  allowed          4h30m
                  18:30-19:15  downtime dinner  45m
                  19:15-20:00  allowed          45m
                  20:00-24:00  bedtime          4h
                daily limit 2h within 6h15m allowed
                weekly limit 10h, from Monday
                breaks: 10m after 45m of screen time

                """)
        // The holidays: no downtime, bedtime 22:00-08:00 (the night before is one of them too).
        #expect(
            try runner.ok(["schedule", "kid", "--date", "2099-12-28"]).stdout == """
                kid on Monday 2099-12-28 (Europe/Berlin, a day of 24h)
                  00:00-08:00  bedtime  8h
                  08:00-22:00  allowed  14h
                  22:00-24:00  bedtime  2h
                daily limit 3h within 14h allowed
                exception 2099-12-26..2100-01-03: limit 3h, bedtime 22:00-08:00, no downtime
                weekly limit 10h, from Monday
                breaks: 10m after 45m of screen time

                """)
        let previewJSON = try runner.ok(["schedule", "kid", "--date", "2099-12-23", "--json"]).stdout
        #expect(previewJSON.contains(#""state": "downtime",\#n      "window": "school""#), "\(previewJSON)")

        try says(["downtime", "kid", "remove", "dinner"], "kid: downtime dinner removed (was 18:30-19:15 every day)\npublished version 14; no computer has confirmed it yet\n")
        try says(["exception", "kid", "remove", "2099-12-24"], "kid: exception 2099-12-24 removed (was limit 4h)\npublished version 15; no computer has confirmed it yet\n")
        try says(["limit", "kid", "--week", "off"], "kid: weekly limit is now off (was 10h)\npublished version 16; no computer has confirmed it yet\n")
        try says(["breaks", "kid", "off"], "kid: breaks are now off (were 10m after 45m of screen time)\npublished version 17; no computer has confirmed it yet\n")
        try says(["allowance", "kid", "off"], "kid: self-service extra time is now off (was 15m, 3 times a week)\npublished version 18; no computer has confirmed it yet\n")
        try says(["exception", "kid", "remove", "2099-12-26"], "kid: exception 2099-12-26..2100-01-03 removed (was limit 3h, bedtime 22:00-08:00, no downtime)\npublished version 19; no computer has confirmed it yet\n")
        #expect(try runner.ok(["exception", "kid", "list"]).stdout == "kid: no exceptions\n")
        try says(["downtime", "kid", "remove", "school"], "kid: downtime school removed (was 08:00-14:00 mon-fri)\npublished version 20; no computer has confirmed it yet\n")
        #expect(try runner.ok(["downtime", "kid", "list"]).stdout == "kid: no downtime windows\n")
        // With every rule off again, the policy's JSON is what it was before the fields existed.
        let plain = try runner.ok(["policy", "show", "kid", "--json"]).stdout
        for field in ["downtime", "weeklyLimitMinutes", "breaks", "exceptions", "selfExtension"] {
            #expect(!plain.contains("\"\(field)\""), "\(plain)")
        }
        // --day takes ranges and sets everywhere.
        try says(["limit", "kid", "3h", "--day", "weekend"], "kid: limit on sat, sun is now 3h\npublished version 21; no computer has confirmed it yet\n")
        try says(["bedtime", "kid", "22:00-07:00", "--day", "fri-sat"], "kid: bedtime starting on fri, sat is now 22:00-07:00\npublished version 22; no computer has confirmed it yet\n")
        // Monitor only.
        try says(["lockout", "kid", "none"], "kid: lockout is now none\npublished version 23; no computer has confirmed it yet\n")
        #expect(try runner.ok(["policy", "show", "kid", "--json"]).stdout.contains(#""lockout": "none""#))
    }

    /// The lockout by cause through the built binary: set, shown, listed, previewed, and
    /// back to one lockout for both.
    @Test func lockoutByCauseIsSetShownAndPreviewed() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        func says(_ arguments: [String], _ expected: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let result = try runner.ok(arguments + ["--no-wait"])
            #expect(result.stdout == expected, sourceLocation: sourceLocation)
        }
        // The default: logout for both, which the preview does not repeat.
        #expect(try runner.ok(["schedule", "kid", "--date", "2099-12-23"]).stdout.hasSuffix("daily limit 2h within 13h allowed\n"))
        try says(["lockout", "kid", "network", "--at", "bedtime"], "kid: lockout at bedtime is now network (at the limit: logout)\npublished version 3; no computer has confirmed it yet\n")
        try says(["lockout", "kid", "network", "--at", "bedtime"], "kid: lockout at bedtime is already network (at the limit: logout); nothing to publish\n")
        #expect(
            try runner.ok(["schedule", "kid", "--date", "2099-12-23"]).stdout == """
                kid on Wednesday 2099-12-23 (Europe/Berlin, a day of 24h)
                  00:00-07:00  bedtime  7h
                  07:00-20:00  allowed  13h
                  20:00-24:00  bedtime  4h
                daily limit 2h within 13h allowed
                at the limit: logout (sessions end, logins are refused); at bedtime and in downtime: network (the internet is off; the session goes on)

                """)
        let preview = try runner.ok(["schedule", "kid", "--date", "2099-12-23", "--json"]).stdout
        #expect(preview.contains(#""lockout": {\#n    "limit": "logout",\#n    "bedtime": "network"\#n  }"#), "\(preview)")
        let shown = try runner.ok(["policy", "show", "kid"]).stdout
        #expect(shown.contains("\n  lockout      logout at the limit, network at bedtime\n"), "\(shown)")
        let json = try runner.ok(["policy", "show", "kid", "--json"]).stdout
        #expect(json.contains(#""lockout": "logout",\#n  "bedtimeLockout": "network",\#n  "timezone""#), "\(json)")
        #expect(try runner.ok(["user", "list"]).stdout.contains("  logout at the limit, network at bedtime\n"))
        // --at limit leaves bedtime as it is, even where bedtime followed the limit until now.
        try says(["lockout", "kid", "lock", "--at", "limit"], "kid: lockout at the limit is now lock (at bedtime: network)\npublished version 4; no computer has confirmed it yet\n")
        try says(["lockout", "kid", "network", "--at", "limit"], "kid: lockout at the limit is now network (at bedtime: network)\npublished version 5; no computer has confirmed it yet\n")
        // The same for both causes: one lockout again, and the JSON is what it was before the field existed.
        #expect(!(try runner.ok(["policy", "show", "kid", "--json"]).stdout.contains("bedtimeLockout")))
        #expect(
            try runner.ok(["schedule", "kid", "--date", "2099-12-23"]).stdout.hasSuffix(
                "at the limit and at bedtime: network (the internet is off; the session goes on)\n"))
        try says(["lockout", "kid", "apps", "--at", "bedtime"], "kid: lockout at bedtime is now apps (at the limit: network)\npublished version 6; no computer has confirmed it yet\n")
        try says(["lockout", "kid", "logout"], "kid: lockout is now logout (was apps at bedtime)\npublished version 7; no computer has confirmed it yet\n")
        try says(["lockout", "kid", "logout"], "kid: lockout is already logout; nothing to publish\n")
        let plain = try runner.ok(["policy", "show", "kid", "--json"]).stdout
        #expect(plain.contains(#""lockout": "logout""#) && !plain.contains("bedtimeLockout"), "\(plain)")
        #expect(try runner.ok(["schedule", "kid", "--date", "2099-12-23"]).stdout.hasSuffix("daily limit 2h within 13h allowed\n"))
        // A policy file with the field (policy import) and a record without it both read.
        let file = runner.root.appendingPathComponent("kid.json")
        try Data(#"{"user": "kid", "lockout": "lock", "bedtimeLockout": "network"}"#.utf8).write(to: file)
        try runner.ok(["policy", "import", file.path, "--no-wait"])
        #expect(try runner.ok(["policy", "show", "kid"]).stdout.contains("  lockout      lock at the limit, network at bedtime\n"))
        try Data(#"{"user": "kid", "bedtimeLockout": "curfew"}"#.utf8).write(to: file)
        let before = try runner.snapshot()
        let bad = try runner.run(["policy", "import", file.path])
        #expect(bad.status == 65, "\(bad)")
        #expect(bad.stderr.hasSuffix(#"bedtime lockout must be logout, lock, apps, network or none, got "curfew"\#n"#), "\(bad)")
        #expect(try runner.snapshot() == before)
    }

    /// Every invalid input: one line naming the rule and the value, exit 64, nothing changed.
    @Test(arguments: [
        (["downtime", "kid", "add", "school", "08:00-08:00"], "downtime window school: start and end must differ, got 08:00-08:00"),
        (["downtime", "kid", "add", "school!", "08:00-15:00"], #"downtime window name must be 1 to 32 letters, digits, '-' or '_', got "school!""#),
        (["downtime", "kid", "add", String(repeating: "x", count: 33), "08:00-15:00"], #"downtime window name must be 1 to 32 letters, digits, '-' or '_', got "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx""#),
        (["downtime", "kid", "add", "school", "8am-3pm"], #"downtime start must look like HH:MM, got "8am""#),
        (["downtime", "kid", "add", "school", "08:00"], #"downtime window school must look like HH:MM-HH:MM, got "08:00""#),
        (["downtime", "kid", "add", "school", "08:00-25:00"], #"downtime end must be between 00:00 and 23:59, got "25:00""#),
        (["downtime", "kid", "add", "school", "08:00-15:00", "--day", "mon-funday"], #"days must be weekdays like mon, mon-fri, sat,sun, weekend or weekdays, got "mon-funday""#),
        (["downtime", "kid", "add", "school", "08:00-15:00", "--day", "someday"], #"weekday must be one of mon, tue, wed, thu, fri, sat, sun, got "someday""#),
        (["downtime", "kid", "add", "school"], "missing downtime window HH:MM-HH:MM for school"),
        (["downtime", "kid", "add"], "missing window name (e.g. curfew downtime kid add school 08:00-15:00 --day mon-fri)"),
        (["downtime", "kid", "remove", "school"], #"user kid has no downtime window "school""#),
        (["downtime", "kid", "pause"], #"downtime action must be add, remove or list, got "pause""#),
        (["downtime", "kid", "list", "school"], "downtime USER list takes no name, window or --day"),
        (["downtime", "bob", "add", "school", "08:00-15:00"], #"unknown user "bob": no policy for this user (add one with curfew user add bob)"#),
        (["limit", "kid", "--week", "57h"], "weekly limit must be between 0 and 3360 minutes, got 3420"),
        (["limit", "kid", "--week", "10h10m"], "weekly limit must be a multiple of 15 minutes, got 610"),
        (["limit", "kid", "--week", "lots"], #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "lots""#),
        (["limit", "kid", "2h", "--week", "10h"], "--week is given alone: curfew limit USER --week 10h (or off)"),
        (["breaks", "kid", "10m", "10m"], "break interval must be between 15 and 240 minutes, got 10"),
        (["breaks", "kid", "47m", "10m"], "break interval must be a multiple of 5 minutes, got 47"),
        (["breaks", "kid", "45m", "2h"], "break length must be between 5 and 60 minutes, got 120"),
        (["breaks", "kid", "45m", "7m"], "break length must be a multiple of 5 minutes, got 7"),
        (["breaks", "kid", "45m"], "missing break length (e.g. curfew breaks kid 45m 10m)"),
        (["breaks", "kid", "off", "10m"], "breaks USER off takes nothing more"),
        (["exception", "kid", "2099-12-24"], "an exception needs --limit, --bedtime or --downtime off"),
        (["exception", "kid", "2099-12-32", "--limit", "3h"], #"date must be a real calendar day, got "2099-12-32""#),
        (["exception", "kid", "2099-12-24...2099-12-26", "--limit", "3h"], #"exception dates must look like YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD, got "2099-12-24...2099-12-26""#),
        (["exception", "kid", "2099-12-26..2099-12-24", "--limit", "3h"], "exception range must not end before it starts, got 2099-12-26..2099-12-24"),
        (["exception", "kid", "2099-01-01..2100-06-01", "--limit", "3h"], "exception range may span at most 366 days, got 2099-01-01..2100-06-01 (517 days)"),
        (["exception", "kid", "2099-12-24", "--limit", "17m"], "daily limit of the exception 2099-12-24 must be a multiple of 15 minutes, got 17"),
        (["exception", "kid", "2099-12-24", "--bedtime", "22:00-22:00"], "bedtime start and end must differ, got 22:00-22:00"),
        (["exception", "kid", "2099-12-24", "--downtime", "on"], #"--downtime takes off (no downtime windows those days), got "on""#),
        (["exception", "kid", "2020-12-24", "--limit", "3h"], "exception 2020-12-24 is already over (today is \(todayInBerlin()))"),
        (["exception", "kid", "remove", "2099-12-24"], "user kid has no exception starting 2099-12-24"),
        (["exception", "kid", "remove"], "missing the date of the exception to remove"),
        (["exception", "kid", "list", "--limit", "3h"], "exception USER list takes nothing more"),
        (["allowance", "kid", "15m"], "missing --per-week N (how many times a week)"),
        (["allowance", "kid", "3m", "--per-week", "3"], "self-service extra time must be between 5 and 120 minutes, got 3"),
        (["allowance", "kid", "12m", "--per-week", "3"], "self-service extra time must be a multiple of 5 minutes, got 12"),
        (["allowance", "kid", "15m", "--per-week", "0"], "self-service extra time uses per week must be between 1 and 21, got 0"),
        (["allowance", "kid", "15m", "--per-week", "many"], #"uses per week must be a whole number, got "many""#),
        (["allowance", "kid", "off", "--per-week", "3"], "allowance USER off takes no --per-week"),
    ] as [([String], String)])
    func invalidScheduleInputIsRefusedAndChangesNothing(arguments: [String], message: String) throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        try runner.ok(["policy", "show", "kid"])
        let before = try runner.snapshot()
        let result = try runner.run(arguments)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr == "curfew: \(message)\n")
        #expect(result.stdout == "")
        #expect(try runner.snapshot() == before)
    }

    @Test func overlappingExceptionsAndTooManyWindowsAreRefused() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        try runner.ok(["exception", "kid", "2099-12-21..2100-01-03", "--limit", "3h", "--no-wait"])
        for index in 0..<16 { try runner.ok(["downtime", "kid", "add", "w\(index)", "08:00-09:00", "--no-wait"]) }
        let before = try runner.snapshot()
        let overlap = try runner.run(["exception", "kid", "2099-12-24", "--limit", "unlimited"])
        #expect(overlap.status == 64)
        #expect(overlap.stderr == "curfew: exceptions must not overlap, got 2099-12-21..2100-01-03 and 2099-12-24\n")
        let seventeenth = try runner.run(["downtime", "kid", "add", "w16", "08:00-09:00"])
        #expect(seventeenth.status == 64)
        #expect(seventeenth.stderr == "curfew: downtime may hold at most 16 windows, got 17\n")
        #expect(try runner.snapshot() == before)
    }

    /// Without the agent, check-login and status judge the weekly budget from the usage saved this week.
    @Test func theWeeklyBudgetFromSavedUsage() throws {
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        try runner.ok(["init"])
        try runner.ok(["user", "add", "kid"])
        try runner.ok(["timezone", "kid", "UTC"])
        try runner.ok(["bedtime", "kid", "off"])
        try runner.ok(["limit", "kid", "8h"])
        try runner.ok(["limit", "kid", "--week", "1h"])
        let today = todayInBerlin(zone: "UTC")
        let sql = "INSERT INTO usage (user, day, hour, app, milliseconds) VALUES ('kid', '\(today)', 0, '', 3600000);"
        #expect(try CurfewRunner.runTool("/usr/bin/sqlite3", ["\(runner.stateDir)/curfew.db", sql]) == 0)
        let socket = ["--socket", "\(runner.root.path)/no-agent.sock"]
        let refused = try runner.run(["check-login", "--user", "kid"] + socket)
        #expect(refused.status == 77, "\(refused)")
        #expect(refused.stdout.hasPrefix("Curfew: kid may not log in now: this week's limit of 1h is used up. You may log in again "), "\(refused)")
        let status = try runner.ok(["status", "kid", "--json"] + socket).stdout
        #expect(status.contains(#""state": "week-limit-reached""#), "\(status)")
        #expect(status.contains(#""weekLimitMinutes": 60"#) && status.contains(#""weekSeconds": 3600"#), "\(status)")
    }

    /// Two parents add different downtime windows to the same version at once; an agent receiving
    /// both keeps both (no conflict), and the parents' CLI shows the same.
    @Test func concurrentEditsOfDifferentWindowsAreBothKept() throws {
        let parents = try ConcurrentEditTests.Parents()
        defer { parents.runner.cleanUp() }
        try parents.ok("a", ["user", "add", "synckid"])
        let baseID = try #require(try parents.records("a").first)
        let base = "\(parents.shared("a"))/records/\(baseID)"
        try FileManager.default.copyItem(atPath: base, toPath: "\(parents.shared("b"))/records/\(baseID)")
        try parents.ok("a", ["downtime", "synckid", "add", "school", "08:00-15:00", "--day", "mon-fri", "--no-wait"])
        Thread.sleep(forTimeInterval: 1.1)
        try parents.ok("b", ["downtime", "synckid", "add", "dinner", "18:30-19:15", "--no-wait"])
        let fromA = try #require(try parents.records("a").subtracting([baseID]).first)
        let fromB = try #require(try parents.records("b").subtracting([baseID]).first)

        let shared = "\(parents.root)/computer"
        try FileManager.default.createDirectory(atPath: "\(shared)/records", withIntermediateDirectories: true)
        let computer = try ConcurrentEditTests.Computer(id: "pc-a", shared: shared, trusting: parents.trustedKeys)
        defer { computer.stop() }
        for file in [base, "\(parents.shared("a"))/records/\(fromA)", "\(parents.shared("b"))/records/\(fromB)"] {
            try ConcurrentEditTests.deliver(file, to: shared)
        }
        try waitUntil(seconds: 10, "the agent merges both edits") {
            computer.confirmation(fromA)?.outcome == .merged && computer.confirmation(fromB)?.outcome == .merged
        }
        #expect(computer.confirmation(fromA)?.conflicts == [])
        let enforced = try computer.enforcedPolicy()
        #expect(enforced.contains(#""name":"dinner""#) && enforced.contains(#""name":"school""#), "\(enforced)")
        let listed = try parents.runner.run(["downtime", "synckid", "list", "--shared-dir", shared], stateDir: parents.state("b"))
        #expect(listed.stdout == "dinner  18:30-19:15  every day\nschool  08:00-15:00  mon-fri\n", "\(listed)")
    }
}

/// Today in the zone these tests give the policy, as the CLI reads it.
func todayInBerlin(zone name: String = "Europe/Berlin") -> String {
    let zone = ZoneRules(identifier: name)!
    return "\(zone.localTime(at: Int64(Date().timeIntervalSince1970)).date)"
}
