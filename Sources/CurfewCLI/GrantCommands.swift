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

/// Parses a duration of extra time: `30m`, `1h30m`, `0`; never `unlimited`.
func parseExtraMinutes(_ text: String, rule: String) throws -> Int {
    guard let minutes = try? TimeAllowance.parseMinutes(text) else {
        throw CLIError("\(rule) must be a duration like 30m, 1h30m or 0, got \(quoted(text))", .invalidArguments)
    }
    return minutes
}

/// `30m extra`, `bedtime 30m later`, `30m extra and bedtime 1h later`.
func describeGrant(extraMinutes: Int, bedtimeDelayMinutes: Int) -> String {
    var parts: [String] = []
    if extraMinutes > 0 { parts.append("\(TimeAllowance.format(minutes: extraMinutes)) extra") }
    if bedtimeDelayMinutes > 0 { parts.append("bedtime \(TimeAllowance.format(minutes: bedtimeDelayMinutes)) later") }
    return parts.joined(separator: " and ")
}

extension Workspace {
    /// Signs and publishes a grant of extra time; returns its record id.
    func publishGrant(
        user: String, date: LocalDate, extraMinutes: Int, bedtimeDelayMinutes: Int, requestId: Int64?, now: Instant,
        lift: GrantLift = GrantLift()
    ) throws -> String {
        try shared.publishGrant(
            user: user, date: date, extraMinutes: extraMinutes, bedtimeDelayMinutes: bedtimeDelayMinutes,
            requestId: requestId, now: now, lift: lift, keyRing: keyRing)
    }

    /// Prints what a grant did, and whether any computer confirms records here.
    func announceGrant(
        _ summary: String, user: String, date: LocalDate, extraMinutes: Int, bedtimeDelayMinutes: Int, id: String,
        requestId: Int64?, json: Bool, lift: GrantLift = GrantLift()
    ) {
        finish()
        if json {
            Output.json(
                GrantJSON(
                    user: user, date: "\(date)", extraMinutes: extraMinutes, bedtimeDelayMinutes: bedtimeDelayMinutes, record: id,
                    requestId: requestId, lift: lift, message: summary))
            return
        }
        Output.line(summary)
        if !shared.hasAnyConfirmation() { Output.line("no computer has confirmed it yet") }
    }

    /// Loads the parent's signing key: only a parent may answer requests or grant time.
    func requireParentKey() throws -> SigningKey {
        try requireInitialised()
        return try keyRing.loadSigningKey()
    }
}

