import Testing

@testable import CurfewCore

/// The message `Policy.decode` throws for a JSON text, or nil when it decodes.
func decodeError(_ json: String, userOverride: String? = nil) -> String? {
    let value: JSONValue
    do { value = try JSONValue.parse(json) } catch { return "test input is not JSON: \(error)" }
    return policyErrorMessage { () throws(PolicyError) in try Policy.decode(value, userOverride: userOverride) }
}

func decodePolicy(_ json: String, userOverride: String? = nil) throws -> Policy {
    try Policy.decode(JSONValue.parse(json), userOverride: userOverride)
}

func validationError(_ policy: Policy) -> String? {
    policyErrorMessage { () throws(PolicyError) in try policy.validate() }
}

/// A weekday bedtime of "none that night".
let noBedtime: BedtimeWindow? = nil

/// A bedtime window from a literal that is valid; a mistake in a test traps here.
func bedtimeWindow(_ text: String) -> BedtimeWindow {
    try! BedtimeWindow.parse(text)!
}

@Suite("Policy validation")
struct PolicyValidationTests {
    @Test("the defaults follow docs/design.md and are valid")
    func defaults() throws {
        let policy = Policy.defaults(for: "kid")
        #expect(policy.user == "kid")
        #expect(policy.dailyLimit == .minutes(120))
        #expect(policy.weekdayLimits.isEmpty)
        #expect(policy.bedtime?.description == "20:00-07:00")
        #expect(policy.weekdayBedtimes.isEmpty)
        #expect(policy.apps.isEmpty)
        #expect(policy.warnMinutes == [15, 5, 1])
        #expect(policy.lockout == .logout)
        #expect(policy.timezone == nil)
        try policy.validate()
    }

    @Test("daily limits that are allowed", arguments: [0, 15, 30, 45, 60, 120, 465, 480])
    func dailyLimitValid(minutes: Int) throws {
        try Policy(user: "kid", dailyLimit: .minutes(minutes)).validate()
    }

    @Test("an unlimited daily limit is allowed")
    func unlimited() throws {
        try Policy(user: "kid", dailyLimit: .unlimited).validate()
        try Policy(user: "kid", weekdayLimits: [.sun: .unlimited]).validate()
    }

    @Test(
        "daily limits that are refused",
        arguments: [
            (17, "daily limit must be a multiple of 15 minutes, got 17"),
            (1, "daily limit must be a multiple of 15 minutes, got 1"),
            (14, "daily limit must be a multiple of 15 minutes, got 14"),
            (100, "daily limit must be a multiple of 15 minutes, got 100"),
            (479, "daily limit must be a multiple of 15 minutes, got 479"),
            (481, "daily limit must be between 0 and 480 minutes, got 481"),
            (495, "daily limit must be between 0 and 480 minutes, got 495"),
            (1440, "daily limit must be between 0 and 480 minutes, got 1440"),
            (-15, "daily limit must be between 0 and 480 minutes, got -15"),
            (-1, "daily limit must be between 0 and 480 minutes, got -1"),
        ])
    func dailyLimitInvalid(minutes: Int, message: String) {
        #expect(validationError(Policy(user: "kid", dailyLimit: .minutes(minutes))) == message)
    }

    @Test(
        "weekday limits follow the same rule",
        arguments: [
            (Weekday.sat, 17, "daily limit for sat must be a multiple of 15 minutes, got 17"),
            (.mon, 500, "daily limit for mon must be between 0 and 480 minutes, got 500"),
            (.sun, -15, "daily limit for sun must be between 0 and 480 minutes, got -15"),
            (.fri, 20, "daily limit for fri must be a multiple of 15 minutes, got 20"),
        ])
    func weekdayLimitInvalid(day: Weekday, minutes: Int, message: String) {
        #expect(validationError(Policy(user: "kid", weekdayLimits: [day: .minutes(minutes)])) == message)
    }

