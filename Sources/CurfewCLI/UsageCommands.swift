import ArgumentParser
import CurfewReports
import CurfewCore
import CurfewLinux
import CurfewStore
import CurfewSync
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `1h5m`, `45m`, `30s`, `0`: a number of seconds for people.
func formatSeconds(_ seconds: Int64) -> String { UsageReport.duration(seconds) }

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show today's screen time, time left and running apps (a child sees their own).")

    @OptionGroup var location: LocationOptions
    @Argument(help: "The user (default: you).", completion: Completions.users) var user: String?
    @Option(help: ArgumentHelp("The agent's socket (default: $CURFEW_SOCKET, else /run/curfew/curfewd.sock).", valueName: "path"))
    var socket: String?
    @Flag(name: .long, help: "Print the result as JSON.") var json = false

    func run() throws {
        let me = Accounts.account(uid: getuid())
        guard let target = user ?? me?.name else { throw CLIError("name a user: your account has no name", .invalidArguments) }
        try Policy.validateUserName(target)
        if getuid() != 0 && target != me?.name {
            throw CLIError("you may only see your own status, not \(target)'s", .notPermitted)
        }
        let socketPath = Locations.socket(socket, environment: ProcessInfo.processInfo.environment)
        let status: JSONValue
        let report: StatusReport
        var live = true
        if let (sent, reply) = AgentClient.exchange(.status(user: target), socket: socketPath) {
            guard reply.ok, let read = reply.status, let value = sent["status"] else { throw AgentClient.error(reply) }
            status = value
            report = read
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
            let saved = UserStatus.make(
                user: target, policy: policy, zone: schedule.zone, now: now, totals: totals, running: [], counting: nil,
                adjustments: schedule.adjustments, otherComputers: others,
                weekMilliseconds: try workspace.savedWeek(of: target, policy: policy, now: now))
            status = saved.json
            report = saved.report
            workspace.finish()
        }
        if json {
            Output.line(status.prettyString)
        } else {
            Status.describe(report, live: live).forEach { Output.line($0) }
        }
    }

    static func describe(_ status: StatusReport, live: Bool) -> [String] {
        var lines = ["\(status.user) on \(status.date) (\(status.timezone))"]
        var rows: [[String]] = []
        let used = formatSeconds(status.screenSeconds)
        if let limit = status.limitMinutes {
            let granted = status.extraMinutes > 0 ? " (\(TimeAllowance.format(minutes: status.extraMinutes)) extra granted)" : ""
            rows.append(["screen time", "\(used) of \(TimeAllowance.format(minutes: limit))\(granted)"])
        } else {
            rows.append(["screen time", "\(used) (no daily limit)"])
        }
        if let others = status.otherComputersSeconds {
            rows.append(["", "\(formatSeconds(others)) more on the family's other computers (the limit counts them)"])
        }
        if let remaining = status.remainingSeconds {
            rows.append(["time left", formatSeconds(remaining)])
        }
        if status.bedtimeDelayMinutes > 0 {
            rows.append(["bedtime", "\(TimeAllowance.format(minutes: status.bedtimeDelayMinutes)) later tonight (granted)"])
        }
        for (window, minutes) in (status.downtimeDelayMinutes ?? [:]).sorted(by: { $0.key < $1.key }) {
            rows.append(["downtime", "\(window) \(TimeAllowance.format(minutes: minutes)) later today (granted)"])
        }
        rows.append(["state", status.state.rawValue + (status.reason.map { ": \($0)" } ?? "")])
        // Local clock times and relative days: `time up at 19:42`, `allowed tomorrow at 07:00`.
        func at(_ iso: String) -> String {
            let when = ChildWords.moment(iso, today: status.date)
            return when.contains("at ") ? when : "at \(when)"
        }
        if let change = status.nextChange {
            rows.append(["next change", "\(ChildWords.stateName(change.state)) \(at(change.at))"])
        }
        if status.state != .allowed, let again = status.allowedAgainAt {
            rows.append(["allowed again", at(again)])
        }
        let windows = (status.blocked ?? []).map { window in
            "\(window.window.map { "downtime \($0)" } ?? window.state) \(window.start)-\(window.end)"
        }
        if !windows.isEmpty { rows.append(["today", windows.joined(separator: ", ")]) }
        for (index, rule) in (status.rules ?? []).enumerated() {
            rows.append([index == 0 ? "rules" : "", ChildWords.rule(rule)])
        }
        if let allowance = status.selfExtension {
            rows.append([
                "extra time", "you may take \(ChildWords.duration(seconds: Int64(allowance.minutes) * 60)) more yourself, "
                    + "\(allowance.perWeek == 1 ? "once" : "\(allowance.perWeek) times") a week (curfew extend)",
            ])
        }
        for (index, app) in status.apps.enumerated() {
            rows.append([index == 0 ? "apps" : "", "\(app.app) \(formatSeconds(app.seconds))\(app.running ? "  running" : "")"])
        }
        lines += table(rows)
        if !live { lines.append("(the agent is not running: figures as last saved)") }
        return lines
    }
}

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Screen time against the limit, per day, app or hour, as a table, JSON, CSV or an HTML page with charts.",
        discussion: """
            Periods: --day DATE (default today), --week (the 7 days ending today), --month (the 30 days \
            ending today), or --from DATE --to DATE. Each day's limit is that of the policy in force that day \
            (from the signed records and their times) plus that day's extra time; grants and requests (with \
            the child's reason) are events. A user who is no longer managed keeps their history.
            JSON: {"user", "timezone", "from", "to", "screenSeconds", "daysOverLimit", "days": [{"date", \
            "screenSeconds", "limitMinutes", "extraMinutes", "overLimit", "apps": [{"app", "seconds"}], "hours": [{"hour", \
            "screenSeconds"}]}], "apps": [{"app", "seconds"}], "hours": [{"hour", "screenSeconds"}], "eventCounts": \
            {category: count}, "events": [{"time", "kind", "category", "message"}]}. CSV by day: \
            date,screen_seconds,limit_minutes; by app: date,app,seconds; by hour: date,hour,screen_seconds. \
            HTML: one self-contained page with charts (--output FILE, else standard output). Colours only on a \
            terminal, never with NO_COLOR set. --all-computers adds the user's time on the family's other \
            computers (from their signed usage summaries in the shared directory) and, in JSON, "computers": \
            [{"machine" (null for this one), "host", "screenSeconds", "lastWritten"}].
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable { case table, json, csv, html }

    @OptionGroup var location: LocationOptions
    @Argument(help: "The user (default: the only managed user).", completion: Completions.users) var user: String?
    @Option(help: ArgumentHelp("One day, YYYY-MM-DD.", valueName: "date")) var day: String?
    @Flag(help: "The 7 days ending today.") var week = false
    @Flag(help: "The 30 days ending today.") var month = false
    @Option(help: ArgumentHelp("First day, YYYY-MM-DD.", valueName: "date")) var from: String?
    @Option(help: ArgumentHelp("Last day, YYYY-MM-DD.", valueName: "date")) var to: String?
    @Option(help: "Group by app, day or hour (table and CSV).") var by: UsageReport.Grouping = .day
    @Option(help: "table, json, csv or html.") var format: Format = .table
    @Option(help: ArgumentHelp("Write the report to this file instead of standard output.", valueName: "file"))
    var output: String?
    @Flag(help: "Add the user's time on the family's other computers (their usage summaries in the shared directory).")
    var allComputers = false
    @Option(help: ArgumentHelp("The agent's socket, for a child's own report (default: $CURFEW_SOCKET, else /run/curfew/curfewd.sock).", valueName: "path"))
    var socket: String?

    func run() throws {
        let periods = [day != nil, week, month, from != nil || to != nil].filter { $0 }.count
        guard periods <= 1 else { throw CLIError("give one period: --day, --week, --month or --from/--to", .invalidArguments) }
        let parsedDay = try day.map { text in try LocalDate.parse(text) }
        let parsedFrom = try from.map { text in try LocalDate.parse(text) }
        let parsedTo = try to.map { text in try LocalDate.parse(text) }
        if (parsedFrom == nil) != (parsedTo == nil) { throw CLIError("--from and --to go together", .invalidArguments) }
        if let parsedFrom, let parsedTo, parsedTo < parsedFrom {
            throw CLIError("--to must not be before --from, got \(parsedFrom) to \(parsedTo)", .invalidArguments)
        }
        if let output, output.isEmpty { throw CLIError("output must name a file, got \"\"", .invalidArguments) }
        let workspace = Workspace(location)
        // A child cannot read the state directory: their own report comes through the agent.
        let throughAgent = getuid() != 0 && !workspace.stateDirectoryReadable
        let target = try throughAgent ? (user ?? ChildView.me()) : resolveUser(workspace)
        if throughAgent {
            try Policy.validateUserName(target)
            try ChildView.requireOwn(target, what: "report")
        }
        // Each day is judged by the policy in force that day (from the records and their times) and that
        // day's extra time; a user who is no longer managed keeps their history.
        var history: (records: [PolicyMerge.Input], grants: [GrantSummary], adjustments: [LocalDate: DayAdjustment]) = ([], [], [:])
        let policy: Policy
        if throughAgent {
            let rules = try ChildView.rules(of: target, socket: socket)
            policy = rules.policy
            history.adjustments = rules.adjustments
        } else {
            history = try workspace.reportHistory(of: target)
            do {
                policy = try workspace.currentPolicy(of: target).policy
            } catch where CLIError(translating: error) != nil {
                let newest = history.records.sorted { ($0.record.time, $0.id) < ($1.record.time, $1.id) }.last { $0.record.policy != nil }
                guard let kept = newest?.record.policy else { throw error }
                policy = kept
            }
        }
        let zone = Schedule.zone(for: policy)
        let today = zone.localTime(at: Workspace.now()).date
        let (first, last): (LocalDate, LocalDate) =
            if let parsedDay { (parsedDay, parsedDay) } else if week { (today.adding(days: -6), today) } else if month {
                (today.adding(days: -29), today)
            } else if let parsedFrom, let parsedTo { (parsedFrom, parsedTo) } else { (today, today) }
        guard last.daysSinceEpoch - first.daysSinceEpoch < 3660 else {
            throw CLIError("a report covers at most 10 years, got \(first) to \(last)", .invalidArguments)
        }
        if throughAgent && allComputers {
            throw CLIError("--all-computers needs the state directory (only a parent may do this; try sudo)", .notPermitted)
        }
        var (rows, events) =
            try throughAgent
            ? ChildView.usage(of: target, from: first, to: last, socket: socket)
            : workspace.openStore().read { db in
                (
                    try UsageTable.rows(user: target, from: first, through: last, db),
                    try EventLog.events(of: target, from: zone.start(of: first), before: zone.start(of: last.adding(days: 1)), db)
                )
            }
        var computers: [UsageReport.Computer]? = nil
        if allComputers {
            let local = rows.reduce(Int64(0)) { $0 + ($1.app == UsageKey.screen ? $1.milliseconds : 0) }
            var list = [UsageReport.Computer(machine: nil, host: MachineIdentity.hostName(), screenSeconds: UserStatus.seconds(local), lastWritten: nil)]
            let others = workspace.otherComputersUsage(of: target, from: first, through: last)
            for (machine, summaries) in Dictionary(grouping: others, by: \.machine).sorted(by: { $0.key < $1.key }) {
                for summary in summaries {
                    rows += summary.buckets.map { UsageTable.Row(day: summary.day, hour: $0.hour, app: $0.app, milliseconds: $0.milliseconds) }
                }
                let newest = summaries.max { $0.time < $1.time }!
                list.append(
                    UsageReport.Computer(
                        machine: machine, host: newest.host,
                        screenSeconds: UserStatus.seconds(summaries.reduce(0) { $0 + $1.screenMilliseconds }), lastWritten: Instant(seconds: newest.time)))
            }
            computers = list
        }
        workspace.finish()
        let policies = PolicyHistory.policies(records: history.records, zone: zone, from: first, to: last)
        var report = UsageReport.make(
            user: target, policy: policy, zone: zone, from: first, to: last, rows: rows, events: events, policies: policies,
            adjustments: history.adjustments, grants: history.grants)
        report.computers = computers
        let text: String
        switch format {
        case .json: text = report.json.prettyString + "\n"
        case .csv: text = report.csv(by: by)
        case .html: text = report.html
        case .table:
            let colour = output == nil && Report.stdoutIsColourTerminal(ProcessInfo.processInfo.environment)
            text = report.lines(by: by, palette: colour ? .ansi : .none).map { $0 + "\n" }.joined()
        }
        if let output {
            // Like `key export --output`: a whole file or none (written to a temporary name, then renamed).
            do {
                try Data(text.utf8).write(to: URL(fileURLWithPath: output), options: .atomic)
            } catch {
                let denied = (error as NSError).domain == NSCocoaErrorDomain && (error as NSError).code == NSFileWriteNoPermissionError
                throw CLIError("cannot write \(output): \(error.localizedDescription)", denied ? .notPermitted : .failure)
            }
        } else {
            print(text, terminator: "")
        }
    }

    /// Colours only for a person: standard output is a terminal, `NO_COLOR` is unset or empty
    /// (no-color.org), and `TERM` is not `dumb`.
    static func stdoutIsColourTerminal(_ environment: [String: String]) -> Bool {
        isatty(1) == 1 && (environment["NO_COLOR"] ?? "").isEmpty && environment["TERM"] != "dumb"
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

extension UsageReport.Grouping: ExpressibleByArgument {}

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The agent's audit log: agent start and stop, policy loaded, clock jumps, damaged database, ...",
        discussion: """
            Every event carries the hash of the entry before it; --verify walks the chain and names the first \
            broken link (exit 65), or says it is intact (exit 0). Events older than the agent's retention period \
            (curfewd --event-retention, default 365 days) are replaced by daily counts per user and kind, listed \
            as summaries; the chain goes on across them.
            """)

    @OptionGroup var location: LocationOptions
    @Argument(help: "Only events of this user (and events of no user).") var user: String?
    @Option(help: ArgumentHelp("From this day (YYYY-MM-DD) or this long ago (2h, 30m).", valueName: "when"))
    var since: String?
    @Flag(name: .long, help: "Print the result as JSON.") var json = false
    @Flag(name: .long, help: "Check the hash chain of the whole log; exit 65 at the first broken link.") var verify = false

    func run() throws {
        if let user { try Policy.validateUserName(user) }
        if verify && (user != nil || since != nil) {
            throw CLIError("--verify checks the whole log: it takes no user and no --since", .invalidArguments)
        }
        var earliest: Instant? = nil
        if let since {
            if let date = try? LocalDate.parse(since) {
                earliest = ZoneRules.system.start(of: date)
            } else if let minutes = try? TimeAllowance.parseMinutes(since) {
                earliest = Workspace.now() - .seconds(Int64(minutes) * 60)
            } else {
                throw CLIError("since must be a date (YYYY-MM-DD) or a duration (2h, 30m), got \(quoted(since))", .invalidArguments)
            }
        }
        let workspace = Workspace(location)
        try workspace.requireInitialised()
        let store = try workspace.openStore()
        if verify { return try runVerify(store) }
        let (events, summaries) = try store.read { db in
            (
                try EventLog.list(user: user, since: earliest, db),
                try AuditChain.summaries(user: user, since: earliest, db)
            )
        }
        let zone = ZoneRules.system
        if json {
            let summaryValues = summaries.map { row in
                EventJSON.summary(
                    .init(
                        day: row.day, user: row.user, kind: row.kind, count: row.count,
                        time: zone.iso8601(row.firstTime), lastTime: zone.iso8601(row.lastTime)))
            }
            let eventValues = events.map { event in
                EventJSON.event(
                    .init(
                        id: event.id ?? 0, time: zone.iso8601(event.time), user: event.user, kind: event.kind.rawValue,
                        message: event.message, data: event.data))
            }
            Output.json(summaryValues + eventValues)
            return
        }
        if events.isEmpty && summaries.isEmpty { Output.line("no events") }
        var rows = summaries.map { row -> [String] in
            [row.day, row.user ?? "-", row.kind, "\(row.count) event\(row.count == 1 ? "" : "s") (summarised)"]
        }
        rows += events.map { event -> [String] in
            let (date, second) = zone.localTime(at: event.time)
            let time = ClockTime(hour: second / 3600, minute: second / 60 % 60)
            return ["\(date) \(time):\(second % 60 < 10 ? "0" : "")\(second % 60)", event.user ?? "-", event.kind.rawValue, event.message]
        }
        table(rows, indent: "").forEach { Output.line($0) }
    }

    func runVerify(_ store: StateStore) throws {
        let (result, retention) = try store.read { db in
            (try AuditChain.verify(db), try AgentStateTable.get(AgentStateKeys.eventRetentionDays, db).map(Int64.init))
        }
        if json {
            Output.json(
                AuditJSON(
                    intact: result.broken == nil, events: result.events, summaryRows: result.summaryRows,
                    summarisedEvents: result.summarisedEvents, retentionDays: retention,
                    broken: result.broken.map { .init(entry: $0.entry, id: $0.id, problem: $0.problem) },
                    head: result.broken == nil ? result.head : nil))
        }
        if let broken = result.broken {
            throw CLIError("the audit log is broken at \(broken)", .badInputData)
        }
        if !json {
            Output.line(
                "audit log intact: \(result.events) events and \(result.summaryRows) summary rows "
                    + "(\(result.summarisedEvents) older events) chained; head \(result.head)")
            Output.line(
                retention.map { "the agent summarises events older than \($0) days (curfewd --event-retention)" }
                    ?? "the agent has not summarised any events yet (curfewd --event-retention, default \(AgentStateKeys.defaultEventRetentionDays) days)")
        }
    }
}

/// One entry of `curfew events --json`: a saved event, or the count of a kind on a day that replaced
/// older events (`summary: true`). Every field present, `null` when unset.
enum EventJSON: Encodable {
    struct Summary: Encodable {
        var summary = true
        var day: String
        @OrNull var user: String?
        var kind: String
        var count: Int64
        var time: String
        var lastTime: String
    }

    struct Event: Encodable {
        var id: Int64
        var time: String
        @OrNull var user: String?
        var kind: String
        var message: String
        @OrNull var data: JSONValue?
    }

    case summary(Summary)
    case event(Event)

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .summary(let summary): try summary.encode(to: encoder)
        case .event(let event): try event.encode(to: encoder)
        }
    }
}

/// `curfew events verify --json`: whether the audit chain is intact, and its head or where it broke.
struct AuditJSON: Encodable {
    struct Broken: Encodable {
        var entry: String
        var id: Int64
        var problem: String
    }

    var intact: Bool
    var events: Int
    var summaryRows: Int
    var summarisedEvents: Int64
    @OrNull var retentionDays: Int64?
    var broken: Broken?
    var head: String?
}
