import Foundation
import Testing

/// The built `curfew` binary, checked through exact output, exit codes and files on disk.
@Suite struct CLITests {
    /// A state directory with `kid` managed under the default policy.
    func initialised() throws -> CurfewRunner {
        let runner = try CurfewRunner()
        try runner.ok(["init"])
        try runner.ok(["user", "add", "kid"])
        return runner
    }

    @Test func initCreatesPrivateKeyAndTrustsIt() throws {
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        let first = try runner.ok(["init"])
        #expect(first.stdout.contains("created signing key"))
        let keyPath = "\(runner.stateDir)/keys/signing.key"
        let mode = try FileManager.default.attributesOfItem(atPath: keyPath)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let stateMode = try FileManager.default.attributesOfItem(atPath: runner.stateDir)[.posixPermissions] as? Int
        #expect(stateMode == 0o700)
        let trusted = try FileManager.default.contentsOfDirectory(atPath: "\(runner.stateDir)/keys/trusted")
        #expect(trusted.count == 1)
        let keyBefore = try Data(contentsOf: URL(fileURLWithPath: keyPath))
        let second = try runner.ok(["init"])
        #expect(second.stdout.contains("already exists; kept it"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: keyPath)) == keyBefore)
        #expect(FileManager.default.fileExists(atPath: "\(runner.sharedDir)/records"))
    }