    @Test("weekday limits: valid ones pass, the first bad day in week order is named")
    func weekdayLimitOrder() throws {
        try Policy(user: "kid", weekdayLimits: [.sat: .minutes(180), .sun: .minutes(0), .wed: .minutes(45)]).validate()
        let policy = Policy(
            user: "kid", weekdayLimits: [.sun: .minutes(7), .tue: .minutes(8), .sat: .minutes(9)])
        #expect(validationError(policy) == "daily limit for tue must be a multiple of 15 minutes, got 8")
    }

    @Test("the daily limit is checked before weekday limits")
    func dailyBeforeWeekday() {
        let policy = Policy(user: "kid", dailyLimit: .minutes(16), weekdayLimits: [.mon: .minutes(7)])
        #expect(validationError(policy) == "daily limit must be a multiple of 15 minutes, got 16")
    }

    @Test("app limits that are allowed", arguments: [15, 30, 60, 465, 480])
    func appLimitValid(minutes: Int) throws {
        try Policy(user: "kid", apps: [AppRule(app: "steam", rule: .limit(minutes: minutes))]).validate()
    }

    @Test(
        "app limits that are refused",
        arguments: [
            (0, "app limit for steam must be between 15 and 480 minutes, got 0 (use block)"),
            (10, "app limit for steam must be between 15 and 480 minutes, got 10"),
            (-15, "app limit for steam must be between 15 and 480 minutes, got -15"),
            (495, "app limit for steam must be between 15 and 480 minutes, got 495"),
            (481, "app limit for steam must be between 15 and 480 minutes, got 481"),
            (20, "app limit for steam must be a multiple of 15 minutes, got 20"),
            (61, "app limit for steam must be a multiple of 15 minutes, got 61"),
        ])
    func appLimitInvalid(minutes: Int, message: String) {
        let policy = Policy(user: "kid", apps: [AppRule(app: "steam", rule: .limit(minutes: minutes))])
        #expect(validationError(policy) == message)
    }

    @Test("each app may have one rule")
    func duplicateApps() {
        let policy = Policy(
            user: "kid",
            apps: [
                AppRule(app: "steam", rule: .block), AppRule(app: "firefox", rule: .allow),
                AppRule(app: "steam", rule: .limit(minutes: 60)),
            ])
        #expect(validationError(policy) == #"app rules must name each app once, got "steam" twice"#)
    }

    @Test("rules of every kind for different apps pass")
    func appKinds() throws {
        let policy = Policy(
            user: "kid",
            apps: [
                AppRule(app: "steam", rule: .block), AppRule(app: "firefox", rule: .allow),
                AppRule(app: "minecraft", rule: .limit(minutes: 60)),
            ])
        try policy.validate()
        #expect(policy.rule(for: "steam") == .block)
        #expect(policy.rule(for: "firefox") == .allow)
        #expect(policy.rule(for: "minecraft") == .limit(minutes: 60))
        #expect(policy.rule(for: "tetris") == nil)
    }

