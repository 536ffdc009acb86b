import ArgumentParser
import CurfewAgent
import CurfewCore
import CurfewLinux
import CurfewStore
import CurfewSync
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `1h5m`, `45m`, `30s`, `0`: a number of seconds for people.
func formatSeconds(_ seconds: Int64) -> String {
    if seconds <= 0 { return "0" }
    if seconds < 60 { return "\(seconds)s" }
    return TimeAllowance.format(minutes: Int(seconds / 60))
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show today's screen time, time left and running apps (a child sees their own).")

    @OptionGroup var location: LocationOptions
    @Argument(help: "The user (default: you).") var user: String?
    @Option(help: ArgumentHelp("The agent's socket (default: $CURFEW_SOCKET, else /run/curfew/curfewd.sock).", valueName: "path"))
    var socket: String?
    @Flag(name: .long, help: "Print the result as JSON.") var json = false

    func run() throws {
        let me = Accounts.account(uid: getuid())
        guard let target = user ?? me?.name else { throw CLIError("name a user: your account has no name", .invalidArguments) }
        try translatingErrors { try Policy.validateUserName(target) }
        if getuid() != 0 && target != me?.name {
            throw CLIError("you may only see your own status, not \(target)'s", .notPermitted)
        }
        let socketPath = Locations.socket(socket, environment: ProcessInfo.processInfo.environment)
        let request = JSONValue.object(JSONObject([("command", .string("status")), ("user", .string(target))]))
        let status: JSONValue
        var live = true
        if let answer = try? PeerSocketClient.request(path: socketPath, line: request.canonicalString),
            case .object(let object)? = try? JSONValue.parse(answer)
        {
            guard object["ok"] == .bool(true), let value = object["status"] else {
                let message: String = { if case .string(let text)? = object["message"] { return text } else { return "the agent refused" } }()
                switch object["error"] {
                case .string("not-permitted")?: throw CLIError(message, .notPermitted)
                case .string("unknown-user")?: throw CLIError(message, .invalidArguments)
                default: throw CLIError(message, .failure)
                }
            }
            status = value
        } else {
            // No agent: a parent can still read the saved figures.
            live = false
            let workspace = Workspace(location)
            guard Files.isDirectory(workspace.stateDirectory), access(workspace.stateDirectory, R_OK | X_OK) == 0 else {
                throw CLIError("the agent is not running (cannot reach \(socketPath))", .unavailable)
            }
            let (policy, _) = try workspace.currentPolicy(of: target)
            let now = Workspace.now()
            let (schedule, totals, others) = try workspace.savedDay(of: target, policy: policy, now: now)
            status = UserStatus.make(
                user: target, policy: policy, zone: schedule.zone, now: now, totals: totals, running: [], counting: nil,
                adjustments: schedule.adjustments, otherComputers: others
            ).json
            workspace.finish()
        }
        if json {
            Output.line(status.prettyString)
        } else {
            Status.describe(status, live: live).forEach { Output.line($0) }
        }
    }

    static func describe(_ status: JSONValue, live: Bool) -> [String] {
        guard case .object(let object) = status else { return [] }
        func string(_ key: String) -> String? { if case .string(let value)? = object[key] { return value } else { return nil } }
        func int(_ key: String) -> Int64? { if case .int(let value)? = object[key] { return value } else { return nil } }
        var lines = ["\(string("user") ?? "?") on \(string("date") ?? "?") (\(string("timezone") ?? "?"))"]
        var rows: [[String]] = []
        let used = formatSeconds(int("screenSeconds") ?? 0)
        let extra = int("extraMinutes") ?? 0
        if let limit = int("limitMinutes") {
            let granted = extra > 0 ? " (\(TimeAllowance.format(minutes: Int(extra))) extra granted)" : ""
            rows.append(["screen time", "\(used) of \(TimeAllowance.format(minutes: Int(limit)))\(granted)"])
        } else {
            rows.append(["screen time", "\(used) (no daily limit)"])
        }
        if let others = int("otherComputersSeconds") {
            rows.append(["", "\(formatSeconds(others)) more on the family's other computers (the limit counts them)"])
        }
        if let remaining = int("remainingSeconds") {
            rows.append(["time left", formatSeconds(remaining)])
        }
        if let delay = int("bedtimeDelayMinutes"), delay > 0 {
            rows.append(["bedtime", "\(TimeAllowance.format(minutes: Int(delay))) later tonight (granted)"])
        }
        var state = string("state") ?? "?"
        if let reason = string("reason") { state += ": \(reason)" }
        rows.append(["state", state])
        if case .object(let change)? = object["nextChange"], case .string(let at)? = change["at"],
            case .string(let next)? = change["state"]
        {
            rows.append(["next change", "\(next) at \(at)"])
        }
        if string("state") != "allowed", let again = string("allowedAgainAt") {
            rows.append(["allowed again", again])
        }
        if case .array(let apps)? = object["apps"], !apps.isEmpty {
            for (index, app) in apps.enumerated() {
                guard case .object(let entry) = app, case .string(let name)? = entry["app"],
                    case .int(let seconds)? = entry["seconds"]
                else { continue }
                let running = entry["running"] == .bool(true) ? "  running" : ""
                rows.append([index == 0 ? "apps" : "", "\(name) \(formatSeconds(seconds))\(running)"])
            }
        }
        lines += table(rows)
        if !live { lines.append("(the agent is not running: figures as last saved)") }
        return lines
    }
}

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Screen time against the limit, per day, app or hour, as a table, JSON or CSV.",
        discussion: """
            Periods: --day DATE (default today), --week (the 7 days ending today), --month (the 30 days \
            ending today), or --from DATE --to DATE. The limit shown is the policy in force now.
            JSON: {"user", "timezone", "from", "to", "days": [{"date", "screenSeconds", "limitMinutes", \
            "apps": [{"app", "seconds"}], "hours": [{"hour", "screenSeconds"}]}], "apps": [{"app", "seconds"}]}. \
            CSV by day: date,screen_seconds,limit_minutes; by app: date,app,seconds; by hour: date,hour,screen_seconds.
            """)

    enum Grouping: String, ExpressibleByArgument, CaseIterable { case app, day, hour }
    enum Format: String, ExpressibleByArgument, CaseIterable { case table, json, csv }

    @OptionGroup var location: LocationOptions
    @Argument(help: "The user (default: the only managed user).") var user: String?
    @Option(help: ArgumentHelp("One day, YYYY-MM-DD.", valueName: "date")) var day: String?
    @Flag(help: "The 7 days ending today.") var week = false
    @Flag(help: "The 30 days ending today.") var month = false
    @Option(help: ArgumentHelp("First day, YYYY-MM-DD.", valueName: "date")) var from: String?
    @Option(help: ArgumentHelp("Last day, YYYY-MM-DD.", valueName: "date")) var to: String?
    @Option(help: "Group by app, day or hour.") var by: Grouping = .day
    @Option(help: "table, json or csv.") var format: Format = .table

    func run() throws {
        let periods = [day != nil, week, month, from != nil || to != nil].filter { $0 }.count
        guard periods <= 1 else { throw CLIError("give one period: --day, --week, --month or --from/--to", .invalidArguments) }
        let parsedDay = try day.map { text in try translatingErrors { try LocalDate.parse(text) } }
        let parsedFrom = try from.map { text in try translatingErrors { try LocalDate.parse(text) } }
        let parsedTo = try to.map { text in try translatingErrors { try LocalDate.parse(text) } }
        if (parsedFrom == nil) != (parsedTo == nil) { throw CLIError("--from and --to go together", .invalidArguments) }
        if let parsedFrom, let parsedTo, parsedTo < parsedFrom {
            throw CLIError("--to must not be before --from, got \(parsedFrom) to \(parsedTo)", .invalidArguments)
        }
        let workspace = Workspace(location)
        let target = try resolveUser(workspace)
        let (policy, _) = try workspace.currentPolicy(of: target)
        let zone = Schedule.zone(for: policy)
        let today = zone.localTime(at: Workspace.now()).date
        let (first, last): (LocalDate, LocalDate) =
            if let parsedDay { (parsedDay, parsedDay) } else if week { (today.adding(days: -6), today) } else if month {
                (today.adding(days: -29), today)
            } else if let parsedFrom, let parsedTo { (parsedFrom, parsedTo) } else { (today, today) }
        guard last.daysSinceEpoch - first.daysSinceEpoch < 3660 else {
            throw CLIError("a report covers at most 10 years, got \(first) to \(last)", .invalidArguments)
        }
        let rows = try workspace.openStore().read { try UsageTable.rows(user: target, from: first, through: last, $0) }
        workspace.finish()
        let report = UsageReport(user: target, policy: policy, zone: zone, from: first, to: last, rows: rows)
        switch format {
        case .json: Output.line(report.json.prettyString)
        case .csv: print(report.csv(by: by), terminator: "")
        case .table: report.lines(by: by).forEach { Output.line($0) }
        }
    }

    func resolveUser(_ workspace: Workspace) throws -> String {
        if let user { return user }
        let managed = try workspace.scan().currentByUser.keys.sorted()
        if let me = Accounts.account(uid: getuid())?.name, managed.contains(me) { return me }
        guard managed.count == 1 else {
            throw CLIError(
                managed.isEmpty ? "no managed users" : "name a user: \(managed.joined(separator: ", "))", .invalidArguments)
        }
        return managed[0]
    }
}

