/// What happens when a child runs out of time or bedtime starts.
public enum Lockout: String, CaseIterable, Sendable, Codable {
    /// End the sessions and refuse logins until use is allowed again.
    case logout
    /// Lock the sessions, and lock again whenever they are unlocked.
    case lock
    /// Stop the tracked apps that are not always allowed.
    case apps
    /// Monitor only: count, warn and report, but never stop anything or refuse a login.
    case none
    /// Cut the child's network traffic (loopback excepted); the session and offline apps go on, and
    /// logins are not refused.
    case network

    /// `rule` names the field in the error: `lockout`, or `bedtime lockout`.
    public static func parse(_ text: String, rule: String = "lockout") throws(PolicyError) -> Lockout {
        guard let value = Lockout(rawValue: text) else {
            throw PolicyError("\(rule) must be logout, lock, apps, network or none, got \(quoted(text))")
        }
        return value
    }

    /// Whether logins are refused while this lockout is in force: not when it only monitors, nor when
    /// it only cuts the network (the session is meant to go on offline).
    public var refusesLogins: Bool { self != .none && self != .network }
}

/// Why use is not allowed, as far as the lockout goes: the clock (bedtime, downtime windows), or
/// used time (the day's limit, the week's, a break).
public enum LockoutCause: String, CaseIterable, Sendable {
    /// Bedtime and downtime windows: the policy's `bedtimeLockout`.
    case bedtime
    /// The day's or the week's limit, or a break: the policy's `lockout`.
    case limit

    public static func parse(_ text: String) throws(PolicyError) -> LockoutCause {
        guard let value = LockoutCause(rawValue: text) else {
            throw PolicyError("lockout cause must be bedtime or limit, got \(quoted(text))")
        }
        return value
    }

    public init?(_ state: UseState) {
        switch state {
        case .allowed: return nil
        case .bedtime, .downtime: self = .bedtime
        case .limitReached, .weekLimitReached, .breakTime: self = .limit
        }
    }
}

/// Which computers' screen time the daily limit counts.
public enum LimitScope: String, CaseIterable, Sendable, Codable {
    /// Only time on this computer (the default).
    case thisComputer = "this-computer"
    /// Time on every computer of the family, from the usage summaries in the shared directory.
    case allComputers = "all-computers"

    public static func parse(_ text: String) throws(PolicyError) -> LimitScope {
        switch text {
        case "this-computer", "this": return .thisComputer
        case "all-computers", "all": return .allComputers
        default: throw PolicyError("limit scope must be this-computer or all-computers, got \(quoted(text))")
        }
    }
}

/// The rule a parent set for one app.
public enum AppRuleKind: Sendable, Equatable, Hashable {
    case block
    /// At most this many minutes a day.
    case limit(minutes: Int)
    /// Always allowed: its time does not count and it is not stopped by limit or bedtime.
    case allow

    public var name: String {
        switch self {
        case .block: "block"
        case .limit: "limit"
        case .allow: "allow"
        }
    }
}

public struct AppRule: Sendable, Equatable, Hashable {
    public var app: String
    public var rule: AppRuleKind

    public init(app: String, rule: AppRuleKind) {
        self.app = app
        self.rule = rule
    }
}

/// One managed user's rules, as docs/design.md's policy table describes them.
public struct Policy: Sendable, Equatable {
    public static let maxDailyMinutes = 480
    public static let minuteStep = 15
    public static let defaultWarnMinutes = [15, 5, 1]