struct Grant: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Give a user extra time, or a later bedtime, for one day (today by default).",
        discussion: """
            Publishes a signed grant record through the shared directory, like a policy change; it adds \
            to that day only, on top of other grants. With --app the time is for that app's own limit \
            (an app with a limit rule), not screen time. A day that is over is refused (exit status 64). \
            Examples: curfew grant kid 30m; curfew grant kid 0 --bedtime 30m; curfew grant kid 1h --date \
            2026-12-24; curfew grant kid 30m --app minecraft.
            """)

    @OptionGroup var location: LocationOptions
    @Argument(help: "The user's login name.", completion: Completions.users) var user: String
    @Argument(help: "Extra screen time: 30m, 1h30m, or 0 with --bedtime.", completion: Completions.durations) var duration: String
    @Option(name: .long, help: ArgumentHelp("Move that night's bedtime this much later.", valueName: "duration"))
    var bedtime: String?
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The day, YYYY-MM-DD (default: today in the policy's zone; for --bedtime in last night's bedtime, last night).",
            valueName: "date"))
    var date: String?
    @Option(
        name: .long,
        help: ArgumentHelp("Give the time to this app's own limit instead of screen time.", valueName: "app"),
        completion: Completions.apps)
    var app: String?
    @Flag(name: .long, help: "Print the result as JSON.") var json = false

    func run() throws {
        var extra = try parseExtraMinutes(duration, rule: "extra time")
        let delay = try bedtime.map { try parseExtraMinutes($0, rule: "bedtime delay") } ?? 0
        var lift = GrantLift()
        if let app {
            try Policy.validateAppName(app)
            lift.app = GrantLift.App(app: app, minutes: extra)
            extra = 0
        }
        try GrantRecord.validate(extraMinutes: extra, bedtimeDelayMinutes: delay, lift: lift)
        let requested = try date.map { text in try LocalDate.parse(text) }
        let workspace = Workspace(location)
        let (policy, _) = try workspace.currentPolicy(of: user)
        if let app {
            // Time for an app lifts something only where the app has a limit; a name the catalog and the
            // policy do not know is most likely a typing mistake.
            let known = try policy.rule(for: app) != nil || loadCatalog().definition(named: app) != nil
            guard known else {
                throw CLIError(
                    "unknown app \(quoted(app)): not in the app catalog and \(user)'s policy has no rule for it", .invalidArguments)
            }
            guard case .limit? = policy.rule(for: app) else {
                throw CLIError("\(app) has no daily limit for \(user); more time for it would lift nothing", .invalidArguments)
            }
        }
        let now = Workspace.now()
        let zone = Schedule.zone(for: policy)
        let today = zone.localTime(at: now).date
        let yesterday = today.adding(days: -1)
        // Last night's bedtime as first set, and as the child is in it (with what was granted already).
        let lastNight = Schedule(policy: policy, zone: zone).bedtimeInterval(startingOn: yesterday)
        let lastNightLasts = lastNight.map { now < $0.end } ?? false
        var day = requested ?? today
        if requested == nil, delay > 0, lastNightLasts,
            let inForce = try workspace.savedDay(of: user, policy: policy, now: now).schedule.bedtimeInterval(startingOn: yesterday),
            inForce.start <= now, inForce.start + .seconds(delay * 60) > now
        {
            // After midnight, in last night's bedtime, a delay that lets the child back in now is for
            // that night: it is the bedtime the child is in.
            guard extra == 0, lift.app == nil else {
                throw CLIError(
                    "last night's bedtime lasts until \(ChildMessages.when(inForce.end, now: now, zone: zone)): move it with a grant "
                        + "of its own (curfew grant \(user) 0 --bedtime \(bedtime ?? "")) and give today's time in another",
                    .invalidArguments)
            }
            day = yesterday
        }
        // A day that is over cannot be given more; last night's bedtime can be moved while it lasts.
        if day < today {
            guard day == yesterday, extra == 0, delay > 0, lastNightLasts else {
                throw CLIError("\(day) is already over (today is \(today)); extra time is for today or a later day", .invalidArguments)
            }
        }
        let id = try workspace.publishGrant(
            user: user, date: day, extraMinutes: extra, bedtimeDelayMinutes: delay, requestId: nil, now: now, lift: lift)
        var summary = "granted \(describeGrant(extraMinutes: extra, bedtimeDelayMinutes: delay)) for \(user) on \(day) (record \(id))"
        if let app = lift.app {
            let when = day == today ? "today" : "on \(day)"
            let bedtime = delay > 0 ? " and bedtime \(TimeAllowance.format(minutes: delay)) later" : ""
            summary = "granted \(user) \(TimeAllowance.format(minutes: app.minutes)) more of \(app.app)\(bedtime) \(when) (record \(id))"
        }
        workspace.announceGrant(
            summary, user: user, date: day, extraMinutes: extra, bedtimeDelayMinutes: delay, id: id, requestId: nil, json: json,
            lift: lift)
    }
}

struct Request: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Ask a parent for more time today (run by a child; the agent records it).",
        discussion: """
            The agent records what blocks you as you ask (the daily limit, the weekly budget, bedtime, a \
            downtime window, a break, or with --app that app's own limit), so a parent's approval lifts \
            that; --app must name an app of the catalog or of your rules (else exit status 64). At most \(RequestRules.maxPending) requests may wait for an answer, and at most \(RequestRules.maxPerHour) \
            are recorded in any hour (answered ones included); past that the agent refuses with exit status 77, \
            like anything else a child may not do. The reason is plain text: at most \(RequestRules.maxReasonCharacters) \
            characters, no control characters (exit status 64).
            """)

    @Argument(help: "How much more: 30m, 1h.", completion: Completions.durations) var duration: String
    @Option(
        name: .long,
        help: ArgumentHelp("Why, in a few words (at most \(RequestRules.maxReasonCharacters) characters).", valueName: "text"))
    var reason: String?
    @Option(
        name: .long, help: ArgumentHelp("More time for this app (one the catalog or your rules name).", valueName: "app"),
        completion: Completions.apps)
    var app: String?
    @Option(help: ArgumentHelp("The agent's socket (default: $CURFEW_SOCKET, else /run/curfew/curfewd.sock).", valueName: "path"))
    var socket: String?
    @Flag(name: .long, help: "Print the result as JSON.") var json = false

    func run() throws {
        let minutes = try parseExtraMinutes(duration, rule: "requested time")
        let text = reason.flatMap { $0.isEmpty ? nil : $0 }
        try RequestRules.validate(minutes: Int64(minutes), reason: text)
        if let app { try Policy.validateAppName(app) }
        let socketPath = Locations.socket(socket, environment: ProcessInfo.processInfo.environment)
        guard let (sent, reply) = AgentClient.exchange(.request(minutes: Int64(minutes), reason: text, app: app), socket: socketPath)
        else {
            throw CLIError("the agent is not running (cannot reach \(socketPath))", .unavailable)
        }
        guard reply.ok, let id = reply.request?.id, let request = sent["request"] else { throw AgentClient.error(reply) }
        if json {
            Output.line(request.prettyString)
        } else {
            // What blocks the child, as the agent recorded it: what the parent's approval will lift.
            let blocked = reply.request?.cause.flatMap(UseBlock.init(code:)).map { ", blocked by \($0.words)" } ?? ""
            let what = app.map { " of \($0)" } ?? ""
            Output.line("asked for \(TimeAllowance.format(minutes: minutes)) more\(what) (request \(id)\(blocked)); a parent will answer")
        }
    }
}

