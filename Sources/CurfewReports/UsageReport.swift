import CurfewCore

import Foundation

/// A user's usage over a range of local days: every figure `curfew report` prints, computed once here
/// and only rendered by the table, JSON, CSV and HTML forms, so they cannot disagree.
///
/// `make` is the one place that gathers the figures; it takes usage rows (this computer's today,
/// other computers' summaries folded in later) and the user's events.
public struct UsageReport: Sendable {
    public enum Grouping: String, Sendable, CaseIterable { case app, day, hour }

    public struct AppTime: Sendable, Equatable, Encodable {
        public var app: String
        public var seconds: Int64
    }

    public struct Day: Sendable {
        public var date: LocalDate
        public var screenSeconds: Int64
        /// The daily limit of that day: the policy in force that day (else the one in force now), plus
        /// that day's extra time; nil: unlimited.
        public var limitMinutes: Int?
        /// Extra time granted that day (part of `limitMinutes`).
        public var extraMinutes: Int = 0
        /// Most used first (then by name).
        public var apps: [AppTime]
        /// Screen time in each local hour 0...23.
        public var hourSeconds: [Int64]

        public var isOverLimit: Bool { limitMinutes.map { screenSeconds > Int64($0) * 60 } ?? false }
    }

    /// One of the user's events on the report's timeline.
    public struct TimelineEvent: Sendable {
        public enum Category: String, Sendable, CaseIterable {
            case warning, lockout, app = "app-stopped", login = "login-refused", grant, policy, other

            public var title: String {
                switch self {
                case .warning: "warnings"
                case .lockout: "lockouts"
                case .app: "apps stopped"
                case .login: "logins refused"
                case .grant: "extra time"
                case .policy: "policy changes"
                case .other: "other"
                }
            }

            public init(kind: EventKind) {
                switch kind {
                case .warning: self = .warning
                case .lockout, .sessionEnded, .sessionLocked, .userKilled, .failClosed: self = .lockout
                case .appStopped: self = .app
                case .loginRefused: self = .login
                case .extraTimeGranted, .timeRequested: self = .grant
                case .policyLoaded, .policyKept, .policyIgnored, .recordMissing, .userUnmanaged, .failOpen: self = .policy
                default: self = .other
                }
            }
        }

        /// When it happened, to the whole second (the start of its second).
        public var time: Instant
        public var kind: String
        public var message: String
        public var category: Category
    }

    /// One computer's share of a report over every family computer (`--all-computers`).
    public struct Computer: Sendable, Equatable {
        /// nil: this computer.
        public var machine: String?
        public var host: String
        public var screenSeconds: Int64
        /// When its newest usage summary in the period was written; nil for this computer.
        public var lastWritten: Instant?

        public init(machine: String?, host: String, screenSeconds: Int64, lastWritten: Instant?) {
            self.machine = machine
            self.host = host
            self.screenSeconds = screenSeconds
            self.lastWritten = lastWritten
        }

        public var label: String { machine == nil ? "\(host) (this computer)" : host }
    }

    /// The computers whose usage the report adds up; nil when it covers this computer only.
    public var computers: [Computer]? = nil

    public let user: String
    public let timezone: String
    public let from: LocalDate
    public let to: LocalDate
    public let days: [Day]
    /// Totals over the period, most used first.
    public let apps: [AppTime]
    /// Screen time per local hour of day over the whole period.
    public let hourSeconds: [Int64]
    public let screenSeconds: Int64
    public let events: [TimelineEvent]
    /// The local time (ISO 8601) of each event, as every form prints it.
    public let eventTimes: [String]
    let zone: ZoneRules

    public var daysOverLimit: Int { days.filter(\.isOverLimit).count }

    /// Events per category, in `Category.allCases` order, without empty ones.
    public var eventCounts: [(TimelineEvent.Category, Int)] {
        var counts: [TimelineEvent.Category: Int] = [:]
        for event in events { counts[event.category, default: 0] += 1 }
        return TimelineEvent.Category.allCases.compactMap { category in counts[category].map { (category, $0) } }
    }

