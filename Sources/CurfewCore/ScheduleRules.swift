/// The schedule rules added to a policy after the first generation: downtime windows,
/// breaks, date exceptions and self-service extra time. Each is validated with a one-line error that
/// names the rule and the value, and written into the policy's JSON only when it is set.

extension Weekday {
    /// Weekdays as the command line and reports write them: `mon-fri`, `sat,sun`, `fri-mon` (wraps),
    /// `weekend`, `weekdays`, `all`, or single days (`mon`, `Monday`). Sorted, each once.
    public static func parseSet(_ text: String) throws(PolicyError) -> [Weekday] {
        var days = Set<Weekday>()
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        for part in parts {
            let item = String(part).trimmingSpaces.lowercased()
            switch item {
            case "weekend", "weekends": days.formUnion([.sat, .sun])
            case "weekdays", "weekday": days.formUnion([.mon, .tue, .wed, .thu, .fri])
            case "all", "daily", "every-day": days.formUnion(Weekday.allCases)
            default:
                let ends = item.split(separator: "-", omittingEmptySubsequences: false)
                guard ends.count == 2 else {
                    // One day: its own error names it.
                    days.insert(try Weekday.parse(String(part).trimmingSpaces))
                    continue
                }
                let first: Weekday
                do { first = try Weekday.parse(String(ends[0])) } catch { throw dayError(text) }
                let last: Weekday
                do { last = try Weekday.parse(String(ends[1])) } catch { throw dayError(text) }
                var index = first.index
                while true {
                    days.insert(Weekday.allCases[index])
                    if index == last.index { break }
                    index = (index + 1) % 7
                }
            }
        }
        return days.sorted()
    }

    private static func dayError(_ text: String) -> PolicyError {
        PolicyError("days must be weekdays like mon, mon-fri, sat,sun, weekend or weekdays, got \(quoted(text))")
    }

    /// `mon-fri`, `sat,sun`, `mon,wed,fri`, `every day`: the shortest form `parseSet` reads back.
    public static func describe(_ days: [Weekday]) -> String {
        let sorted = Set(days).sorted()
        if sorted.count == 7 { return "every day" }
        var runs: [[Weekday]] = []
        for day in sorted {
            if let last = runs.last?.last, last.index + 1 == day.index {
                runs[runs.count - 1].append(day)
            } else {
                runs.append([day])
            }
        }
        return runs.map { run in
            run.count >= 3 ? "\(run[0].rawValue)-\(run[run.count - 1].rawValue)" : run.map(\.rawValue).joined(separator: ",")
        }.joined(separator: ",")
    }
}

/// A named period on chosen weekdays when the computer may not be used, besides bedtime (school,
/// homework, dinner). Keyed by the day the window starts, like weekday bedtimes; `end < start`
/// crosses midnight.
public struct DowntimeWindow: Sendable, Hashable, CustomStringConvertible {
    public static let maxCount = 16

    public var name: String
    public var start: ClockTime
    public var end: ClockTime
    /// The days the window starts on, sorted.
    public var days: [Weekday]

    public init(name: String, start: ClockTime, end: ClockTime, days: [Weekday]) {
        self.name = name
        self.start = start
        self.end = end
        self.days = Set(days).sorted()
    }

    public var crossesMidnight: Bool { end < start }

    /// `school 08:00-15:00 mon-fri`.
    public var description: String { "\(name) \(start)-\(end) \(Weekday.describe(days))" }

    public func validate() throws(PolicyError) {
        try DowntimeWindow.validateName(name)
        guard start != end else {
            throw PolicyError("downtime window \(name): start and end must differ, got \(start)-\(end)")
        }
        guard !days.isEmpty else {
            throw PolicyError("downtime window \(name): needs at least one day, got none")
        }
    }