struct Requests: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the children's requests for more time (pending ones unless --all).",
        discussion: """
            The "blocked by" column says what kept the child from their computer (or the app) when they \
            asked, as the agent decided it then: daily limit, weekly budget, bedtime, downtime NAME, break, \
            APP's limit, or - for nothing; curfew approve lifts that. JSON: a list of {"id", "user", \
            "minutes", "reason", "createdMs", "askedAt", "status", "answeredMs", "grantedMinutes", \
            "answeredBy" (a parent key's id, "\(RequestTable.parentPIN)" when the PIN answered it on the child's \
            screen, "\(RequestTable.selfService)"), "cause" (daily-limit, weekly-limit, bedtime, downtime:NAME, break, app-limit:APP or \
            null), "app"}.
            """)

    @OptionGroup var location: LocationOptions
    @Flag(name: .long, help: "Answered requests too.") var all = false
    @Flag(name: .long, help: "Print the result as JSON.") var json = false

    func run() throws {
        let workspace = Workspace(location)
        try workspace.requireInitialised()
        let requests = try workspace.openStore().read { db in all ? try RequestTable.all(db) : try RequestTable.pending(db) }
        if json {
            Output.line(JSONValue.array(requests.map(Requests.json)).prettyString)
            return
        }
        guard !requests.isEmpty else {
            Output.line(all ? "no requests" : "no pending requests")
            return
        }
        let zone = ZoneRules.system
        var rows = [["id", "user", "asked", "reason", "blocked by", "asked at", "status"]]
        for request in requests {
            var status = request.status.rawValue
            if request.status == .approved, let granted = request.grantedMinutes {
                status += " \(TimeAllowance.format(minutes: granted))"
                // A parent at the child's screen, with the PIN (approve-pin): not a parent's key.
                if request.answeredBy == RequestTable.parentPIN { status += " by PIN" }
            }
            rows.append([
                "\(request.id)", request.user,
                TimeAllowance.format(minutes: request.minutes) + (request.app.map { " of \($0)" } ?? ""),
                request.reason ?? "-", request.cause?.words ?? "-",
                Requests.clock(request.created, zone), status,
            ])
        }
        table(rows, indent: "").forEach { Output.line($0) }
    }

    static func json(_ request: TimeRequest) -> JSONValue {
        guard case .object(var object) = request.json else { return request.json }
        object["askedAt"] = .string(utcTimestamp(request.created.seconds))
        return .object(object)
    }

    /// `2026-11-22 14:03` in `zone`.
    static func clock(_ instant: Instant, _ zone: ZoneRules) -> String {
        let (date, second) = zone.localTime(at: instant)
        return "\(date) \(ClockTime(hour: second / 3600, minute: second / 60 % 60))"
    }
}

/// Parses a request id: a positive whole number.
func parseRequestID(_ text: String) throws -> Int64 {
    guard let id = Int64(text), id > 0 else {
        throw CLIError("request id must be a positive whole number, got \(quoted(text))", .invalidArguments)
    }
    return id
}

/// Answers a request: a `RequestError` becomes the line a parent sees (64), and an error of the database
/// is shown whole (exit 1), as it always was here: SQLite's message names the statement, and the one
/// that answers takes two lines, of which `Curfew.main` would keep only the first. The library's own
/// errors (the grant's key and files) are left to `Curfew.main`.
func translatingRequestErrors<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as RequestError {
        throw CLIError(error.description, .invalidArguments)
    } catch where CLIError(translating: error) == nil {
        throw CLIError("\(error)", .failure)
    }
}