/// A user's usage over a range of local days, in the forms `curfew report` prints.
struct UsageReport {
    let user: String
    let policy: Policy
    let zone: ZoneRules
    let from: LocalDate
    let to: LocalDate
    let rows: [UsageTable.Row]

    var days: [LocalDate] { (0...(to.daysSinceEpoch - from.daysSinceEpoch)).map { from.adding(days: $0) } }

    func milliseconds(day: LocalDate? = nil, hour: Int? = nil, app: String) -> Int64 {
        rows.filter { ($0.day == day || day == nil) && ($0.hour == hour || hour == nil) && $0.app == app }
            .reduce(0) { $0 + $1.milliseconds }
    }

    func apps(day: LocalDate?) -> [(String, Int64)] {
        var totals: [String: Int64] = [:]
        for row in rows where row.app != UsageKey.screen && (day == nil || row.day == day) {
            totals[row.app, default: 0] += row.milliseconds
        }
        return totals.sorted { ($0.value, $1.key) > ($1.value, $0.key) }
    }

    func limit(_ day: LocalDate) -> Int? { Schedule(policy: policy, zone: zone).limitMinutes(on: day) }

    var json: JSONValue {
        let dayValues: [JSONValue] = days.map { day in
            .object(
                JSONObject([
                    ("date", .string("\(day)")),
                    ("screenSeconds", .int(UserStatus.seconds(milliseconds(day: day, app: UsageKey.screen)))),
                    ("limitMinutes", limit(day).map { .int(Int64($0)) } ?? .null),
                    (
                        "apps",
                        .array(
                            apps(day: day).map {
                                .object(JSONObject([("app", .string($0.0)), ("seconds", .int(UserStatus.seconds($0.1)))]))
                            })
                    ),
                    (
                        "hours",
                        .array(
                            (0..<24).map { hour in
                                .object(
                                    JSONObject([
                                        ("hour", .int(Int64(hour))),
                                        ("screenSeconds", .int(UserStatus.seconds(milliseconds(day: day, hour: hour, app: UsageKey.screen)))),
                                    ]))
                            })
                    ),
                ]))
        }
        return .object(
            JSONObject([
                ("user", .string(user)), ("timezone", .string(zone.identifier)), ("from", .string("\(from)")),
                ("to", .string("\(to)")),
                ("screenSeconds", .int(UserStatus.seconds(milliseconds(app: UsageKey.screen)))),
                ("days", .array(dayValues)),
                (
                    "apps",
                    .array(apps(day: nil).map { .object(JSONObject([("app", .string($0.0)), ("seconds", .int(UserStatus.seconds($0.1)))])) })
                ),
            ]))
    }