    /// 1 to 32 letters, digits, `-` and `_`.
    public static func validateName(_ name: String) throws(PolicyError) {
        let valid =
            !name.isEmpty && name.utf8.count <= 32
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                    true
                default: false
                }
            }
        guard valid else {
            throw PolicyError("downtime window name must be 1 to 32 letters, digits, '-' or '_', got \(quoted(name))")
        }
    }

    /// Parses `08:00-15:00` for the window `name`.
    public static func parse(name: String, window text: String, days: [Weekday]) throws(PolicyError) -> DowntimeWindow {
        try validateName(name)
        let parts = text.trimmingSpaces.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw PolicyError("downtime window \(name) must look like HH:MM-HH:MM, got \(quoted(text))")
        }
        let window = DowntimeWindow(
            name: name, start: try ClockTime.parse(String(parts[0]), rule: "downtime start"),
            end: try ClockTime.parse(String(parts[1]), rule: "downtime end"), days: days)
        try window.validate()
        return window
    }

    var json: JSONValue {
        .object(
            JSONObject([
                ("name", .string(name)), ("start", .string("\(start)")), ("end", .string("\(end)")),
                ("days", .array(days.map { .string($0.rawValue) })),
            ]))
    }

    static func decode(_ value: JSONValue, path: String) throws(PolicyError) -> DowntimeWindow {
        let object = try value.object(path)
        try object.onlyKnown(["name", "start", "end", "days"], path: path)
        let name = try object.required("name", path: path).string("\(path).name")
        let start = try ClockTime.parse(try object.required("start", path: path).string("\(path).start"), rule: "downtime start")
        let end = try ClockTime.parse(try object.required("end", path: path).string("\(path).end"), rule: "downtime end")
        guard case .array(let entries) = try object.required("days", path: path) else {
            throw PolicyError("policy field \"\(path).days\" must be a list of weekdays")
        }
        var days: [Weekday] = []
        for (index, entry) in entries.enumerated() {
            let key = try entry.string("\(path).days[\(index)]")
            guard let day = Weekday(rawValue: key) else {
                throw PolicyError("\(path).days must hold mon, tue, wed, thu, fri, sat or sun, got \(quoted(key))")
            }
            guard !days.contains(day) else { throw PolicyError("\(path).days must name each day once, got \(key) twice") }
            days.append(day)
        }
        return DowntimeWindow(name: name, start: start, end: end, days: days)
    }
}

/// Forced pauses: after `afterMinutes` of screen time without a pause of at least `lengthMinutes`,
/// use is blocked for `lengthMinutes`.
public struct Breaks: Sendable, Hashable, CustomStringConvertible {
    public static let afterRange = 15...240
    public static let lengthRange = 5...60

    public var afterMinutes: Int
    public var lengthMinutes: Int

    public init(afterMinutes: Int, lengthMinutes: Int) {
        self.afterMinutes = afterMinutes
        self.lengthMinutes = lengthMinutes
    }

    /// `10m after 45m`.
    public var description: String {
        "\(TimeAllowance.format(minutes: lengthMinutes)) after \(TimeAllowance.format(minutes: afterMinutes)) of screen time"
    }

    public func validate() throws(PolicyError) {
        guard Breaks.afterRange.contains(afterMinutes) else {
            throw PolicyError("break interval must be between 15 and 240 minutes, got \(afterMinutes)")
        }
        guard afterMinutes % 5 == 0 else {
            throw PolicyError("break interval must be a multiple of 5 minutes, got \(afterMinutes)")
        }
        guard Breaks.lengthRange.contains(lengthMinutes) else {
            throw PolicyError("break length must be between 5 and 60 minutes, got \(lengthMinutes)")
        }
        guard lengthMinutes % 5 == 0 else {
            throw PolicyError("break length must be a multiple of 5 minutes, got \(lengthMinutes)")
        }
    }

    var json: JSONValue {
        .object(JSONObject([("afterMinutes", .int(Int64(afterMinutes))), ("lengthMinutes", .int(Int64(lengthMinutes)))]))
    }

    static func decode(_ value: JSONValue) throws(PolicyError) -> Breaks? {
        if value == .null { return nil }
        let object = try value.object("breaks")
        try object.onlyKnown(["afterMinutes", "lengthMinutes"], path: "breaks")
        return Breaks(
            afterMinutes: try object.required("afterMinutes", path: "breaks").int("breaks.afterMinutes"),
            lengthMinutes: try object.required("lengthMinutes", path: "breaks").int("breaks.lengthMinutes"))
    }
}