struct Approve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Approve a child's request: grant what lifts the block they asked about (the time asked for, or DURATION).",
        discussion: """
            The grant lifts what blocked the child when they asked (see curfew requests): at bedtime or in a \
            downtime window that is still on, it moves that night's bedtime or that window's start so that it \
            begins DURATION from now; in a break, it ends the break; at an app's own limit, or for a request \
            that names an app with a limit, it gives that app DURATION more today; at the daily limit or the \
            weekly budget (or when nothing blocked), DURATION more screen time today, which counts for the \
            week too. It prints what was granted and until when; when nothing would be lifted (no limit to \
            raise) it grants nothing and exits with status 64.
            """)

    @OptionGroup var location: LocationOptions
    @Argument(help: "The request's id (see curfew requests).") var id: String
    @Argument(help: "Grant this much instead of what was asked.") var duration: String?
    @Flag(name: .long, help: "Print the result as JSON.") var json = false

    func run() throws {
        let requestID = try parseRequestID(id)
        let override = try duration.map { try parseExtraMinutes($0, rule: "extra time") }
        if let override {
            try GrantRecord.validate(extraMinutes: override, bedtimeDelayMinutes: 0)
        }
        let workspace = Workspace(location)
        let key = try workspace.requireParentKey()
        let store = try workspace.openStore()
        guard let request = try store.read({ try RequestTable.find(id: requestID, $0) }) else {
            throw CLIError(RequestError.unknown(id: requestID).description, .invalidArguments)
        }
        guard request.status == .pending else {
            throw CLIError(RequestError.alreadyAnswered(id: requestID, status: request.status).description, .invalidArguments)
        }
        let (policy, _) = try workspace.currentPolicy(of: request.user)
        let now = Workspace.now()
        let minutes = override ?? request.minutes
        // What blocked the child when they asked decides what lifts it (`ExtraTime.plan`).
        let schedule = try workspace.savedDay(of: request.user, policy: policy, now: now).schedule
        let plan = try ExtraTime.plan(
            for: request.cause, app: request.app, minutes: minutes, user: request.user, schedule: schedule, now: now)
        // One transaction: the request is answered only if the grant was published.
        let recordID = try translatingRequestErrors {
            try store.write { db in
                try RequestTable.answer(id: requestID, status: .approved, minutes: minutes, by: key.id, now: now, db)
                return try workspace.publishGrant(
                    user: request.user, date: plan.date, extraMinutes: plan.extraMinutes,
                    bedtimeDelayMinutes: plan.bedtimeDelayMinutes, requestId: requestID, now: now, lift: plan.lift)
            }
        }
        workspace.announceGrant(
            "approved request \(requestID): granted \(request.user) \(plan.words) (record \(recordID))",
            user: request.user, date: plan.date, extraMinutes: plan.extraMinutes, bedtimeDelayMinutes: plan.bedtimeDelayMinutes,
            id: recordID, requestId: requestID, json: json, lift: plan.lift)
    }
}

struct Deny: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Deny a child's request for more time.")

    @OptionGroup var location: LocationOptions
    @Argument(help: "The request's id (see curfew requests).") var id: String

    func run() throws {
        let requestID = try parseRequestID(id)
        let workspace = Workspace(location)
        let key = try workspace.requireParentKey()
        let store = try workspace.openStore()
        let request = try translatingRequestErrors {
            try store.write { db in
                try RequestTable.answer(id: requestID, status: .denied, minutes: nil, by: key.id, now: Workspace.now(), db)
            }
        }
        Output.line(
            "denied request \(requestID) (\(request.user) asked for \(TimeAllowance.format(minutes: request.minutes)))")
    }
}

/// `curfew grant --json` and `curfew approve --json`: what the grant record says and what it lifts
/// (the lift's fields only when it has them), then what was done, for people.
struct GrantJSON: Encodable {
    var user: String
    var date: String
    var extraMinutes: Int
    var bedtimeDelayMinutes: Int
    var record: String
    var requestId: Int64?
    var lift: GrantLift
    var message: String

    enum CodingKeys: String, CodingKey { case user, date, extraMinutes, bedtimeDelayMinutes, record, requestId, message }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(user, forKey: .user)
        try container.encode(date, forKey: .date)
        try container.encode(extraMinutes, forKey: .extraMinutes)
        try container.encode(bedtimeDelayMinutes, forKey: .bedtimeDelayMinutes)
        try container.encode(record, forKey: .record)
        try container.encode(requestId, forKey: .requestId)
        try lift.encode(to: encoder)
        try container.encode(message, forKey: .message)
    }
}