    func csv(by grouping: Report.Grouping) -> String {
        var lines: [String]
        switch grouping {
        case .day:
            lines = ["date,screen_seconds,limit_minutes"]
            for day in days {
                lines.append("\(day),\(UserStatus.seconds(milliseconds(day: day, app: UsageKey.screen))),\(limit(day).map(String.init) ?? "")")
            }
        case .app:
            lines = ["date,app,seconds"]
            for day in days {
                for (app, ms) in apps(day: day) { lines.append("\(day),\(csvField(app)),\(UserStatus.seconds(ms))") }
            }
        case .hour:
            lines = ["date,hour,screen_seconds"]
            for day in days {
                for hour in 0..<24 {
                    lines.append("\(day),\(hour),\(UserStatus.seconds(milliseconds(day: day, hour: hour, app: UsageKey.screen)))")
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    func csvField(_ text: String) -> String {
        text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" })
            ? "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : text
    }

    func lines(by grouping: Report.Grouping) -> [String] {
        var lines = ["\(user): \(from == to ? "\(from)" : "\(from) to \(to)") (\(zone.identifier))"]
        switch grouping {
        case .day:
            var rows: [[String]] = [["DATE", "DAY", "SCREEN", "LIMIT", ""]]
            for day in days {
                let used = UserStatus.seconds(milliseconds(day: day, app: UsageKey.screen))
                let limit = limit(day)
                rows.append([
                    "\(day)", day.weekday.rawValue, formatSeconds(used), limit.map { TimeAllowance.format(minutes: $0) } ?? "none",
                    bar(used: used, limit: limit),
                ])
            }
            lines += table(rows)
        case .app:
            let apps = apps(day: nil)
            if apps.isEmpty { lines.append("  no apps used") }
            lines += table([["APP", "TIME"]] + apps.map { [$0.0, formatSeconds(UserStatus.seconds($0.1))] })
        case .hour:
            var rows: [[String]] = [["HOUR", "SCREEN"]]
            for hour in 0..<24 {
                let used = UserStatus.seconds(milliseconds(hour: hour, app: UsageKey.screen))
                rows.append([(hour < 10 ? "0" : "") + "\(hour):00", formatSeconds(used)])
            }
            lines += table(rows)
        }
        return lines
    }

    /// 20 cells for the limit; over the limit shows `!`.
    func bar(used: Int64, limit: Int?) -> String {
        guard let limit, limit > 0 else { return used > 0 ? String(repeating: "#", count: min(20, Int(used / 1800) + 1)) : "" }
        let cells = min(20, Int((used * 20 + Int64(limit) * 60 - 1) / (Int64(limit) * 60)))
        return String(repeating: "#", count: cells) + String(repeating: ".", count: 20 - cells) + (used > Int64(limit) * 60 ? " !" : "")
    }
}

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The agent's audit log: agent start and stop, policy loaded, clock jumps, damaged database, ...")

    @OptionGroup var location: LocationOptions
    @Argument(help: "Only events of this user (and events of no user).") var user: String?
    @Option(help: ArgumentHelp("From this day (YYYY-MM-DD) or this long ago (2h, 30m).", valueName: "when"))
    var since: String?
    @Flag(name: .long, help: "Print the result as JSON.") var json = false

    func run() throws {
        if let user { try translatingErrors { try Policy.validateUserName(user) } }
        var sinceMilliseconds: Int64? = nil
        if let since {
            if let date = try? LocalDate.parse(since) {
                sinceMilliseconds = ZoneRules(TimeZone.current).startOfDay(date) * 1000
            } else if let minutes = try? TimeAllowance.parseMinutes(since) {
                sinceMilliseconds = (Workspace.now() - Int64(minutes) * 60) * 1000
            } else {
                throw CLIError("since must be a date (YYYY-MM-DD) or a duration (2h, 30m), got \(quoted(since))", .invalidArguments)
            }
        }
        let workspace = Workspace(location)
        try workspace.requireInitialised()
        let events = try workspace.openStore().read { try EventLog.list(user: user, since: sinceMilliseconds, $0) }
        let zone = ZoneRules(TimeZone.current)
        if json {
            Output.line(
                JSONValue.array(
                    events.map { event in
                        .object(
                            JSONObject([
                                ("id", .int(event.id ?? 0)), ("time", .string(zone.iso8601(event.time / 1000))),
                                ("user", event.user.map { .string($0) } ?? .null), ("kind", .string(event.kind)),
                                ("message", .string(event.message)), ("data", event.data ?? .null),
                            ]))
                    }
                ).prettyString)
            return
        }
        if events.isEmpty { Output.line("no events") }
        let rows = events.map { event -> [String] in
            let (date, second) = zone.localTime(at: event.time / 1000)
            let time = ClockTime(hour: second / 3600, minute: second / 60 % 60)
            return ["\(date) \(time):\(second % 60 < 10 ? "0" : "")\(second % 60)", event.user ?? "-", event.kind, event.message]
        }
        table(rows, indent: "").forEach { Output.line($0) }
    }
}