/// Extra time a child may take without asking (`curfew extend`): `minutes` more today, at most
/// `perWeek` times a week.
public struct SelfExtension: Sendable, Hashable, CustomStringConvertible {
    public static let minutesRange = 5...120
    public static let perWeekRange = 1...21

    public var minutes: Int
    public var perWeek: Int

    public init(minutes: Int, perWeek: Int) {
        self.minutes = minutes
        self.perWeek = perWeek
    }

    /// `15m, 3 times a week`.
    public var description: String {
        "\(TimeAllowance.format(minutes: minutes)), \(perWeek == 1 ? "once" : "\(perWeek) times") a week"
    }

    public func validate() throws(PolicyError) {
        guard SelfExtension.minutesRange.contains(minutes) else {
            throw PolicyError("self-service extra time must be between 5 and 120 minutes, got \(minutes)")
        }
        guard minutes % 5 == 0 else {
            throw PolicyError("self-service extra time must be a multiple of 5 minutes, got \(minutes)")
        }
        guard SelfExtension.perWeekRange.contains(perWeek) else {
            throw PolicyError("self-service extra time uses per week must be between 1 and 21, got \(perWeek)")
        }
    }

    var json: JSONValue {
        .object(JSONObject([("minutes", .int(Int64(minutes))), ("perWeek", .int(Int64(perWeek)))]))
    }

    /// Whether one more use fits this week, given the uses already made since Monday.
    public func checkRoom(usedThisWeek: Int) throws(PolicyError) {
        guard usedThisWeek < perWeek else {
            throw PolicyError(
                "extra time without asking is used up this week (\(usedThisWeek) of \(perWeek)); ask a parent with curfew request")
        }
    }

    static func decode(_ value: JSONValue) throws(PolicyError) -> SelfExtension? {
        if value == .null { return nil }
        let object = try value.object("selfExtension")
        try object.onlyKnown(["minutes", "perWeek"], path: "selfExtension")
        return SelfExtension(
            minutes: try object.required("minutes", path: "selfExtension").int("selfExtension.minutes"),
            perWeek: try object.required("perWeek", path: "selfExtension").int("selfExtension.perWeek"))
    }
}

/// Days that keep other rules than usual (holidays, free-play days): from `from` to `to` inclusive,
/// local dates. A field left nil keeps the normal rule.
public struct PolicyException: Sendable, Hashable, CustomStringConvertible {
    public static let maxCount = 64
    public static let maxDays = 366

    public var from: LocalDate
    public var to: LocalDate
    /// The daily limit on these days; nil keeps the normal one.
    public var dailyLimit: TimeAllowance?
    /// The bedtime starting on these days; `.some(nil)` means none; nil keeps the normal one.
    public var bedtime: BedtimeWindow??
    /// Downtime windows do not apply on these days.
    public var liftsDowntime: Bool

    public init(
        from: LocalDate, to: LocalDate, dailyLimit: TimeAllowance? = nil, bedtime: BedtimeWindow?? = nil,
        liftsDowntime: Bool = false
    ) {
        self.from = from
        self.to = to
        self.dailyLimit = dailyLimit
        self.bedtime = bedtime
        self.liftsDowntime = liftsDowntime
    }

    public func contains(_ date: LocalDate) -> Bool { from <= date && date <= to }

    /// `2026-12-24` or `2026-12-21..2027-01-03`.
    public var range: String { from == to ? "\(from)" : "\(from)..\(to)" }

    /// `2026-12-21..2027-01-03: limit 3h, bedtime 22:00-08:00, no downtime`.
    public var description: String {
        var parts: [String] = []
        if let dailyLimit { parts.append("limit \(dailyLimit.text)") }
        if let bedtime { parts.append("bedtime \(bedtime.map { "\($0)" } ?? "off")") }
        if liftsDowntime { parts.append("no downtime") }
        return "\(range): \(parts.isEmpty ? "usual rules" : parts.joined(separator: ", "))"
    }