    public var user: String
    public var dailyLimit: TimeAllowance
    public var weekdayLimits: [Weekday: TimeAllowance]
    /// nil: no bedtime.
    public var bedtime: BedtimeWindow?
    /// Overrides keyed by the day the window starts; a nil value means no bedtime that night.
    public var weekdayBedtimes: [Weekday: BedtimeWindow?]
    public var apps: [AppRule]
    /// Minutes before a limit or bedtime when the child is warned, largest first.
    public var warnMinutes: [Int]
    /// The lockout at the limit (the day's, the week's, a break), and at bedtime unless `bedtimeLockout` says otherwise.
    public var lockout: Lockout
    /// The lockout at bedtime and in downtime windows; nil: the same as `lockout` (records made before
    /// the field existed read so).
    public var bedtimeLockout: Lockout?
    /// An IANA zone name; nil means the computer's own zone.
    public var timezone: String?
    /// Whether the daily limits count this computer's time only or every family computer's.
    public var limitScope: LimitScope
    /// At most this many minutes a week (weeks start on Monday in the policy's zone); nil: no weekly limit.
    public var weeklyLimitMinutes: Int?
    /// Named blocked windows besides bedtime, sorted by name.
    public var downtime: [DowntimeWindow]
    /// Forced pauses; nil: none.
    public var breaks: Breaks?
    /// Date ranges with other rules than usual, sorted by date, never overlapping.
    public var exceptions: [PolicyException]
    /// Extra time the child may take without asking; nil: none.
    public var selfExtension: SelfExtension?

    public init(
        user: String,
        dailyLimit: TimeAllowance = .minutes(120),
        weekdayLimits: [Weekday: TimeAllowance] = [:],
        bedtime: BedtimeWindow? = Policy.defaultBedtime,
        weekdayBedtimes: [Weekday: BedtimeWindow?] = [:],
        apps: [AppRule] = [],
        warnMinutes: [Int] = Policy.defaultWarnMinutes,
        lockout: Lockout = .logout,
        bedtimeLockout: Lockout? = nil,
        timezone: String? = nil,
        limitScope: LimitScope = .thisComputer,
        weeklyLimitMinutes: Int? = nil,
        downtime: [DowntimeWindow] = [],
        breaks: Breaks? = nil,
        exceptions: [PolicyException] = [],
        selfExtension: SelfExtension? = nil
    ) {
        self.user = user
        self.dailyLimit = dailyLimit
        self.weekdayLimits = weekdayLimits
        self.bedtime = bedtime
        self.weekdayBedtimes = weekdayBedtimes
        self.apps = apps
        self.warnMinutes = warnMinutes
        self.lockout = lockout
        self.bedtimeLockout = bedtimeLockout
        self.timezone = timezone
        self.limitScope = limitScope
        self.weeklyLimitMinutes = weeklyLimitMinutes
        self.downtime = downtime
        self.breaks = breaks
        self.exceptions = exceptions
        self.selfExtension = selfExtension
        sortScheduleLists()
    }

    // Checked by validation and by the tests; a literal that cannot fail.
    public static let defaultBedtime: BedtimeWindow? = try? BedtimeWindow(
        start: ClockTime(hour: 20, minute: 0), end: ClockTime(hour: 7, minute: 0))

    /// The defaults (docs/design.md): 120 minutes, bedtime 20:00-07:00, warnings 15, 5, 1, logout.
    public static func defaults(for user: String) -> Policy { Policy(user: user) }

    /// What a managed user is held to when no valid policy of theirs can be loaded and the agent
    /// fails closed: no screen time, logins refused.
    public static func failClosed(for user: String) -> Policy {
        Policy(user: user, dailyLimit: .minutes(0), bedtime: nil, warnMinutes: [], lockout: .logout)
    }

    public func limit(on weekday: Weekday) -> TimeAllowance { weekdayLimits[weekday] ?? dailyLimit }

    public func bedtime(startingOn weekday: Weekday) -> BedtimeWindow? {
        if let override = weekdayBedtimes[weekday] { return override }
        return bedtime
    }

    public func rule(for app: String) -> AppRuleKind? { apps.first(where: { $0.app == app })?.rule }

    /// The lockout for a cause: `bedtimeLockout` (else `lockout`) at bedtime and in downtime,
    /// `lockout` at a limit or a break.
    public func lockout(for cause: LockoutCause) -> Lockout {
        switch cause {
        case .bedtime: bedtimeLockout ?? lockout
        case .limit: lockout
        }
    }

    /// Monitor only: every lockout is `none`, so not even blocked or limited apps are stopped.
    public var monitorsOnly: Bool { lockout == .none && lockout(for: .bedtime) == .none }