    @Test("warning minutes that are allowed", arguments: [[15, 5, 1], [], [1], [480], [30, 10], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]])
    func warningsValid(minutes: [Int]) throws {
        try Policy(user: "kid", warnMinutes: minutes).validate()
    }

    @Test(
        "warning minutes that are refused",
        arguments: [
            ([15, 0], "warning minutes must be between 1 and 480, got 0"),
            ([-5], "warning minutes must be between 1 and 480, got -5"),
            ([481], "warning minutes must be between 1 and 480, got 481"),
            ([15, 5, 5], "warning minutes must differ, got 5 twice"),
            (Array(1...11), "warnings may list at most 10 times, got 11"),
        ])
    func warningsInvalid(minutes: [Int], message: String) {
        #expect(validationError(Policy(user: "kid", warnMinutes: minutes)) == message)
    }

    @Test(
        "user names that are allowed",
        arguments: [
            "kid", "_kid", "a", "anna-lena", "max.mustermann", "kid2", "k_1", "user$",
            String(repeating: "a", count: 32),
        ])
    func userValid(name: String) throws {
        try Policy(user: name).validate()
    }

    @Test(
        "user names that are refused",
        arguments: [
            "", "Kid", "1kid", "-kid", ".kid", "$", "kid$x", "ki d", "kïd", "kid/", "kid\n", "root:x", "KID",
            String(repeating: "a", count: 33),
        ])
    func userInvalid(name: String) {
        #expect(
            validationError(Policy(user: name))
                == "user name must be 1 to 32 lowercase letters, digits, '_', '-' or '.', starting with a letter or '_', got \(jsonQuoted(name))"
        )
    }

    @Test(
        "app names that are allowed",
        arguments: [
            "steam", "0ad", "minecraft-launcher", "g++", "org.mozilla.firefox", "a", "tux_racer", "9",
            String(repeating: "x", count: 64),
        ])
    func appValid(name: String) throws {
        try Policy(user: "kid", apps: [AppRule(app: name, rule: .block)]).validate()
    }

    @Test(
        "app names that are refused",
        arguments: ["", "Steam", "-app", "+x", ".hidden", "_x", "my app", "app/x", "app*", "stéam", String(repeating: "x", count: 65)])
    func appInvalid(name: String) {
        #expect(
            validationError(Policy(user: "kid", apps: [AppRule(app: name, rule: .allow)]))
                == "app name must be 1 to 64 lowercase letters, digits, '-', '_', '.' or '+', starting with a letter or digit, got \(jsonQuoted(name))"
        )
    }

    @Test(
        "time zones that are allowed",
        arguments: [
            "Europe/Berlin", "UTC", "Etc/GMT+2", "Etc/GMT-14", "Etc/UTC", "America/New_York", "Australia/Lord_Howe",
            "America/Argentina/Buenos_Aires", "Asia/Kolkata", "Asia/Kathmandu", "Europe/Kyiv", "Pacific/Chatham",
            "America/Indiana/Indianapolis", "Antarctica/Troll",
        ])
    func timeZoneValid(name: String) throws {
        try Policy(user: "kid", timezone: name).validate()
        #expect(ZoneRules(identifier: name) != nil)
    }

    @Test(
        "time zones that are refused",
        arguments: [
            "Mars/Olympus", "GMT+2", "europe/berlin", "", "CEST", "+02:00", "Europe/Berlin ", "Europe", "Etc/Nowhere",
            "Etc/GMT+15", "GMT+0200", "UTC+2", "Europe/", "/Berlin", "Europe/Atlantis", "Asia/Riyadh87",
        ])
    func timeZoneInvalid(name: String) {
        #expect(
            validationError(Policy(user: "kid", timezone: name))
                == "time zone must be an IANA zone name such as Europe/Berlin, got \(jsonQuoted(name))")
        #expect(ZoneRules(identifier: name) == nil)
    }

    @Test("rules are checked in the order of the table: user first, time zone last")
    func order() {
        var policy = Policy(
            user: "Bad", dailyLimit: .minutes(17), apps: [AppRule(app: "Steam", rule: .block)], warnMinutes: [0],
            timezone: "Mars/Olympus")
        #expect(validationError(policy)?.hasPrefix("user name must") == true)
        policy.user = "kid"
        #expect(validationError(policy)?.hasPrefix("daily limit must") == true)
        policy.dailyLimit = .minutes(15)
        #expect(validationError(policy)?.hasPrefix("app name must") == true)
        policy.apps = []
        #expect(validationError(policy)?.hasPrefix("warning minutes must") == true)
        policy.warnMinutes = [5]
        #expect(validationError(policy)?.hasPrefix("time zone must") == true)
        policy.timezone = "Europe/Berlin"
        #expect(validationError(policy) == nil)
    }

    @Test("weekday overrides win over the defaults")
    func lookups() {
        let policy = Policy(
            user: "kid", dailyLimit: .minutes(60), weekdayLimits: [.sat: .minutes(180), .sun: .unlimited],
            bedtime: bedtimeWindow("21:00-07:00"), weekdayBedtimes: [.fri: bedtimeWindow("23:00-09:00"), .sat: noBedtime])
        #expect(policy.limit(on: .mon) == .minutes(60))
        #expect(policy.limit(on: .sat) == .minutes(180))
        #expect(policy.limit(on: .sun) == .unlimited)
        #expect(policy.bedtime(startingOn: .thu) == bedtimeWindow("21:00-07:00"))
        #expect(policy.bedtime(startingOn: .fri) == bedtimeWindow("23:00-09:00"))
        #expect(policy.bedtime(startingOn: .sat) == nil)
    }

    @Test("lockout names", arguments: [("logout", Lockout.logout), ("lock", .lock), ("apps", .apps), ("none", .none), ("network", .network)])
    func lockout(text: String, value: Lockout) throws {
        #expect(try Lockout.parse(text) == value)
    }

    @Test("unknown lockout names", arguments: ["kill", "Logout", "", "nothing"])
    func badLockout(text: String) {
        #expect(
            policyErrorMessage { () throws(PolicyError) in try Lockout.parse(text) }
                == "lockout must be logout, lock, apps, network or none, got \(jsonQuoted(text))")
    }
}