    /// Parses `2026-12-24` or `2026-12-21..2027-01-03`.
    public static func parseRange(_ text: String) throws(PolicyError) -> (LocalDate, LocalDate) {
        let trimmed = text.trimmingSpaces
        let parts = trimmed.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count == 1 {
            let date = try LocalDate.parse(trimmed)
            return (date, date)
        }
        guard parts.count == 3, parts[1].isEmpty else {
            throw PolicyError("exception dates must look like YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD, got \(quoted(text))")
        }
        return (try LocalDate.parse(String(parts[0])), try LocalDate.parse(String(parts[2])))
    }

    public func validate() throws(PolicyError) {
        guard from <= to else {
            throw PolicyError("exception range must not end before it starts, got \(from)..\(to)")
        }
        let days = to.daysSinceEpoch - from.daysSinceEpoch + 1
        guard days <= PolicyException.maxDays else {
            throw PolicyError("exception range may span at most \(PolicyException.maxDays) days, got \(range) (\(days) days)")
        }
        if let dailyLimit { try Policy.validateDaily(dailyLimit, rule: "daily limit of the exception \(range)") }
    }

    var json: JSONValue {
        var object = JSONObject([("from", .string("\(from)")), ("to", .string("\(to)"))])
        if let dailyLimit { object["dailyLimitMinutes"] = dailyLimit.minutes.map { .int(Int64($0)) } ?? .null }
        if let bedtime {
            object["bedtime"] =
                bedtime.map { .object(JSONObject([("start", .string("\($0.start)")), ("end", .string("\($0.end)"))])) } ?? .null
        }
        if liftsDowntime { object["downtime"] = .bool(false) }
        return .object(object)
    }

    static func decode(_ value: JSONValue, path: String) throws(PolicyError) -> PolicyException {
        let object = try value.object(path)
        try object.onlyKnown(["from", "to", "dailyLimitMinutes", "bedtime", "downtime"], path: path)
        var exception = PolicyException(
            from: try LocalDate.parse(try object.required("from", path: path).string("\(path).from")),
            to: try LocalDate.parse(try object.required("to", path: path).string("\(path).to")))
        if let field = object["dailyLimitMinutes"] { exception.dailyLimit = try field.allowance("\(path).dailyLimitMinutes") }
        if let field = object["bedtime"] { exception.bedtime = .some(try field.bedtime("\(path).bedtime")) }
        if let field = object["downtime"] {
            guard field == .bool(false) else {
                throw PolicyError("\(path).downtime must be false (no downtime those days) or left out, got \(field.canonicalString)")
            }
            exception.liftsDowntime = true
        }
        return exception
    }
}

extension LocalDate {
    /// The Monday that starts this date's week.
    public var weekStart: LocalDate { adding(days: -weekday.index) }
}

extension Policy {
    public static let maxWeeklyMinutes = 3360

    public static func validateWeekly(_ minutes: Int?) throws(PolicyError) {
        guard let minutes else { return }
        guard (0...maxWeeklyMinutes).contains(minutes) else {
            throw PolicyError("weekly limit must be between 0 and \(maxWeeklyMinutes) minutes, got \(minutes)")
        }
        guard minutes % minuteStep == 0 else {
            throw PolicyError("weekly limit must be a multiple of \(minuteStep) minutes, got \(minutes)")
        }
    }

    public static func validateDowntime(_ windows: [DowntimeWindow]) throws(PolicyError) {
        guard windows.count <= DowntimeWindow.maxCount else {
            throw PolicyError("downtime may hold at most \(DowntimeWindow.maxCount) windows, got \(windows.count)")
        }
        var names = Set<String>()
        for window in windows {
            try window.validate()
            guard names.insert(window.name).inserted else {
                throw PolicyError("downtime windows must have different names, got \(quoted(window.name)) twice")
            }
        }
    }