    /// The lockout in force in a state; nil while use is allowed.
    public func lockout(in state: UseState) -> Lockout? { LockoutCause(state).map { lockout(for: $0) } }
}

// MARK: - Validation

extension Policy {
    /// Checks every rule of docs/design.md's policy table; the first broken rule is thrown.
    public func validate() throws(PolicyError) {
        try Policy.validateUserName(user)
        try Policy.validateDaily(dailyLimit, rule: "daily limit")
        for (day, limit) in weekdayLimits.sorted(by: { $0.key < $1.key }) {
            try Policy.validateDaily(limit, rule: "daily limit for \(day.rawValue)")
        }
        var seen = Set<String>()
        for rule in apps {
            try Policy.validateAppName(rule.app)
            guard seen.insert(rule.app).inserted else {
                throw PolicyError("app rules must name each app once, got \(quoted(rule.app)) twice")
            }
            if case .limit(let minutes) = rule.rule {
                try Policy.validateAppLimit(minutes, app: rule.app)
            }
        }
        try Policy.validateWarnings(warnMinutes)
        if let timezone { try Policy.validateTimeZone(timezone) }
        try Policy.validateWeekly(weeklyLimitMinutes)
        try Policy.validateDowntime(downtime)
        try breaks?.validate()
        try Policy.validateExceptions(exceptions)
        try selfExtension?.validate()
    }

    public static func validateDaily(_ allowance: TimeAllowance, rule: String) throws(PolicyError) {
        guard case .minutes(let minutes) = allowance else { return }
        guard (0...maxDailyMinutes).contains(minutes) else {
            throw PolicyError("\(rule) must be between 0 and \(maxDailyMinutes) minutes, got \(minutes)")
        }
        guard minutes % minuteStep == 0 else {
            throw PolicyError("\(rule) must be a multiple of \(minuteStep) minutes, got \(minutes)")
        }
    }

    public static func validateAppLimit(_ minutes: Int, app: String) throws(PolicyError) {
        guard (minuteStep...maxDailyMinutes).contains(minutes) else {
            throw PolicyError(
                "app limit for \(app) must be between \(minuteStep) and \(maxDailyMinutes) minutes, got \(minutes)"
                    + (minutes == 0 ? " (use block)" : ""))
        }
        guard minutes % minuteStep == 0 else {
            throw PolicyError("app limit for \(app) must be a multiple of \(minuteStep) minutes, got \(minutes)")
        }
    }

    public static func validateWarnings(_ minutes: [Int]) throws(PolicyError) {
        guard minutes.count <= 10 else {
            throw PolicyError("warnings may list at most 10 times, got \(minutes.count)")
        }
        var seen = Set<Int>()
        for value in minutes {
            guard (1...maxDailyMinutes).contains(value) else {
                throw PolicyError("warning minutes must be between 1 and \(maxDailyMinutes), got \(value)")
            }
            guard seen.insert(value).inserted else {
                throw PolicyError("warning minutes must differ, got \(value) twice")
            }
        }
    }

    /// A name a policy may be for: a valid login name, and never root's.
    public static func validateUserName(_ name: String) throws(PolicyError) {
        try validateUserNameSyntax(name)
        guard name != superuserName else {
            throw PolicyError("root is never managed (Curfew never locks out the administrator), got \(quoted(name))")
        }
    }

    /// POSIX-portable account names, as `useradd` accepts them by default (documents that only mention
    /// a user, such as confirmations, take any of them).
    public static func validateUserNameSyntax(_ name: String) throws(PolicyError) {
        let bytes = Array(name.utf8)
        let valid =
            !bytes.isEmpty && bytes.count <= 32
            && bytes.enumerated().allSatisfy { index, byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "_"): true
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."): index > 0
                case UInt8(ascii: "$"): index == bytes.count - 1 && index > 0
                default: false
                }
            }
        guard valid else {
            throw PolicyError(
                "user name must be 1 to 32 lowercase letters, digits, '_', '-' or '.', starting with a letter or '_', got \(quoted(name))"
            )
        }
    }

    /// The administrator's account, which no policy may name (an account of uid 0 under another name is
    /// refused where accounts can be looked up: the CLI and the agent).
    public static let superuserName = "root"

    public static func validateAppName(_ name: String) throws(PolicyError) {
        let bytes = Array(name.utf8)
        let valid =
            !bytes.isEmpty && bytes.count <= 64
            && bytes.enumerated().allSatisfy { index, byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
                case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "+"): index > 0
                default: false
                }
            }
        guard valid else {
            throw PolicyError(
                "app name must be 1 to 64 lowercase letters, digits, '-', '_', '.' or '+', starting with a letter or digit, got \(quoted(name))"
            )
        }
    }

    public static func validateTimeZone(_ name: String) throws(PolicyError) {
        guard ZoneRules.isKnownZone(name) else {
            throw PolicyError("time zone must be an IANA zone name such as Europe/Berlin, got \(quoted(name))")
        }
    }
}