    @Test func editingPublishesNumberedSignedRecords() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        let result = try runner.ok(["limit", "kid", "1h30m"])
        #expect(
            result.stdout
                == "kid: daily limit is now 1h30m (was 2h)\npublished version 2; no computer has confirmed it yet\n")
        #expect(try runner.recordFiles().count == 2)
        for name in try runner.recordFiles() {
            #expect(name.count == 69)
            let path = "\(runner.sharedDir)/records/\(name)"
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o644)
        }
        // The same value again publishes nothing.
        let again = try runner.ok(["limit", "kid", "90m"])
        #expect(again.stdout == "kid: daily limit is already 1h30m; nothing to publish\n")
        #expect(try runner.recordFiles().count == 2)
        // No temporary file is left behind.
        let all = try FileManager.default.contentsOfDirectory(atPath: "\(runner.sharedDir)/records")
        #expect(all.allSatisfy { !$0.hasPrefix(".") })
    }

    @Test func everyRuleCanBeSetAndShown() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        try runner.ok(["limit", "kid", "1h30m"])
        try runner.ok(["limit", "kid", "3h", "--day", "sat", "--day", "sun"])
        try runner.ok(["limit", "kid", "0", "--day", "mon"])
        try runner.ok(["bedtime", "kid", "21:30-07:15"])
        try runner.ok(["bedtime", "kid", "22:00-09:00", "--day", "fri,sat"])
        try runner.ok(["bedtime", "kid", "off", "--day", "sun"])
        try runner.ok(["app", "block", "kid", "steam"])
        try runner.ok(["app", "limit", "kid", "minecraft", "1h"])
        try runner.ok(["app", "allow", "kid", "gcompris"])
        try runner.ok(["app", "block", "kid", "xonotic", "--by-name"])
        try runner.ok(["warnings", "kid", "1,10,30"])
        try runner.ok(["lockout", "kid", "lock"])
        try runner.ok(["timezone", "kid", "Europe/Berlin"])
        let show = try runner.ok(["policy", "show", "kid", "--json"])
        #expect(
            show.stdout == """
                {
                  "user": "kid",
                  "dailyLimitMinutes": 90,
                  "weekdayLimits": {
                    "mon": 0,
                    "sat": 180,
                    "sun": 180
                  },
                  "bedtime": {
                    "start": "21:30",
                    "end": "07:15"
                  },
                  "weekdayBedtimes": {
                    "fri": {
                      "start": "22:00",
                      "end": "09:00"
                    },
                    "sat": {
                      "start": "22:00",
                      "end": "09:00"
                    },
                    "sun": null
                  },
                  "apps": [
                    {
                      "app": "steam",
                      "rule": "block"
                    },
                    {
                      "app": "minecraft",
                      "rule": "limit",
                      "dailyLimitMinutes": 60
                    },
                    {
                      "app": "gcompris",
                      "rule": "allow"
                    },
                    {
                      "app": "xonotic",
                      "rule": "block"
                    }
                  ],
                  "warnMinutes": [30, 10, 1],
                  "lockout": "lock",
                  "timezone": "Europe/Berlin"
                }

                """)
        let text = try runner.ok(["policy", "show", "kid"])
        let lines = text.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("kid: version 14, signed by key ") == true)
        #expect(
            Array(lines.dropFirst())
                == [
                    "  daily limit  1h30m",
                    "               mon 0",
                    "               sat 3h",
                    "               sun 3h",
                    "  bedtime      21:30-07:15",
                    "               fri 22:00-09:00",
                    "               sat 22:00-09:00",
                    "               sun off",
                    "  apps         gcompris: always allowed",
                    "               minecraft: limited to 1h a day",
                    "               steam: blocked",
                    "               xonotic: blocked",
                    "  warnings     30, 10, 1 minutes before",
                    "  lockout      lock",
                    "  time zone    Europe/Berlin",
                ])
        // Overrides come off again.
        try runner.ok(["limit", "kid", "--day", "mon", "--clear"])
        try runner.ok(["bedtime", "kid", "--day", "sun", "--clear"])
        try runner.ok(["app", "remove", "kid", "xonotic"])
        let after = try runner.ok(["policy", "show", "kid", "--json"]).stdout
        #expect(!after.contains("\"mon\""))
        #expect(!after.contains("\"sun\": null"))
        #expect(!after.contains("xonotic"))
        let apps = try runner.ok(["app", "list", "kid"])
        #expect(apps.stdout == "gcompris   always allowed\nminecraft  limited to 1h a day\nsteam      blocked\n")
    }

    /// Every invalid input: one line naming the rule and the value, the documented exit code, and the
    /// state and shared directories unchanged byte for byte.
    @Test(arguments: [
        (["limit", "kid", "17m"], "daily limit must be a multiple of 15 minutes, got 17", Int32(64)),
        (["limit", "kid", "8h15m"], "daily limit must be between 0 and 480 minutes, got 495", 64),
        (["limit", "kid", "17"], "duration must look like 90m, 1h30m, 2h, 0 or unlimited, got \"17\"", 64),
        (["limit", "kid", "2h", "--day", "someday"], "weekday must be one of mon, tue, wed, thu, fri, sat, sun, got \"someday\"", 64),
        (["limit", "kid", "10m", "--day", "sat"], "daily limit for sat must be a multiple of 15 minutes, got 10", 64),
        (["limit", "kid", "--clear"], "--clear needs --day DAY", 64),
        (["limit", "kid"], "missing duration (90m, 1h30m, 2h, 0 or unlimited)", 64),
        (["limit", "bob", "1h"], "unknown user \"bob\": no policy for this user (add one with curfew user add bob)", 64),
        (["limit", "Bad User", "1h"], "user name must be 1 to 32 lowercase letters, digits, '_', '-' or '.', starting with a letter or '_', got \"Bad User\"", 64),
        (["bedtime", "kid", "21:00-21:00"], "bedtime start and end must differ, got 21:00-21:00", 64),
        (["bedtime", "kid", "25:00-07:00"], "bedtime start must be between 00:00 and 23:59, got \"25:00\"", 64),
        (["bedtime", "kid", "9pm"], "bedtime must look like HH:MM-HH:MM or off, got \"9pm\"", 64),
        (["bedtime", "kid", "21:00-7"], "bedtime end must look like HH:MM, got \"7\"", 64),
        (["app", "block", "kid", "nosuchgame"], "unknown app \"nosuchgame\": not in the app catalog (see curfew app catalog; add --by-name to match an executable named nosuchgame)", 64),
        (["app", "block", "kid", "Steam!"], "app name must be 1 to 64 lowercase letters, digits, '-', '_', '.' or '+', starting with a letter or digit, got \"Steam!\"", 64),
        (["app", "limit", "kid", "minecraft", "20m"], "app limit for minecraft must be a multiple of 15 minutes, got 20", 64),
        (["app", "limit", "kid", "minecraft", "0"], "app limit for minecraft must be between 15 and 480 minutes, got 0 (use block)", 64),
        (["app", "limit", "kid", "minecraft", "9h"], "app limit for minecraft must be between 15 and 480 minutes, got 540", 64),
        (["app", "remove", "kid", "steam"], "user kid has no rule for app \"steam\"", 64),
        (["warnings", "kid", "15,5,5"], "warning minutes must differ, got 5 twice", 64),
        (["warnings", "kid", "15,x"], "warnings must be comma-separated whole minutes like 15,5,1 or off, got \"15,x\"", 64),
        (["warnings", "kid", "0"], "warning minutes must be between 1 and 480, got 0", 64),
        (["lockout", "kid", "shutdown"], "lockout must be logout, lock, apps, network or none, got \"shutdown\"", 64),
        (["lockout", "kid", "network", "--at", "noon"], "lockout cause must be bedtime or limit, got \"noon\"", 64),
        (["lockout", "kid", "offline", "--at", "bedtime"], "lockout must be logout, lock, apps, network or none, got \"offline\"", 64),
        (["timezone", "kid", "Mars/Olympus"], "time zone must be an IANA zone name such as Europe/Berlin, got \"Mars/Olympus\"", 64),
        (["schedule", "kid", "--date", "2026-02-30"], "date must be a real calendar day, got \"2026-02-30\"", 64),
        (["schedule", "kid", "--date", "tomorrow"], "date must look like YYYY-MM-DD, got \"tomorrow\"", 64),
        (["user", "add", "kid"], "user \"kid\" is already managed (version 1)", 64),
        (["user", "remove", "nobody"], "unknown user \"nobody\": no policy for this user (add one with curfew user add nobody)", 64),
        (["policy", "show", "bob"], "unknown user \"bob\": no policy for this user (add one with curfew user add bob)", 64),
        (["policy", "import", "/nonexistent/policy.json"], "cannot open /nonexistent/policy.json: No such file or directory", 64),
        (["frobnicate"], "Unexpected argument 'frobnicate'", 64),
        (["limit", "kid", "1h", "--bogus"], "Unknown option '--bogus'", 64),
    ] as [([String], String, Int32)])
    func invalidInputIsRefusedAndChangesNothing(arguments: [String], message: String, status: Int32) throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        try runner.ok(["policy", "show", "kid"])  // the record index is up to date
        let before = try runner.snapshot()
        let result = try runner.run(arguments)
        #expect(result.status == status, "\(result)")
        #expect(result.stderr == "curfew: \(message)\n")
        #expect(result.stdout == "")
        #expect(try runner.snapshot() == before)
    }

    @Test func badPolicyFilesExit65NamingTheFieldAndChangeNothing() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        let cases: [(String, String)] = [
            (#"{"user": "kid", "dailyLimit": 60}"#,
             #"unknown policy field "dailyLimit" (known fields: user, dailyLimitMinutes, weekdayLimits, bedtime, weekdayBedtimes, apps, warnMinutes, lockout, bedtimeLockout, timezone, limitScope, weeklyLimitMinutes, downtime, breaks, exceptions, selfExtension)"#),
            (#"{"user": "kid", "dailyLimitMinutes": 17}"#, "daily limit must be a multiple of 15 minutes, got 17"),
            (#"{"user": "kid", "dailyLimitMinutes": "2h"}"#,
             #"policy field "dailyLimitMinutes" must be a number of minutes or null (unlimited), got a string"#),
            (#"{"user": "kid", "bedtime": {"start": "21:00", "end": "21:00"}}"#, "bedtime start and end must differ, got 21:00-21:00"),
            (#"{"user": "kid", "apps": [{"app": "steam", "rule": "ban"}]}"#, #"apps[0].rule must be block, limit or allow, got "ban""#),
            (#"{"user": "kid", "weekdayLimits": {"funday": 60}}"#,
             #"weekdayLimits keys must be mon, tue, wed, thu, fri, sat or sun, got "funday""#),
            (#"{"user": "kid", "timezone": "Moon/Base"}"#,
             #"time zone must be an IANA zone name such as Europe/Berlin, got "Moon/Base""#),
            (#"{"user": "kid", "user": "kid"}"#, #"not valid JSON: duplicate key "user" at byte 16"#),
            (#"{"user": "kid", "#, "not valid JSON: expected a quoted key at byte 16"),
            (#"["kid"]"#, "a policy must be a JSON object, got a list"),
        ]
        for (content, message) in cases {
            let file = runner.root.appendingPathComponent("bad.json")
            try Data(content.utf8).write(to: file)
            let before = try runner.snapshot()
            let result = try runner.run(["policy", "import", file.path])
            #expect(result.status == 65, "\(content): \(result)")
            #expect(result.stderr == "curfew: policy file \(file.path): \(message)\n", "\(content)")
            #expect(try runner.snapshot() == before)
        }
    }

    @Test func exportImportRoundTripAndTemplates() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        let example = CurfewRunner.repositoryRoot.appendingPathComponent("policies/examples/school-nights.json").path
        let imported = try runner.ok(["policy", "import", example, "--user", "kid"])
        #expect(imported.stdout.hasPrefix("kid now has the policy from \(example)\n"))
        let exported = runner.root.appendingPathComponent("kid.json")
        try runner.ok(["policy", "export", "kid", "--output", exported.path])
        let again = try runner.ok(["policy", "import", exported.path])
        #expect(again.stdout == "kid already has the policy in \(exported.path); nothing to publish\n")
        // A template applied to a new user manages them.
        let teen = try runner.ok(["policy", "import", example, "--user", "teen"])
        #expect(teen.stdout.hasPrefix("teen is now managed with the policy from"))
        let list = try runner.ok(["user", "list"])
        #expect(list.stdout.contains("kid "))
        #expect(list.stdout.contains("teen "))
    }

    @Test func removeAndResetAskForConfirmation() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        try runner.ok(["limit", "kid", "1h"])
        let before = try runner.snapshot()
        let declined = try runner.run(["reset", "kid"], stdin: "n\n")
        #expect(declined.status == 1)
        #expect(declined.stderr == "Reset every rule of kid to the defaults? [y/N] curfew: not confirmed; nothing changed\n")
        #expect(try runner.snapshot() == before)
        let noInput = try runner.run(["user", "remove", "kid"])
        #expect(noInput.status == 1)
        #expect(try runner.snapshot() == before)
        let reset = try runner.run(["reset", "kid"], stdin: "yes\n")
        #expect(reset.status == 0)
        #expect(reset.stdout.hasPrefix("kid is back to the default policy\npublished version 3"))
        let removed = try runner.ok(["user", "remove", "kid", "--yes"])
        #expect(removed.stdout == "kid is no longer managed\npublished version 4; no computer has confirmed it yet\n")
        let list = try runner.ok(["user", "list"])
        #expect(list.stdout == "no managed users (add one with curfew user add USER)\n")
        let show = try runner.run(["policy", "show", "kid"])
        #expect(show.status == 64)
        // Managed again later, the versions go on.
        let readded = try runner.ok(["user", "add", "kid"])
        #expect(readded.stdout.contains("published version 5;"))
    }

    @Test func uninitialisedStateDirectoryIsUnavailable() throws {
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        let result = try runner.run(["policy", "show", "kid"])
        #expect(result.status == 69)
        #expect(result.stderr == "curfew: state directory \(runner.stateDir) is not initialised (run curfew init)\n")
        #expect(!FileManager.default.fileExists(atPath: runner.stateDir))
    }

    @Test func tamperedAndForeignRecordsAreIgnoredWithAWarning() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        try runner.ok(["limit", "kid", "1h"])
        let records = "\(runner.sharedDir)/records"

        // A copy of the newest record with its limit raised, renamed to match its new hash.
        let newest = try runner.recordFiles().map { name in
            (name, try String(contentsOfFile: "\(records)/\(name)", encoding: .utf8))
        }.first { $0.1.contains("\"version\":2") }!
        let tampered = newest.1.replacingOccurrences(of: "\"dailyLimitMinutes\":60", with: "\"dailyLimitMinutes\":480")
            .replacingOccurrences(of: "\"version\":2", with: "\"version\":3")
        let tamperedName = sha256(tampered) + ".json"
        try tampered.write(toFile: "\(records)/\(tamperedName)", atomically: true, encoding: .utf8)

        // A well-formed record signed by a parent key this computer does not trust.
        let stranger = try CurfewRunner()
        defer { stranger.cleanUp() }
        try stranger.ok(["init"])
        try stranger.ok(["user", "add", "kid"])
        try stranger.ok(["limit", "kid", "8h"])
        try stranger.ok(["limit", "kid", "7h"])
        try stranger.ok(["limit", "kid", "6h"])
        let foreign = try stranger.recordFiles().map { name in
            (name, try String(contentsOfFile: "\(stranger.sharedDir)/records/\(name)", encoding: .utf8))
        }.first { $0.1.contains("\"version\":4") }!
        try foreign.1.write(toFile: "\(records)/\(foreign.0)", atomically: true, encoding: .utf8)

        // A record whose content no longer matches its name.
        let edited = newest.1.replacingOccurrences(of: "\"dailyLimitMinutes\":60", with: "\"dailyLimitMinutes\":45")
        let editedName = String(repeating: "a", count: 64) + ".json"
        try edited.write(toFile: "\(records)/\(editedName)", atomically: true, encoding: .utf8)

        for _ in 0..<2 {  // the second time from the record index
            let show = try runner.ok(["policy", "show", "kid", "--json"])
            #expect(show.stdout.contains("\"dailyLimitMinutes\": 60,"))
            #expect(show.stderr.contains("curfew: warning: ignored record \(tamperedName): signature does not verify with key"))
            #expect(show.stderr.contains("curfew: warning: ignored record \(foreign.0): signed by key"))
            #expect(show.stderr.contains("which is not trusted here"))
            #expect(show.stderr.contains("curfew: warning: ignored record \(editedName): content does not match its name (hash)"))
        }
        // An edit still builds on the last valid version.
        let edit = try runner.ok(["limit", "kid", "45m"])
        #expect(edit.stdout.contains("published version 3;"))
    }

    @Test func scheduleAcrossDSTInTheUsersZone() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        try runner.ok(["timezone", "kid", "Europe/Berlin"])
        // Ends at 02:30, which does not exist on 2026-03-29 (02:00 -> 03:00) and exists twice on
        // 2026-10-25 (03:00 -> 02:00).
        try runner.ok(["bedtime", "kid", "21:00-02:30"])
        let json = try runner.ok(["schedule", "kid", "--date", "2026-03-29", "--json"])
        #expect(
            json.stdout == """
                {
                  "user": "kid",
                  "date": "2026-03-29",
                  "timezone": "Europe/Berlin",
                  "limitMinutes": 120,
                  "extraMinutes": 0,
                  "bedtimeDelayMinutes": 0,
                  "periods": [
                    {
                      "start": "2026-03-29T00:00:00+01:00",
                      "end": "2026-03-29T03:00:00+02:00",
                      "state": "bedtime"
                    },
                    {
                      "start": "2026-03-29T03:00:00+02:00",
                      "end": "2026-03-29T21:00:00+02:00",
                      "state": "allowed"
                    },
                    {
                      "start": "2026-03-29T21:00:00+02:00",
                      "end": "2026-03-30T00:00:00+02:00",
                      "state": "bedtime"
                    }
                  ],
                  "lockout": {
                    "limit": "logout",
                    "bedtime": "logout"
                  }
                }

                """)
        let spring = try runner.ok(["schedule", "kid", "--date", "2026-03-29"])
        #expect(
            spring.stdout == """
                kid on Sunday 2026-03-29 (Europe/Berlin, a day of 23h)
                  00:00-03:00  bedtime  2h
                  03:00-21:00  allowed  18h
                  21:00-24:00  bedtime  3h
                daily limit 2h within 18h allowed

                """)
        let autumn = try runner.ok(["schedule", "kid", "--date", "2026-10-25"])
        #expect(
            autumn.stdout == """
                kid on Sunday 2026-10-25 (Europe/Berlin, a day of 25h)
                  00:00-02:30  bedtime  2h30m
                  02:30-21:00  allowed  19h30m
                  21:00-24:00  bedtime  3h
                daily limit 2h within 19h30m allowed

                """)
        // A weekday bedtime is keyed by the day it starts: Friday's reaches into Saturday morning.
        try runner.ok(["bedtime", "kid", "23:00-09:00", "--day", "fri"])
        let saturday = try runner.ok(["schedule", "kid", "--date", "2026-11-21"])
        #expect(
            saturday.stdout == """
                kid on Saturday 2026-11-21 (Europe/Berlin, a day of 24h)
                  00:00-09:00  bedtime  9h
                  09:00-21:00  allowed  12h
                  21:00-24:00  bedtime  3h
                daily limit 2h within 12h allowed

                """)
    }

    /// A child (any other account) cannot read the parent's state or change policy.
    @Test(.enabled(if: getuid() == 0, "needs root to switch to another account"))
    func otherAccountsAreNotPermitted() throws {
        let runner = try initialised()
        defer { runner.cleanUp() }
        let before = try runner.snapshot()
        for arguments in [["limit", "kid", "8h"], ["policy", "show", "kid"], ["user", "add", "nobody"]] {
            let result = try runner.run(arguments, asUser: "nobody")
            #expect(result.status == 77, "\(arguments): \(result)")
            #expect(
                result.stderr
                    == "curfew: cannot read the state directory \(runner.stateDir) (only a parent may do this; try sudo)\n")
        }
        #expect(try runner.snapshot() == before)
    }

    @Test func versionAndHelp() throws {
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        let version = try runner.ok(["--version"])
        #expect(version.stdout == "0.1.0\n")
        let help = try runner.ok(["--help"])
        #expect(help.stdout.contains("USAGE: curfew <subcommand>"))
    }
}

func sha256(_ text: String) -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    try? process.run()
    input.fileHandleForWriting.write(Data(text.utf8))
    try? input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(String(decoding: data, as: UTF8.self).prefix(64))
}