    /// Milliseconds are summed per bucket first and rounded to seconds once (as `curfew status` does).
    ///
    /// - Parameters:
    ///   - policy: the policy in force now, for days `policies` has none for.
    ///   - policies: the policy in force on each day (`PolicyHistory`).
    ///   - adjustments: each day's extra time (grants and the child's own extensions).
    ///   - grants: the user's grants; those no event of the agent mentions are added to the timeline.
    public static func make(
        user: String, policy: Policy, zone: ZoneRules, from: LocalDate, to: LocalDate, rows: [UsageRow],
        events: [AgentEvent], policies: [LocalDate: Policy] = [:], adjustments: [LocalDate: DayAdjustment] = [:],
        grants: [GrantSummary] = []
    ) -> UsageReport {
        let first = from.daysSinceEpoch
        let count = to.daysSinceEpoch - first + 1
        var screen = [Int64](repeating: 0, count: count)
        var hours = [[Int64]](repeating: [Int64](repeating: 0, count: 24), count: count)
        var appsByDay = [[String: Int64]](repeating: [:], count: count)
        var appTotals: [String: Int64] = [:]
        var hourTotals = [Int64](repeating: 0, count: 24)
        var screenTotal: Int64 = 0
        for row in rows {
            let index = row.day.daysSinceEpoch - first
            guard index >= 0 && index < count && (0..<24).contains(row.hour) else { continue }
            if row.app == UsageKey.screen {
                screen[index] += row.milliseconds
                hours[index][row.hour] += row.milliseconds
                hourTotals[row.hour] += row.milliseconds
                screenTotal += row.milliseconds
            } else {
                appsByDay[index][row.app, default: 0] += row.milliseconds
                appTotals[row.app, default: 0] += row.milliseconds
            }
        }
        let now = Schedule(policy: policy, zone: zone, adjustments: adjustments)
        let days = (0..<count).map { index in
            let date = LocalDate(daysSinceEpoch: first + index)
            let schedule = policies[date].map { Schedule(policy: $0, zone: zone, adjustments: adjustments) } ?? now
            let limit = schedule.limitMinutes(on: date)
            return Day(
                date: date, screenSeconds: UserStatus.seconds(screen[index]), limitMinutes: limit,
                extraMinutes: limit == nil ? 0 : adjustments[date]?.extraMinutes ?? 0,
                apps: ranked(appsByDay[index]), hourSeconds: hours[index].map(UserStatus.seconds))
        }
        var timeline = events.map { event in
            TimelineEvent(
                time: Instant(seconds: event.time.seconds), kind: event.kind.rawValue, message: describe(event),
                category: TimelineEvent.Category(kind: event.kind))
        }
        // A grant the agent never announced (it was off, or the user is no longer managed) is still
        // extra time that day.
        var announced = Set<String>()
        for event in events where event.kind == .extraTimeGranted {
            if case .object(let data)? = event.data, case .string(let record)? = data["record"] { announced.insert(record) }
        }
        let start = zone.start(of: from)
        let end = zone.start(of: to.adding(days: 1))
        for grant in grants where grant.user == user && !announced.contains(grant.id) && grant.date >= from && grant.date <= to {
            timeline.append(
                TimelineEvent(
                    time: min(max(Instant(seconds: grant.time), start), end - .seconds(1)), kind: EventKind.extraTimeGranted.rawValue,
                    message: grant.words + (grant.requestId.map { " (request \($0))" } ?? ""), category: .grant))
        }
        timeline.sort { ($0.time, $0.kind, $0.message) < ($1.time, $1.kind, $1.message) }
        return UsageReport(
            user: user, timezone: zone.identifier, from: from, to: to, days: days, apps: ranked(appTotals),
            hourSeconds: hourTotals.map(UserStatus.seconds), screenSeconds: UserStatus.seconds(screenTotal), events: timeline,
            eventTimes: timeline.map { zone.iso8601($0.time) }, zone: zone)
    }

    /// An event's words; a request's with the child's reason (every form escapes it as it prints it).
    static func describe(_ event: AgentEvent) -> String {
        guard event.kind == .timeRequested || event.kind == .selfExtension, case .object(let data)? = event.data,
            case .string(let reason)? = data["reason"], !reason.isEmpty
        else { return event.message }
        return "\(event.message), reason: \(reason)"
    }

    static func ranked(_ totals: [String: Int64]) -> [AppTime] {
        totals.map { AppTime(app: $0.key, seconds: UserStatus.seconds($0.value)) }
            .sorted { ($0.seconds, $1.app) > ($1.seconds, $0.app) }
    }

    /// Where the report's first day starts and its last day ends, in its zone.
    public var startInstant: Instant { zone.start(of: from) }
    public var endInstant: Instant { zone.start(of: to.adding(days: 1)) }

    /// `1h5m`, `45m`, `30s`, `0`: seconds for people.
    public static func duration(_ seconds: Int64) -> String {
        if seconds <= 0 { return "0" }
        if seconds < 60 { return "\(seconds)s" }
        return TimeAllowance.format(minutes: Int(seconds / 60))
    }