// MARK: - JSON

extension Policy {
    public static let fieldNames = [
        "user", "dailyLimitMinutes", "weekdayLimits", "bedtime", "weekdayBedtimes", "apps", "warnMinutes",
        "lockout", "bedtimeLockout", "timezone", "limitScope", "weeklyLimitMinutes", "downtime", "breaks", "exceptions", "selfExtension",
    ]

    /// The policy in its documented JSON form (docs/design.md), fields in the documented order. `limitScope` appears only
    /// when it is `all-computers`: a policy that does not use it reads (and verifies) exactly as
    /// before the field existed, also on computers whose agent does not know it yet. The schedule
    /// rules `weeklyLimitMinutes`, `downtime`, `breaks`, `exceptions` and `selfExtension` appear only
    /// when set, and so does `bedtimeLockout` (right after `lockout`).
    public var json: JSONValue {
        func allowance(_ value: TimeAllowance) -> JSONValue {
            if case .minutes(let minutes) = value { return .int(Int64(minutes)) }
            return .null
        }
        func window(_ value: BedtimeWindow?) -> JSONValue {
            guard let value else { return .null }
            return .object(JSONObject([("start", .string("\(value.start)")), ("end", .string("\(value.end)"))]))
        }
        let apps: [JSONValue] = apps.map { rule in
            var object = JSONObject([("app", .string(rule.app)), ("rule", .string(rule.rule.name))])
            if case .limit(let minutes) = rule.rule { object["dailyLimitMinutes"] = .int(Int64(minutes)) }
            return .object(object)
        }
        var object = JSONObject([
            ("user", .string(user)),
            ("dailyLimitMinutes", allowance(dailyLimit)),
            (
                "weekdayLimits",
                .object(JSONObject(weekdayLimits.sorted { $0.key < $1.key }.map { ($0.key.rawValue, allowance($0.value)) }))
            ),
            ("bedtime", window(bedtime)),
            (
                "weekdayBedtimes",
                .object(JSONObject(weekdayBedtimes.sorted { $0.key < $1.key }.map { ($0.key.rawValue, window($0.value)) }))
            ),
            ("apps", .array(apps)),
            ("warnMinutes", .array(warnMinutes.map { .int(Int64($0)) })),
            ("lockout", .string(lockout.rawValue)),
        ])
        if let bedtimeLockout { object["bedtimeLockout"] = .string(bedtimeLockout.rawValue) }
        object["timezone"] = timezone.map { .string($0) } ?? .null
        if limitScope != .thisComputer { object["limitScope"] = .string(limitScope.rawValue) }
        if let weeklyLimitMinutes { object["weeklyLimitMinutes"] = .int(Int64(weeklyLimitMinutes)) }
        if !downtime.isEmpty { object["downtime"] = .array(downtime.sorted { $0.name < $1.name }.map(\.json)) }
        if let breaks { object["breaks"] = breaks.json }
        if !exceptions.isEmpty { object["exceptions"] = .array(exceptions.sorted { $0.from < $1.from }.map(\.json)) }
        if let selfExtension { object["selfExtension"] = selfExtension.json }
        return .object(object)
    }