/// A string as a JSON literal, written here rather than through the code under test; like values in
/// messages, cut after 64 characters with "...".
func jsonQuoted(_ text: String) -> String {
    var out = "\""
    for scalar in String(text.prefix(64)).unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + (text.count > 64 ? "...\"" : "\"")
}

@Suite("Policy JSON")
struct PolicyDecodeTests {
    static let full = """
        {"user": "kid", "dailyLimitMinutes": 90, "weekdayLimits": {"sat": 180, "sun": null, "wed": 0},
         "bedtime": {"start": "21:00", "end": "07:00"},
         "weekdayBedtimes": {"fri": {"start": "22:30", "end": "08:00"}, "sat": null},
         "apps": [{"app": "steam", "rule": "block"}, {"app": "minecraft", "rule": "limit", "dailyLimitMinutes": 60},
                  {"app": "firefox", "rule": "allow"}],
         "warnMinutes": [1, 15, 5], "lockout": "lock", "timezone": "Europe/Berlin"}
        """

    @Test("every field is read")
    func everyField() throws {
        let policy = try decodePolicy(Self.full)
        #expect(policy.user == "kid")
        #expect(policy.dailyLimit == .minutes(90))
        #expect(policy.weekdayLimits == [.sat: .minutes(180), .sun: .unlimited, .wed: .minutes(0)])
        #expect(policy.bedtime == bedtimeWindow("21:00-07:00"))
        #expect(policy.weekdayBedtimes.count == 2)
        #expect(policy.weekdayBedtimes[.fri] == .some(bedtimeWindow("22:30-08:00")))
        #expect(policy.weekdayBedtimes[.sat] == .some(nil))
        #expect(policy.weekdayBedtimes[.sun] == nil)
        #expect(policy.bedtime(startingOn: .sat) == nil)
        #expect(policy.bedtime(startingOn: .sun) == bedtimeWindow("21:00-07:00"))
        #expect(
            policy.apps == [
                AppRule(app: "steam", rule: .block), AppRule(app: "minecraft", rule: .limit(minutes: 60)),
                AppRule(app: "firefox", rule: .allow),
            ])
        #expect(policy.warnMinutes == [15, 5, 1])
        #expect(policy.lockout == .lock)
        #expect(policy.timezone == "Europe/Berlin")
    }

    @Test("only user given: everything else takes its default")
    func minimal() throws {
        #expect(try decodePolicy(#"{"user": "kid"}"#) == Policy.defaults(for: "kid"))
    }

    @Test("null means unlimited, or no bedtime, or the computer's zone")
    func nulls() throws {
        let policy = try decodePolicy(#"{"user": "kid", "dailyLimitMinutes": null, "bedtime": null, "timezone": null}"#)
        #expect(policy.dailyLimit == .unlimited)
        #expect(policy.bedtime == nil)
        #expect(policy.timezone == nil)
    }

    @Test("userOverride supplies or replaces the user")
    func userOverride() throws {
        #expect(try decodePolicy(#"{"dailyLimitMinutes": 60}"#, userOverride: "anna").user == "anna")
        #expect(try decodePolicy(#"{"user": "kid"}"#, userOverride: "anna").user == "anna")
        #expect(decodeError("{}", userOverride: "Anna")?.hasPrefix("user name must be") == true)
    }

    @Test("json then decode gives the same policy")
    func roundTrip() throws {
        let policies = [
            try decodePolicy(Self.full),
            Policy.defaults(for: "kid"),
            Policy(
                user: "max", dailyLimit: .unlimited, weekdayLimits: [.mon: .minutes(0), .tue: .unlimited],
                bedtime: nil, weekdayBedtimes: [.sun: bedtimeWindow("19:45-06:15"), .thu: noBedtime],
                apps: [AppRule(app: "g++", rule: .allow)], warnMinutes: [], lockout: .apps, timezone: "UTC"),
            Policy(user: "z", bedtime: bedtimeWindow("00:30-06:00"), warnMinutes: [30, 10, 2], timezone: "Australia/Lord_Howe"),
        ]
        for policy in policies {
            #expect(try Policy.decode(policy.json) == policy)
            #expect(try Policy.decode(JSONValue.parse(policy.json.canonicalString)) == policy)
            #expect(try Policy.decode(JSONValue.parse(policy.json.prettyString)) == policy)
        }
    }

    @Test("json writes the documented fields in the documented order")
    func jsonShape() throws {
        let policy = try decodePolicy(Self.full)
        guard case .object(let object) = policy.json else {
            Issue.record("not an object")
            return
        }
        // limitScope and the schedule rules are written only when set, so a policy that
        // does not use them reads (and its records verify) as before the fields existed.
        // So does bedtimeLockout (right after lockout).
        let optional: Set = ["limitScope", "weeklyLimitMinutes", "downtime", "breaks", "exceptions", "selfExtension", "bedtimeLockout"]
        #expect(object.keys == Policy.fieldNames.filter { !optional.contains($0) })
        var everyComputer = policy
        everyComputer.limitScope = .allComputers
        guard case .object(let all) = everyComputer.json else { return }
        #expect(all.keys == Policy.fieldNames.filter { $0 == "limitScope" || !optional.contains($0) })
        #expect(all["limitScope"] == .string("all-computers"))
        var byCause = policy
        byCause.bedtimeLockout = .network
        guard case .object(let withBedtime) = byCause.json else { return }
        #expect(withBedtime.keys == Policy.fieldNames.filter { $0 == "bedtimeLockout" || !optional.contains($0) })
        #expect(try Policy.decode(byCause.json) == byCause)
        #expect(try Policy.decode(JSONValue.parse(#"{"user": "kid", "lockout": "lock", "bedtimeLockout": null}"#)).lockout(for: .bedtime) == .lock)
        #expect(try Policy.decode(everyComputer.json) == everyComputer)
        #expect(try Policy.decode(JSONValue.parse(#"{"user": "kid", "limitScope": "this-computer"}"#)).limitScope == .thisComputer)
        #expect(throws: PolicyError("limit scope must be this-computer or all-computers, got \"all\"")) {
            try Policy.decode(JSONValue.parse(#"{"user": "kid", "limitScope": "all"}"#))
        }
        #expect(
            policy.json.canonicalString
                == #"{"apps":[{"app":"steam","rule":"block"},{"app":"minecraft","dailyLimitMinutes":60,"rule":"limit"},{"app":"firefox","rule":"allow"}],"bedtime":{"end":"07:00","start":"21:00"},"dailyLimitMinutes":90,"lockout":"lock","timezone":"Europe/Berlin","user":"kid","warnMinutes":[15,5,1],"weekdayBedtimes":{"fri":{"end":"08:00","start":"22:30"},"sat":null},"weekdayLimits":{"sat":180,"sun":null,"wed":0}}"#
        )
        #expect(
            Policy(user: "kid", weekdayLimits: [.sun: .minutes(15), .mon: .minutes(30)]).json.prettyString.contains(
                "\"weekdayLimits\": {\n    \"mon\": 30,\n    \"sun\": 15\n  }"))
    }

    static let knownFields =
        "user, dailyLimitMinutes, weekdayLimits, bedtime, weekdayBedtimes, apps, warnMinutes, lockout, bedtimeLockout, timezone, limitScope, "
        + "weeklyLimitMinutes, downtime, breaks, exceptions, selfExtension"

    @Test(
        "decoding errors name the field and the value",
        arguments: [
            // The document itself.
            ("[]", "a policy must be a JSON object, got a list"),
            ("\"kid\"", "a policy must be a JSON object, got a string"),
            ("null", "a policy must be a JSON object, got null"),
            // Unknown fields, at every level.
            (#"{"user": "kid", "dailyLimit": 60}"#, #"unknown policy field "dailyLimit" (known fields: \#(knownFields))"#),
            (#"{"User": "kid"}"#, #"unknown policy field "User" (known fields: \#(knownFields))"#),
            (
                #"{"user": "kid", "apps": [{"app": "steam", "rule": "block", "reason": "games"}]}"#,
                #"unknown field "reason" in apps[0] (known fields: app, rule, dailyLimitMinutes)"#
            ),
            (
                #"{"user": "kid", "bedtime": {"start": "21:00", "end": "07:00", "days": "weekdays"}}"#,
                #"unknown field "days" in bedtime (known fields: start, end)"#
            ),
            (
                #"{"user": "kid", "weekdayBedtimes": {"fri": {"start": "22:00", "stop": "07:00"}}}"#,
                #"unknown field "stop" in weekdayBedtimes.fri (known fields: start, end)"#
            ),
            // The user.
            ("{}", #"policy field "user" is missing"#),
            (#"{"dailyLimitMinutes": 60}"#, #"policy field "user" is missing"#),
            (#"{"user": 7}"#, #"policy field "user" must be a string, got a number"#),
            (#"{"user": null}"#, #"policy field "user" must be a string, got null"#),
            (
                #"{"user": "Kid"}"#,
                #"user name must be 1 to 32 lowercase letters, digits, '_', '-' or '.', starting with a letter or '_', got "Kid""#
            ),
            // Limits.
            (#"{"user": "kid", "dailyLimitMinutes": 17}"#, "daily limit must be a multiple of 15 minutes, got 17"),
            (#"{"user": "kid", "dailyLimitMinutes": 495}"#, "daily limit must be between 0 and 480 minutes, got 495"),
            (
                #"{"user": "kid", "dailyLimitMinutes": "90m"}"#,
                #"policy field "dailyLimitMinutes" must be a number of minutes or null (unlimited), got a string"#
            ),
            (
                #"{"user": "kid", "dailyLimitMinutes": true}"#,
                #"policy field "dailyLimitMinutes" must be a number of minutes or null (unlimited), got a boolean"#
            ),
            (
                #"{"user": "kid", "dailyLimitMinutes": 10000000}"#,
                #"policy field "dailyLimitMinutes" is out of range, got 10000000"#
            ),
            (
                #"{"user": "kid", "dailyLimitMinutes": -9223372036854775808}"#,
                #"policy field "dailyLimitMinutes" is out of range, got -9223372036854775808"#
            ),
            (
                #"{"user": "kid", "dailyLimitMinutes": 9223372036854775807}"#,
                #"policy field "dailyLimitMinutes" is out of range, got 9223372036854775807"#
            ),
            (
                #"{"user": "kid", "weekdayLimits": [180]}"#,
                #"policy field "weekdayLimits" must be an object, got a list"#
            ),
            (
                #"{"user": "kid", "weekdayLimits": {"saturday": 180}}"#,
                #"weekdayLimits keys must be mon, tue, wed, thu, fri, sat or sun, got "saturday""#
            ),
            (
                #"{"user": "kid", "weekdayLimits": {"Sat": 180}}"#,
                #"weekdayLimits keys must be mon, tue, wed, thu, fri, sat or sun, got "Sat""#
            ),
            (
                #"{"user": "kid", "weekdayLimits": {"sat": "3h"}}"#,
                #"policy field "weekdayLimits.sat" must be a number of minutes or null (unlimited), got a string"#
            ),
            (#"{"user": "kid", "weekdayLimits": {"sat": 500}}"#, "daily limit for sat must be between 0 and 480 minutes, got 500"),
            (#"{"user": "kid", "weekdayLimits": {"sun": 50}}"#, "daily limit for sun must be a multiple of 15 minutes, got 50"),
            // Bedtimes.
            (
                #"{"user": "kid", "bedtime": "21:00-07:00"}"#,
                #"policy field "bedtime" must be an object, got a string"#
            ),
            (
                #"{"user": "kid", "bedtime": {"start": "21:00"}}"#,
                #"policy field "bedtime" needs both start and end"#
            ),
            (
                #"{"user": "kid", "bedtime": {"start": 2100, "end": "07:00"}}"#,
                #"policy field "bedtime.start" must be a string, got a number"#
            ),
            (
                #"{"user": "kid", "bedtime": {"start": "21:00", "end": "7am"}}"#,
                #"bedtime end must look like HH:MM, got "7am""#
            ),
            (
                #"{"user": "kid", "bedtime": {"start": "24:00", "end": "07:00"}}"#,
                #"bedtime start must be between 00:00 and 23:59, got "24:00""#
            ),
            (
                #"{"user": "kid", "bedtime": {"start": "21:00", "end": "21:00"}}"#,
                "bedtime start and end must differ, got 21:00-21:00"
            ),
            (
                #"{"user": "kid", "weekdayBedtimes": {"fri": {"start": "22:00", "end": "22:00"}}}"#,
                "bedtime start and end must differ, got 22:00-22:00"
            ),
            (
                #"{"user": "kid", "weekdayBedtimes": {"friday": null}}"#,
                #"weekdayBedtimes keys must be mon, tue, wed, thu, fri, sat or sun, got "friday""#
            ),
            (
                #"{"user": "kid", "weekdayBedtimes": {"fri": "off"}}"#,
                #"policy field "weekdayBedtimes.fri" must be an object, got a string"#
            ),
            (
                #"{"user": "kid", "weekdayBedtimes": null}"#,
                #"policy field "weekdayBedtimes" must be an object, got null"#
            ),
            // Apps.
            (#"{"user": "kid", "apps": {"steam": "block"}}"#, #"policy field "apps" must be a list, got an object"#),
            (#"{"user": "kid", "apps": ["steam"]}"#, #"policy field "apps[0]" must be an object, got a string"#),
            (#"{"user": "kid", "apps": [{"rule": "block"}]}"#, "apps[0].app is missing"),
            (#"{"user": "kid", "apps": [{"app": "steam"}]}"#, "apps[0].rule is missing"),
            (
                #"{"user": "kid", "apps": [{"app": "steam", "rule": "block"}, {"app": 5, "rule": "block"}]}"#,
                #"policy field "apps[1].app" must be a string, got a number"#
            ),
            (
                #"{"user": "kid", "apps": [{"app": "steam", "rule": "deny"}]}"#,
                #"apps[0].rule must be block, limit or allow, got "deny""#
            ),
            (
                #"{"user": "kid", "apps": [{"app": "steam", "rule": "limit"}]}"#,
                "apps[0].dailyLimitMinutes is missing: a limit rule needs it"
            ),
            (
                #"{"user": "kid", "apps": [{"app": "steam", "rule": "block", "dailyLimitMinutes": 60}]}"#,
                "apps[0].dailyLimitMinutes is only allowed with rule limit, got rule block"
            ),
            (
                #"{"user": "kid", "apps": [{"app": "steam", "rule": "limit", "dailyLimitMinutes": null}]}"#,
                #"policy field "apps[0].dailyLimitMinutes" must be a whole number, got null"#
            ),
            (
                #"{"user": "kid", "apps": [{"app": "steam", "rule": "limit", "dailyLimitMinutes": 20}]}"#,
                "app limit for steam must be a multiple of 15 minutes, got 20"
            ),
            (
                #"{"user": "kid", "apps": [{"app": "steam", "rule": "limit", "dailyLimitMinutes": 0}]}"#,
                "app limit for steam must be between 15 and 480 minutes, got 0 (use block)"
            ),
            (
                #"{"user": "kid", "apps": [{"app": "steam", "rule": "block"}, {"app": "steam", "rule": "allow"}]}"#,
                #"app rules must name each app once, got "steam" twice"#
            ),
            (
                #"{"user": "kid", "apps": [{"app": "Steam", "rule": "block"}]}"#,
                #"app name must be 1 to 64 lowercase letters, digits, '-', '_', '.' or '+', starting with a letter or digit, got "Steam""#
            ),
            // Warnings, lockout, zone.
            (#"{"user": "kid", "warnMinutes": 5}"#, #"policy field "warnMinutes" must be a list, got a number"#),
            (#"{"user": "kid", "warnMinutes": [15, "5"]}"#, #"policy field "warnMinutes[1]" must be a whole number, got a string"#),
            (#"{"user": "kid", "warnMinutes": [15, 0]}"#, "warning minutes must be between 1 and 480, got 0"),
            (#"{"user": "kid", "warnMinutes": [5, 5]}"#, "warning minutes must differ, got 5 twice"),
            (#"{"user": "kid", "lockout": "kill"}"#, #"lockout must be logout, lock, apps, network or none, got "kill""#),
            (#"{"user": "kid", "bedtimeLockout": "offline"}"#, #"bedtime lockout must be logout, lock, apps, network or none, got "offline""#),
            (#"{"user": "kid", "bedtimeLockout": 1}"#, #"policy field "bedtimeLockout" must be a string, got a number"#),
            (#"{"user": "kid", "lockout": null}"#, #"policy field "lockout" must be a string, got null"#),
            (#"{"user": "kid", "timezone": 1}"#, #"policy field "timezone" must be a string, got a number"#),
            (
                #"{"user": "kid", "timezone": "Mars/Olympus"}"#,
                #"time zone must be an IANA zone name such as Europe/Berlin, got "Mars/Olympus""#
            ),
            (
                #"{"user": "kid", "timezone": "GMT+2"}"#,
                #"time zone must be an IANA zone name such as Europe/Berlin, got "GMT+2""#
            ),
            (
                #"{"user": "kid", "timezone": "europe/berlin"}"#,
                #"time zone must be an IANA zone name such as Europe/Berlin, got "europe/berlin""#
            ),
        ])
    func errors(json: String, message: String) {
        #expect(decodeError(json) == message)
    }

    @Test("unknown fields are reported before anything else")
    func unknownFirst() {
        #expect(
            decodeError(#"{"dailyLimitMinutes": 17, "colour": "red"}"#)
                == #"unknown policy field "colour" (known fields: \#(Self.knownFields))"#)
    }

    @Test("an empty weekday map clears nothing and adds nothing")
    func emptyMaps() throws {
        let policy = try decodePolicy(#"{"user": "kid", "weekdayLimits": {}, "weekdayBedtimes": {}, "apps": [], "warnMinutes": []}"#)
        #expect(policy.weekdayLimits.isEmpty)
        #expect(policy.weekdayBedtimes.isEmpty)
        #expect(policy.apps.isEmpty)
        #expect(policy.warnMinutes.isEmpty)
    }
}