    // MARK: JSON

    /// `curfew report --format json`.
    public var json: JSONValue {
        let hours = { (list: [Int64]) in list.enumerated().map { ReportJSON.Hour(hour: $0.offset, screenSeconds: $0.element) } }
        return JSONValueEncoder().value(
            of: ReportJSON(
                user: user, timezone: timezone, from: "\(from)", to: "\(to)", screenSeconds: screenSeconds, daysOverLimit: daysOverLimit,
                days: days.map { day in
                    ReportJSON.Day(
                        date: "\(day.date)", screenSeconds: day.screenSeconds, limitMinutes: day.limitMinutes, extraMinutes: day.extraMinutes,
                        overLimit: day.isOverLimit, apps: day.apps, hours: hours(day.hourSeconds))
                },
                apps: apps, hours: hours(hourSeconds), eventCounts: NamedValues(eventCounts.map { ($0.0.rawValue, $0.1) }),
                events: events.enumerated().map { index, event in
                    ReportJSON.Event(time: eventTimes[index], kind: event.kind, category: event.category.rawValue, message: event.message)
                },
                computers: computers?.map { computer in
                    ReportJSON.Computer(
                        machine: computer.machine, host: computer.host, screenSeconds: computer.screenSeconds,
                        lastWritten: computer.lastWritten.map { zone.iso8601($0) })
                }))
    }

    /// "kids-pc (this computer) 1h, den-pc 30m": the computers a report adds up, for people (host
    /// names as written in summaries in the shared directory: escape for the output form).
    public var computersLine: String? {
        computers.map { list in
            "computers: " + list.map { "\($0.label) \(UsageReport.duration($0.screenSeconds))" }.joined(separator: ", ")
        }
    }

    // MARK: CSV

    /// RFC 4180 with `\n` line ends; a header line, then one line per day, per day and app, or per day and hour.
    public func csv(by grouping: Grouping) -> String {
        var lines: [String]
        switch grouping {
        case .day:
            lines = ["date,screen_seconds,limit_minutes"]
            for day in days { lines.append("\(day.date),\(day.screenSeconds),\(day.limitMinutes.map(String.init) ?? "")") }
        case .app:
            lines = ["date,app,seconds"]
            for day in days {
                for app in day.apps { lines.append("\(day.date),\(UntrustedText.csvCell(app.app)),\(app.seconds)") }
            }
        case .hour:
            lines = ["date,hour,screen_seconds"]
            for day in days {
                for (hour, seconds) in day.hourSeconds.enumerated() { lines.append("\(day.date),\(hour),\(seconds)") }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }


    // MARK: Table

    /// ANSI colours for a terminal; `none` for pipes and files.
    public struct Palette: Sendable {
        public var within: String
        public var near: String
        public var over: String
        public var dim: String
        public var bold: String
        public var reset: String

        public static let none = Palette(within: "", near: "", over: "", dim: "", bold: "", reset: "")
        public static let ansi = Palette(
            within: "\u{1B}[32m", near: "\u{1B}[33m", over: "\u{1B}[31m", dim: "\u{1B}[2m", bold: "\u{1B}[1m", reset: "\u{1B}[0m")
    }

    public func lines(by grouping: Grouping, palette: Palette = .none) -> [String] {
        var lines = ["\(palette.bold)\(user): \(from == to ? "\(from)" : "\(from) to \(to)") (\(timezone))\(palette.reset)"]
        if let computersLine { lines.append("  \(UntrustedText.terminal(computersLine))") }
        switch grouping {
        case .day:
            var rows: [[String]] = [["DATE", "DAY", "SCREEN", "LIMIT", ""]]
            var colours: [String] = [""]
            for day in days {
                rows.append([
                    "\(day.date)", day.date.weekday.rawValue, UsageReport.duration(day.screenSeconds),
                    day.limitMinutes.map { TimeAllowance.format(minutes: $0) } ?? "none",
                    UsageReport.bar(used: day.screenSeconds, limit: day.limitMinutes),
                ])
                colours.append(UsageReport.colour(used: day.screenSeconds, limit: day.limitMinutes, palette))
            }
            lines += UsageReport.columns(rows, lastColumnColours: colours, palette: palette)
            // Extra time asked for and granted, with the child's reasons (escaped for the terminal).
            let extra = events.enumerated().filter { $0.element.category == .grant }
            if !extra.isEmpty {
                lines.append("  extra time:")
                for (index, event) in extra {
                    lines.append("    \(eventTimes[index].prefix(16).replacingOccurrences(of: "T", with: " "))  \(UntrustedText.terminal(event.message))")
                }
            }
            if days.count > 1 {
                let over = daysOverLimit
                lines.append(
                    "  total \(UsageReport.duration(screenSeconds)) in \(days.count) days, "
                        + "\(palette.bold)\(over == 0 ? "no day" : over == 1 ? "1 day" : "\(over) days") over the limit\(palette.reset)")
            }
        case .app:
            if apps.isEmpty { lines.append("  no apps used") }
            let top = apps.first?.seconds ?? 0
            lines += UsageReport.columns(
                [["APP", "TIME", ""]]
                    + apps.map { [UntrustedText.terminal($0.app), UsageReport.duration($0.seconds), UsageReport.share($0.seconds, of: top)] },
                lastColumnColours: [""] + apps.map { _ in palette.within }, palette: palette)
        case .hour:
            let top = hourSeconds.max() ?? 0
            var rows: [[String]] = [["HOUR", "SCREEN", ""]]
            for (hour, seconds) in hourSeconds.enumerated() {
                rows.append([(hour < 10 ? "0" : "") + "\(hour):00", UsageReport.duration(seconds), UsageReport.share(seconds, of: top)])
            }
            lines += UsageReport.columns(rows, lastColumnColours: [String](repeating: palette.within, count: rows.count), palette: palette)
        }
        return lines
    }

    /// Left-aligned columns padded to the widest cell (the last column's colour wraps only its text,
    /// so colour never moves a column).
    static func columns(_ rows: [[String]], lastColumnColours: [String], palette: Palette) -> [String] {
        guard let count = rows.map(\.count).max() else { return [] }
        var widths = [Int](repeating: 0, count: count)
        for row in rows { for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) } }
        return rows.enumerated().map { number, row in
            var line = "  "
            for (index, cell) in row.enumerated() {
                if index == row.count - 1 {
                    let colour = number < lastColumnColours.count ? lastColumnColours[number] : ""
                    line += colour.isEmpty || cell.isEmpty ? cell : colour + cell + palette.reset
                } else {
                    let text = number == 0 && !palette.bold.isEmpty ? palette.bold + cell + palette.reset : cell
                    line += text + String(repeating: " ", count: widths[index] - cell.count + 2)
                }
            }
            return line
        }
    }