    /// Reads the documented JSON form. Every field but `user` may be left out and takes its default;
    /// `user` may come from `userOverride` instead (a policy file used as a template). Unknown
    /// fields and wrong types are errors naming the field. The result is validated.
    public static func decode(_ value: JSONValue, userOverride: String? = nil) throws(PolicyError) -> Policy {
        guard case .object(let object) = value else {
            throw PolicyError("a policy must be a JSON object, got \(value.typeName)")
        }
        for key in object.keys where !fieldNames.contains(key) {
            throw PolicyError("unknown policy field \(quoted(key)) (known fields: \(fieldNames.joined(separator: ", ")))")
        }
        let user: String
        if let userOverride {
            user = userOverride
        } else if let field = object["user"] {
            user = try field.string("user")
        } else {
            throw PolicyError("policy field \"user\" is missing")
        }
        var policy = Policy.defaults(for: user)
        if let field = object["dailyLimitMinutes"] {
            policy.dailyLimit = try field.allowance("dailyLimitMinutes")
        }
        if let field = object["weekdayLimits"] {
            policy.weekdayLimits = [:]
            for (key, entry) in try field.object("weekdayLimits").entries {
                let day = try weekdayKey(key, field: "weekdayLimits")
                policy.weekdayLimits[day] = try entry.allowance("weekdayLimits.\(key)")
            }
        }
        if let field = object["bedtime"] { policy.bedtime = try field.bedtime("bedtime") }
        if let field = object["weekdayBedtimes"] {
            policy.weekdayBedtimes = [:]
            for (key, entry) in try field.object("weekdayBedtimes").entries {
                let day = try weekdayKey(key, field: "weekdayBedtimes")
                policy.weekdayBedtimes[day] = .some(try entry.bedtime("weekdayBedtimes.\(key)"))
            }
        }
        if let field = object["apps"] {
            guard case .array(let entries) = field else {
                throw PolicyError("policy field \"apps\" must be a list, got \(field.typeName)")
            }
            policy.apps = []
            for (index, entry) in entries.enumerated() {
                policy.apps.append(try appRule(entry, path: "apps[\(index)]"))
            }
        }
        if let field = object["warnMinutes"] {
            guard case .array(let entries) = field else {
                throw PolicyError("policy field \"warnMinutes\" must be a list, got \(field.typeName)")
            }
            var minutes: [Int] = []
            for (index, entry) in entries.enumerated() { minutes.append(try entry.int("warnMinutes[\(index)]")) }
            policy.warnMinutes = minutes
        }
        if let field = object["lockout"] { policy.lockout = try Lockout.parse(try field.string("lockout")) }
        if let field = object["bedtimeLockout"] {
            // null reads as absent: the same as `lockout`.
            policy.bedtimeLockout = field == .null ? nil : try Lockout.parse(try field.string("bedtimeLockout"), rule: "bedtime lockout")
        }
        if let field = object["timezone"] {
            policy.timezone = field == .null ? nil : try field.string("timezone")
        }
        if let field = object["limitScope"] {
            let text = try field.string("limitScope")
            guard let scope = LimitScope(rawValue: text) else {
                throw PolicyError("limit scope must be this-computer or all-computers, got \(quoted(text))")
            }
            policy.limitScope = scope
        }
        if let field = object["weeklyLimitMinutes"] {
            policy.weeklyLimitMinutes = field == .null ? nil : try field.int("weeklyLimitMinutes")
        }
        if let field = object["downtime"] {
            guard case .array(let entries) = field else {
                throw PolicyError("policy field \"downtime\" must be a list, got \(field.typeName)")
            }
            guard entries.count <= DowntimeWindow.maxCount else {
                throw PolicyError("downtime may hold at most \(DowntimeWindow.maxCount) windows, got \(entries.count)")
            }
            for (index, entry) in entries.enumerated() {
                policy.downtime.append(try DowntimeWindow.decode(entry, path: "downtime[\(index)]"))
            }
        }
        if let field = object["breaks"] { policy.breaks = try Breaks.decode(field) }
        if let field = object["exceptions"] {
            guard case .array(let entries) = field else {
                throw PolicyError("policy field \"exceptions\" must be a list, got \(field.typeName)")
            }
            guard entries.count <= PolicyException.maxCount else {
                throw PolicyError("exceptions may hold at most \(PolicyException.maxCount) date ranges, got \(entries.count)")
            }
            for (index, entry) in entries.enumerated() {
                policy.exceptions.append(try PolicyException.decode(entry, path: "exceptions[\(index)]"))
            }
        }
        if let field = object["selfExtension"] { policy.selfExtension = try SelfExtension.decode(field) }
        try policy.validate()
        policy.sortScheduleLists()
        policy.warnMinutes.sort(by: >)
        return policy
    }