    public static func validateExceptions(_ exceptions: [PolicyException]) throws(PolicyError) {
        guard exceptions.count <= PolicyException.maxCount else {
            throw PolicyError("exceptions may hold at most \(PolicyException.maxCount) date ranges, got \(exceptions.count)")
        }
        for exception in exceptions { try exception.validate() }
        let sorted = exceptions.sorted { $0.from < $1.from }
        for (earlier, later) in zip(sorted, sorted.dropFirst()) where later.from <= earlier.to {
            throw PolicyError("exceptions must not overlap, got \(earlier.range) and \(later.range)")
        }
    }

    /// Lists kept in one order whatever order they were edited in, so equal rules are equal policies
    /// and merged records read the same everywhere: windows by name, exceptions by date.
    public mutating func sortScheduleLists() {
        downtime.sort { $0.name < $1.name }
        exceptions.sort { $0.from < $1.from }
    }

    /// The exception that covers `date`, if any.
    public func exception(on date: LocalDate) -> PolicyException? {
        exceptions.first { $0.contains(date) }
    }
}

extension JSONObject {
    func onlyKnown(_ known: [String], path: String) throws(PolicyError) {
        for key in keys where !known.contains(key) {
            throw PolicyError("unknown field \(quoted(key)) in \(path) (known fields: \(known.joined(separator: ", ")))")
        }
    }

    func required(_ key: String, path: String) throws(PolicyError) -> JSONValue {
        guard let value = self[key] else { throw PolicyError("\(path).\(key) is missing") }
        return value
    }
}

/// Screen time since the last pause long enough to count as a break, kept as time passes: what
/// `ScheduleUsage.continuousSeconds` and `pauseSeconds` are made of. The tracker advances it by the
/// elapsed monotonic time of each tick, saying whether screen time counted in it.
public struct BreakClock: Sendable, Equatable {
    public private(set) var continuousMilliseconds: Int64 = 0
    public private(set) var pauseMilliseconds: Int64 = 0

    public init() {}

    /// `milliseconds` passed; screen time counted in them or not. A pause of at least `breakLength`
    /// (seconds; nil without breaks) ends the stretch.
    public mutating func advance(by milliseconds: Int64, counting: Bool, breakLength: Int64?) {
        guard milliseconds > 0 else { return }
        if counting {
            if let breakLength, pauseMilliseconds >= breakLength * 1000 { continuousMilliseconds = 0 }
            continuousMilliseconds += milliseconds
            pauseMilliseconds = 0
        } else {
            pauseMilliseconds += milliseconds
            if let breakLength, pauseMilliseconds >= breakLength * 1000 { continuousMilliseconds = 0 }
        }
    }

    /// A parent ended the break (a grant that `endsBreak`): the stretch starts again from nothing, as
    /// after a pause of the break's length.
    public mutating func endBreak() {
        continuousMilliseconds = 0
        pauseMilliseconds = 0
    }

    public var continuousSeconds: Int64 { continuousMilliseconds / 1000 }
    public var pauseSeconds: Int64 { pauseMilliseconds / 1000 }

    /// The clock as the agent keeps it across a restart or a reboot (a child must not end a stretch by
    /// restarting the computer): `<continuous ms> <pause ms> <wall ms when written>`, written at `now`.
    public func persisted(at now: Instant) -> String {
        "\(continuousMilliseconds) \(pauseMilliseconds) \(now.milliseconds)"
    }

    /// The clock `persisted` wrote, with the time since then (nothing counted: the agent was not
    /// there to count) as a pause, which ends the stretch when it is a break's length. Nil for text
    /// that is not three non-negative numbers; a wall clock that went back counts no pause.
    public static func restored(_ text: String, now: Instant, breakLength: Int64?) -> BreakClock? {
        let fields = text.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 3, let continuous = Int64(fields[0]), let pause = Int64(fields[1]), let written = Int64(fields[2]),
            continuous >= 0, pause >= 0, written >= 0
        else { return nil }
        var clock = BreakClock()
        clock.continuousMilliseconds = continuous
        clock.pauseMilliseconds = pause
        if let breakLength, pause >= breakLength * 1000 { clock.continuousMilliseconds = 0 }
        clock.advance(by: max(0, (now - Instant(milliseconds: written)).wholeMilliseconds), counting: false, breakLength: breakLength)
        return clock
    }
}