    static func colour(used: Int64, limit: Int?, _ palette: Palette) -> String {
        guard let limit else { return palette.within }
        let allowed = Int64(limit) * 60
        if used > allowed { return palette.over }
        return used * 10 >= allowed * 9 ? palette.near : palette.within
    }

    /// 20 cells for the limit; over the limit shows `!`.
    static func bar(used: Int64, limit: Int?) -> String {
        guard let limit, limit > 0 else { return used > 0 ? String(repeating: "#", count: min(20, Int(used / 1800) + 1)) : "" }
        let cells = min(20, Int((used * 20 + Int64(limit) * 60 - 1) / (Int64(limit) * 60)))
        return String(repeating: "#", count: cells) + String(repeating: ".", count: 20 - cells) + (used > Int64(limit) * 60 ? " !" : "")
    }

    /// Up to 20 cells, relative to the largest value.
    static func share(_ value: Int64, of top: Int64) -> String {
        guard top > 0, value > 0 else { return "" }
        return String(repeating: "#", count: max(1, Int((value * 20 + top / 2) / top)))
    }
}

/// The report as `--format json` prints it: the fields in this order, `computers` only when the
/// report adds up other computers' usage.
private struct ReportJSON: Encodable {
    struct Hour: Encodable {
        var hour: Int
        var screenSeconds: Int64
    }

    struct Day: Encodable {
        var date: String
        var screenSeconds: Int64
        @OrNull var limitMinutes: Int?
        var extraMinutes: Int
        var overLimit: Bool
        var apps: [UsageReport.AppTime]
        var hours: [Hour]
    }

    struct Event: Encodable {
        var time: String
        var kind: String
        var category: String
        var message: String
    }

    struct Computer: Encodable {
        @OrNull var machine: String?
        var host: String
        var screenSeconds: Int64
        @OrNull var lastWritten: String?
    }

    var user: String
    var timezone: String
    var from: String
    var to: String
    var screenSeconds: Int64
    var daysOverLimit: Int
    var days: [Day]
    var apps: [UsageReport.AppTime]
    var hours: [Hour]
    var eventCounts: NamedValues<Int>
    var events: [Event]
    var computers: [Computer]?
}