    private static func weekdayKey(_ key: String, field: String) throws(PolicyError) -> Weekday {
        guard let day = Weekday(rawValue: key) else {
            throw PolicyError("\(field) keys must be mon, tue, wed, thu, fri, sat or sun, got \(quoted(key))")
        }
        return day
    }

    private static func appRule(_ value: JSONValue, path: String) throws(PolicyError) -> AppRule {
        let object = try value.object(path)
        let known = ["app", "rule", "dailyLimitMinutes"]
        for key in object.keys where !known.contains(key) {
            throw PolicyError("unknown field \(quoted(key)) in \(path) (known fields: \(known.joined(separator: ", ")))")
        }
        guard let appField = object["app"] else { throw PolicyError("\(path).app is missing") }
        guard let ruleField = object["rule"] else { throw PolicyError("\(path).rule is missing") }
        let app = try appField.string("\(path).app")
        let ruleName = try ruleField.string("\(path).rule")
        switch ruleName {
        case "limit":
            guard let minutes = object["dailyLimitMinutes"] else {
                throw PolicyError("\(path).dailyLimitMinutes is missing: a limit rule needs it")
            }
            return AppRule(app: app, rule: .limit(minutes: try minutes.int("\(path).dailyLimitMinutes")))
        case "block", "allow":
            if object["dailyLimitMinutes"] != nil {
                throw PolicyError("\(path).dailyLimitMinutes is only allowed with rule limit, got rule \(ruleName)")
            }
            return AppRule(app: app, rule: ruleName == "block" ? .block : .allow)
        default:
            throw PolicyError("\(path).rule must be block, limit or allow, got \(quoted(ruleName))")
        }
    }
}

extension JSONValue {
    func string(_ field: String) throws(PolicyError) -> String {
        guard case .string(let value) = self else {
            throw PolicyError("policy field \(quoted(field)) must be a string, got \(typeName)")
        }
        return value
    }

    func int(_ field: String) throws(PolicyError) -> Int {
        guard case .int(let value) = self else {
            throw PolicyError("policy field \(quoted(field)) must be a whole number, got \(typeName)")
        }
        // Compare the magnitude: `abs` of the most negative number traps, and a record file comes
        // from the shared directory before its signature is checked.
        guard value.magnitude < 1_000_000, let small = Int(exactly: value) else {
            throw PolicyError("policy field \(quoted(field)) is out of range, got \(value)")
        }
        return small
    }

    func object(_ field: String) throws(PolicyError) -> JSONObject {
        guard case .object(let value) = self else {
            throw PolicyError("policy field \(quoted(field)) must be an object, got \(typeName)")
        }
        return value
    }

    func allowance(_ field: String) throws(PolicyError) -> TimeAllowance {
        if self == .null { return .unlimited }
        guard case .int = self else {
            throw PolicyError("policy field \(quoted(field)) must be a number of minutes or null (unlimited), got \(typeName)")
        }
        return .minutes(try int(field))
    }

    func bedtime(_ field: String) throws(PolicyError) -> BedtimeWindow? {
        if self == .null { return nil }
        let object = try object(field)
        for key in object.keys where key != "start" && key != "end" {
            throw PolicyError("unknown field \(quoted(key)) in \(field) (known fields: start, end)")
        }
        guard let start = object["start"], let end = object["end"] else {
            throw PolicyError("policy field \(quoted(field)) needs both start and end")
        }
        return try BedtimeWindow(
            start: ClockTime.parse(try start.string("\(field).start"), rule: "bedtime start"),
            end: ClockTime.parse(try end.string("\(field).end"), rule: "bedtime end"))
    }
}
