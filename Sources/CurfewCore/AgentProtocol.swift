/// The agent's socket protocol, one JSON object per line each way, as the agent and the CLI both speak
/// it: the request and reply types are shared, so neither builds or reads the other's JSON by hand.
///
/// In: `{"command": "status", "user": "kid"}`, `{"command": "check-login", "user": "kid", "service": "su"}`,
/// `{"command": "request", "minutes": 30, "reason": "homework"}`.
/// Out: `{"ok": true, ...}` with `status`, `allowed` and `message`, or `request`; or
/// `{"ok": false, "error": "not-permitted", "message": "..."}`.
public enum AgentRequest: Sendable, Equatable {
    /// Today's figures of `user` (nil: the caller's own account).
    case status(user: String?)
    /// May `user` log in now, for PAM's `service`?
    case checkLogin(user: String, service: String?)
    /// A child asks for more time (for one app, when `app` names it).
    case request(minutes: Int64, reason: String?, app: String? = nil)
    /// A child takes the extra time their policy's allowance gives without asking.
    case extend
    /// Today's figures of `user` (nil: the caller), sent again whenever they change, on a connection
    /// that stays open.
    case watch(user: String?)
    /// The policy in force for `user` (nil: the caller) and the extra time granted, for `curfew schedule`.
    case rules(user: String?)
    /// Saved usage and events of `user` (nil: the caller) from `from` through `to`, for `curfew report`.
    case usage(user: String?, from: LocalDate, to: LocalDate)
    /// A parent, at the child's screen, approves `minutes` more today for the caller by typing the
    /// parent's PIN (the indicator's "A parent approves … here…"). The line carries the PIN: it is
    /// never logged, and the agent keeps only whether it was right.
    case approvePIN(pin: String, minutes: Int64)

    /// The most days one `usage` request covers.
    public static let maxUsageDays = 92

    /// The line the CLI sends (canonical JSON).
    public var line: String { JSONValueEncoder().value(of: self).canonicalString }

    /// A line as the agent reads it from any caller: every field checked, the error names the rule.
    public static func parse(_ line: String) -> Result<AgentRequest, AgentError> {
        do {
            return .success(try JSONValueDecoder().decode(AgentRequest.self, from: line))
        } catch let error as AgentError {
            return .failure(error)
        } catch {
            return .failure(AgentError(.badRequest, "the request must be a JSON object with a command"))
        }
    }
}

extension AgentRequest: Codable {
    enum CodingKeys: String, CodingKey { case command, user, service, minutes, reason, app, from, to, pin }

    /// The command word on the wire.
    var command: String {
        switch self {
        case .status: "status"
        case .checkLogin: "check-login"
        case .request: "request"
        case .extend: "extend"
        case .watch: "watch"
        case .rules: "rules"
        case .usage: "usage"
        case .approvePIN: "approve-pin"
        }
    }

    /// Only the fields the command has; an unset `user` or `service` is left out, an unset `reason` is
    /// `null`, `app` only when set (an agent from before it reads the line it always read).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(command, forKey: .command)
        switch self {
        case .status(let user), .watch(let user), .rules(let user):
            try container.encodeIfPresent(user, forKey: .user)
        case .checkLogin(let user, let service):
            try container.encode(user, forKey: .user)
            try container.encodeIfPresent(service, forKey: .service)
        case .request(let minutes, let reason, let app):
            try container.encode(minutes, forKey: .minutes)
            try container.encode(reason, forKey: .reason)
            try container.encodeIfPresent(app, forKey: .app)
        case .extend:
            break
        case .usage(let user, let from, let to):
            try container.encodeIfPresent(user, forKey: .user)
            try container.encode("\(from)", forKey: .from)
            try container.encode("\(to)", forKey: .to)
        case .approvePIN(let pin, let minutes):
            try container.encode(pin, forKey: .pin)
            try container.encode(minutes, forKey: .minutes)
        }
    }

    /// Every field checked against its rule; a broken one throws an `AgentError` that names the rule
    /// (what `parse` answers the caller), anything else is not a request at all.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let command = try container.decode(String.self, forKey: .command)
        /// The field as `T`, nil when absent or `null`; of another kind, refused with `rule`.
        func optional<T: Decodable>(_ type: T.Type, _ key: CodingKeys, _ rule: @autoclosure () -> String) throws -> T? {
            do { return try container.decodeIfPresent(type, forKey: key) } catch { throw AgentError(.badRequest, rule()) }
        }
        switch command {
        case "status", "watch", "rules", "usage":
            let user = try optional(String.self, .user, "\"user\" must be a string")
            switch command {
            case "status": self = .status(user: user)
            case "watch": self = .watch(user: user)
            case "rules": self = .rules(user: user)
            default:
                let rule = "usage needs \"from\" and \"to\" dates (YYYY-MM-DD)"
                guard let fromText = try? optional(String.self, .from, rule), let from = try? LocalDate.parse(fromText),
                    let toText = try? optional(String.self, .to, rule), let to = try? LocalDate.parse(toText)
                else { throw AgentError(.badRequest, rule) }
                guard from <= to, to.daysSinceEpoch - from.daysSinceEpoch < Self.maxUsageDays else {
                    throw AgentError(.badRequest, "usage covers 1 to \(Self.maxUsageDays) days, got \(from) to \(to)")
                }
                self = .usage(user: user, from: from, to: to)
            }
        case "check-login":
            guard let user = try? container.decode(String.self, forKey: .user) else { throw AgentError(.badRequest, "check-login needs a user") }
            // A service that is not a string is as good as none: the verdict does not depend on it.
            self = .checkLogin(user: user, service: try? container.decodeIfPresent(String.self, forKey: .service))
        case "request":
            guard let minutes = try? container.decode(Int64.self, forKey: .minutes) else {
                throw AgentError(.badRequest, "\"minutes\" must be a whole number")
            }
            let app = try optional(String.self, .app, "\"app\" must be a string")
            if let app {
                do { try Policy.validateAppName(app) } catch { throw AgentError(.badRequest, error.message) }
            }
            let reason = try optional(String.self, .reason, "\"reason\" must be a string")
            self = .request(minutes: minutes, reason: reason?.isEmpty == false ? reason : nil, app: app)
        case "extend":
            self = .extend
        case "approve-pin":
            // Bounded before anything is hashed: a PIN longer than the rule allows is refused by its
            // shape (it cannot be right), without counting as a try.
            guard let pin = try? container.decode(String.self, forKey: .pin), pin.utf8.count <= PINRules.maxDigits else {
                throw AgentError(.badRequest, "\"pin\" must be a string; \(PINRules.rule)")
            }
            guard let minutes = try? container.decode(Int64.self, forKey: .minutes), PINRules.minutes.contains(Int(clamping: minutes)) else {
                throw AgentError(
                    .badRequest,
                    "\"minutes\" must be a whole number from \(PINRules.minutes.lowerBound) to \(PINRules.minutes.upperBound)")
            }
            self = .approvePIN(pin: pin, minutes: minutes)
        default:
            throw AgentError(.badRequest, "unknown command \(quoted(command))")
        }
    }
}

/// A refusal by the agent: a code for programs, words for people.
public struct AgentError: Error, Sendable, Equatable {
    public var code: AgentRefusal
    public var message: String

    public init(_ code: AgentRefusal, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `{"ok": false, "error": code, "message": ...}`
    public var reply: JSONValue { AgentReply(refusal: self).json }
}

/// Why the agent said no: a code for programs (the CLI's exit status), words for people beside it.
public enum AgentRefusal: String, Sendable, Codable {
    case badRequest = "bad-request"
    case notPermitted = "not-permitted"
    case unknownUser = "unknown-user"
    case busy
    /// A watch of the caller's login session is open already (or as many as an account may have).
    case alreadyWatching = "already-watching"
    /// `approve-pin`: the PIN typed is not the parent's (the try was recorded).
    case wrongPIN = "wrong-pin"
    /// `approve-pin`: no parent PIN is set on this computer (`curfew pin set`).
    case noPIN = "no-pin"
    /// `approve-pin`: the child's tries are used up for now (`PINRules.maxTries` per window).
    case tooManyTries = "too-many-tries"
    case failed
}

/// The agent's answer to any request: the agent encodes it (`json`, sent in canonical form), the CLI
/// and the indicator decode it. A `--json` command prints what the agent sent (the line parsed as
/// `JSONValue`, which keeps its order). Only the fields of the request answered are present.
public struct AgentReply: Sendable, Equatable, Codable {
    /// What `request` answers: the request as recorded (the form `curfew requests --json` prints).
    public struct RecordedRequest: Sendable, Equatable, Codable {
        public var id: Int64
        public var user: String
        public var minutes: Int
        public var reason: String?
        public var createdMs: Int64
        /// `pending`, `approved`, `denied`.
        public var status: String
        public var answeredMs: Int64?
        public var grantedMinutes: Int?
        public var answeredBy: String?
        /// What blocked the child when they asked (`UseBlock.code`); nil when nothing did.
        public var cause: String?
        public var app: String?

        public init(
            id: Int64, user: String, minutes: Int, reason: String?, createdMs: Int64, status: String, answeredMs: Int64?,
            grantedMinutes: Int?, answeredBy: String?, cause: String?, app: String?
        ) {
            self.id = id
            self.user = user
            self.minutes = minutes
            self.reason = reason
            self.createdMs = createdMs
            self.status = status
            self.answeredMs = answeredMs
            self.grantedMinutes = grantedMinutes
            self.answeredBy = answeredBy
            self.cause = cause
            self.app = app
        }

        enum CodingKeys: String, CodingKey {
            case id, user, minutes, reason, createdMs, status, answeredMs, grantedMinutes, answeredBy, cause, app
        }

        /// Every field present, `null` when unset, in this order.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(user, forKey: .user)
            try container.encode(minutes, forKey: .minutes)
            try container.encode(reason, forKey: .reason)
            try container.encode(createdMs, forKey: .createdMs)
            try container.encode(status, forKey: .status)
            try container.encode(answeredMs, forKey: .answeredMs)
            try container.encode(grantedMinutes, forKey: .grantedMinutes)
            try container.encode(answeredBy, forKey: .answeredBy)
            try container.encode(cause, forKey: .cause)
            try container.encode(app, forKey: .app)
        }
    }

    /// What `approve-pin` answers: the grant record the right PIN published.
    public struct PINGrant: Sendable, Equatable, Codable {
        public var record: String
        public var date: String
        public var minutes: Int64

        public init(record: String, date: String, minutes: Int64) {
            self.record = record
            self.date = date
            self.minutes = minutes
        }
    }

    /// What `rules` answers per day: the extra time granted (`DayAdjustment` with its date).
    public struct DayExtra: Sendable, Equatable, Codable {
        public var date: LocalDate
        public var adjustment: DayAdjustment

        public init(date: LocalDate, adjustment: DayAdjustment) {
            self.date = date
            self.adjustment = adjustment
        }

        enum CodingKeys: String, CodingKey { case date, extraMinutes, bedtimeDelayMinutes, downtimeDelayMinutes, appExtraMinutes }

        /// The named delays only when some were granted (a child's `curfew schedule` shows windows
        /// where they are that day), each sorted by name.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode("\(date)", forKey: .date)
            try container.encode(adjustment.extraMinutes, forKey: .extraMinutes)
            try container.encode(adjustment.bedtimeDelayMinutes, forKey: .bedtimeDelayMinutes)
            for (key, named) in [(CodingKeys.downtimeDelayMinutes, adjustment.downtimeDelayMinutes), (.appExtraMinutes, adjustment.appExtraMinutes)]
            where !named.isEmpty {
                var entries = container.nestedContainer(keyedBy: JSONKey.self, forKey: key)
                for (name, minutes) in named.sorted(by: { $0.key < $1.key }) { try entries.encode(minutes, forKey: JSONKey(name)) }
            }
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let text = try container.decode(String.self, forKey: .date)
            guard let date = try? LocalDate.parse(text) else {
                throw DecodingError.dataCorruptedError(forKey: .date, in: container, debugDescription: "not a date: \(text)")
            }
            self.date = date
            adjustment = DayAdjustment(
                extraMinutes: try container.decodeIfPresent(Int.self, forKey: .extraMinutes) ?? 0,
                bedtimeDelayMinutes: try container.decodeIfPresent(Int.self, forKey: .bedtimeDelayMinutes) ?? 0,
                appExtraMinutes: try container.decodeIfPresent([String: Int].self, forKey: .appExtraMinutes) ?? [:],
                downtimeDelayMinutes: try container.decodeIfPresent([String: Int].self, forKey: .downtimeDelayMinutes) ?? [:])
        }
    }

    /// What `usage` answers per event: `{"time", "kind", "message", "data"}` (`time` in milliseconds
    /// since the epoch, `data` null when none).
    public struct SavedEvent: Sendable, Equatable, Codable {
        public var time: Instant
        public var kind: String
        public var message: String
        public var data: JSONValue?

        public init(time: Instant, kind: String, message: String, data: JSONValue?) {
            self.time = time
            self.kind = kind
            self.message = message
            self.data = data
        }

        enum CodingKeys: String, CodingKey { case time, kind, message, data }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            time = Instant(milliseconds: try container.decode(Int64.self, forKey: .time))
            kind = try container.decode(String.self, forKey: .kind)
            message = try container.decode(String.self, forKey: .message)
            data = try container.decodeIfPresent(JSONValue.self, forKey: .data)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(time.milliseconds, forKey: .time)
            try container.encode(kind, forKey: .kind)
            try container.encode(message, forKey: .message)
            try container.encode(data ?? .null, forKey: .data)
        }
    }

    public var ok: Bool
    public var error: AgentRefusal?
    public var message: String?
    /// check-login
    public var allowed: Bool?
    /// status
    public var status: StatusReport?
    /// request
    public var request: RecordedRequest?
    /// extend
    public var extended: SelfExtensionUse?
    /// approve-pin
    public var grant: PINGrant?
    /// rules: the policy in force (a document, kept as `JSONValue`) and every day's extra time.
    public var policy: JSONValue?
    public var adjustments: [DayExtra]?
    /// usage: the saved buckets (`[day, hour, app, ms]`) and events of the days asked.
    public var rows: [UsageRow]?
    public var events: [SavedEvent]?

    enum CodingKeys: String, CodingKey {
        case ok, error, message, allowed, status, request, extended = "extension", grant, policy, adjustments, rows, events
    }

    public init(
        ok: Bool = true, message: String? = nil, allowed: Bool? = nil, status: StatusReport? = nil, request: RecordedRequest? = nil,
        extended: SelfExtensionUse? = nil, grant: PINGrant? = nil, policy: JSONValue? = nil, adjustments: [DayExtra]? = nil,
        rows: [UsageRow]? = nil, events: [SavedEvent]? = nil
    ) {
        self.ok = ok
        self.message = message
        self.allowed = allowed
        self.status = status
        self.request = request
        self.extended = extended
        self.grant = grant
        self.policy = policy
        self.adjustments = adjustments
        self.rows = rows
        self.events = events
    }

    /// `{"ok": false, "error": code, "message": ...}`
    public init(refusal: AgentError) {
        ok = false
        error = refusal.code
        message = refusal.message
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        ok = try container.decode(Bool.self, forKey: .ok)
        // A refusal this CLI does not know yet reads as a failure, not as a broken reply.
        error = try container.decodeIfPresent(String.self, forKey: .error).map { AgentRefusal(rawValue: $0) ?? .failed }
        message = try container.decodeIfPresent(String.self, forKey: .message)
        allowed = try container.decodeIfPresent(Bool.self, forKey: .allowed)
        status = try container.decodeIfPresent(StatusReport.self, forKey: .status)
        request = try container.decodeIfPresent(RecordedRequest.self, forKey: .request)
        extended = try container.decodeIfPresent(SelfExtensionUse.self, forKey: .extended)
        grant = try container.decodeIfPresent(PINGrant.self, forKey: .grant)
        policy = try container.decodeIfPresent(JSONValue.self, forKey: .policy)
        adjustments = try container.decodeIfPresent([DayExtra].self, forKey: .adjustments)
        rows = try container.decodeIfPresent([UsageRow].self, forKey: .rows)
        events = try container.decodeIfPresent([SavedEvent].self, forKey: .events)
    }

    /// A line from the agent, read with Core's strict parser (the indicator uses no Foundation: its
    /// JSONDecoder would keep megabytes resident in every session); nil when it is not a reply.
    public init?(line: String) {
        guard let reply = try? JSONValueDecoder().decode(AgentReply.self, from: line) else { return nil }
        self = reply
    }

    /// The reply as the agent sends it (its `canonicalString` is the line).
    public var json: JSONValue { JSONValueEncoder().value(of: self) }
}

/// On the socket and in `--json` as its name (`limit-reached`); a name this version does not know is
/// not a status it can read.
extension UseState: Codable {}

/// `curfew status` as the agent sends it (`UserStatus.json`) and the CLI reads it.
public struct StatusReport: Sendable, Equatable, Codable {
    public struct Change: Sendable, Equatable, Codable {
        public var at: String
        public var state: UseState

        public init(at: String, state: UseState) {
            self.at = at
            self.state = state
        }
    }

    public struct App: Sendable, Equatable, Codable {
        public var app: String
        public var seconds: Int64
        public var running: Bool
    }

    /// One app rule of the policy with today's use: `minecraft 40 min of 1 h`, `steam blocked`.
    public struct Rule: Sendable, Equatable, Codable {
        public var app: String
        /// `block`, `limit` or `allow`.
        public var rule: String
        /// Today's limit, extra time included.
        public var limitMinutes: Int?
        public var seconds: Int64
        /// Extra time a parent gave the app today (part of `limitMinutes`); nil when none.
        public var extraMinutes: Int?

        public init(app: String, rule: String, limitMinutes: Int?, seconds: Int64, extraMinutes: Int? = nil) {
            self.extraMinutes = extraMinutes
            self.app = app
            self.rule = rule
            self.limitMinutes = limitMinutes
            self.seconds = seconds
        }

        enum CodingKeys: String, CodingKey { case app, rule, limitMinutes, seconds, extraMinutes }

        /// `limitMinutes` is `null` when the app has no limit; `extraMinutes` only when there is some.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(app, forKey: .app)
            try container.encode(rule, forKey: .rule)
            try container.encode(limitMinutes, forKey: .limitMinutes)
            try container.encode(seconds, forKey: .seconds)
            try container.encodeIfPresent(extraMinutes, forKey: .extraMinutes)
        }
    }

    /// A blocked period of today in local clock times (`21:00`-`24:00`), bedtime or a downtime window.
    public struct Window: Sendable, Equatable, Codable {
        public var start: String
        public var end: String
        /// `bedtime` or `downtime`.
        public var state: String
        /// The downtime window's name.
        public var window: String?

        public init(start: String, end: String, state: String, window: String?) {
            self.start = start
            self.end = end
            self.state = state
            self.window = window
        }
    }

    /// The extra time a child may take without asking (`curfew extend`).
    public struct Allowance: Sendable, Equatable, Codable {
        public var minutes: Int
        public var perWeek: Int

        public init(minutes: Int, perWeek: Int) {
            self.minutes = minutes
            self.perWeek = perWeek
        }
    }

    public var user: String
    public var date: String
    public var timezone: String
    public var screenSeconds: Int64
    public var otherComputersSeconds: Int64?
    public var limitMinutes: Int?
    public var extraMinutes: Int
    public var bedtimeDelayMinutes: Int
    public var remainingSeconds: Int64?
    public var state: UseState
    public var reason: String?
    public var nextChange: Change?
    public var allowedAgainAt: String?
    public var counting: Bool?
    public var apps: [App]
    /// Absent from an older agent's status.
    public var rules: [Rule]?
    public var blocked: [Window]?
    public var selfExtension: Allowance?
    /// How much later a parent moved each downtime window that starts today; nil when none.
    public var downtimeDelayMinutes: [String: Int]? = nil
    /// The downtime window in force, when the state is downtime.
    public var window: String? = nil
    /// The exception of the policy that applies today, by its name.
    public var exception: String? = nil
    /// The weekly budget, with the week's use and what is left of it; nil when the policy has none.
    public var weekLimitMinutes: Int? = nil
    public var weekSeconds: Int64? = nil
    public var weekRemainingSeconds: Int64? = nil

    public init(
        user: String, date: String, timezone: String, screenSeconds: Int64, otherComputersSeconds: Int64?, limitMinutes: Int?,
        extraMinutes: Int, bedtimeDelayMinutes: Int, remainingSeconds: Int64?, state: UseState, reason: String?, nextChange: Change?,
        allowedAgainAt: String?, counting: Bool?, apps: [App], rules: [Rule]?, blocked: [Window]?, selfExtension: Allowance?
    ) {
        self.user = user
        self.date = date
        self.timezone = timezone
        self.screenSeconds = screenSeconds
        self.otherComputersSeconds = otherComputersSeconds
        self.limitMinutes = limitMinutes
        self.extraMinutes = extraMinutes
        self.bedtimeDelayMinutes = bedtimeDelayMinutes
        self.remainingSeconds = remainingSeconds
        self.state = state
        self.reason = reason
        self.nextChange = nextChange
        self.allowedAgainAt = allowedAgainAt
        self.counting = counting
        self.apps = apps
        self.rules = rules
        self.blocked = blocked
        self.selfExtension = selfExtension
    }

    enum CodingKeys: String, CodingKey {
        case user, date, timezone, screenSeconds, otherComputersSeconds, limitMinutes, extraMinutes, bedtimeDelayMinutes
        case remainingSeconds, state, reason, downtimeDelayMinutes, window, exception, weekLimitMinutes, weekSeconds
        case weekRemainingSeconds, nextChange, allowedAgainAt, counting, apps, rules, blocked, selfExtension
    }

    /// The fields in this order; those readers have always had are present, `null` when unset; those
    /// added later (other computers, moved downtime windows, breaks and the weekly budget, the
    /// allowance) only when they apply.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(user, forKey: .user)
        try container.encode(date, forKey: .date)
        try container.encode(timezone, forKey: .timezone)
        try container.encode(screenSeconds, forKey: .screenSeconds)
        try container.encodeIfPresent(otherComputersSeconds, forKey: .otherComputersSeconds)
        try container.encode(limitMinutes, forKey: .limitMinutes)
        try container.encode(extraMinutes, forKey: .extraMinutes)
        try container.encode(bedtimeDelayMinutes, forKey: .bedtimeDelayMinutes)
        try container.encode(remainingSeconds, forKey: .remainingSeconds)
        try container.encode(state, forKey: .state)
        try container.encode(reason, forKey: .reason)
        if let delays = downtimeDelayMinutes, !delays.isEmpty {
            var named = container.nestedContainer(keyedBy: JSONKey.self, forKey: .downtimeDelayMinutes)
            for (window, minutes) in delays.sorted(by: { $0.key < $1.key }) { try named.encode(minutes, forKey: JSONKey(window)) }
        }
        try container.encodeIfPresent(window, forKey: .window)
        try container.encodeIfPresent(exception, forKey: .exception)
        if let week = weekLimitMinutes {
            try container.encode(week, forKey: .weekLimitMinutes)
            try container.encode(weekSeconds ?? 0, forKey: .weekSeconds)
            try container.encode(weekRemainingSeconds ?? 0, forKey: .weekRemainingSeconds)
        }
        try container.encode(nextChange, forKey: .nextChange)
        try container.encode(allowedAgainAt, forKey: .allowedAgainAt)
        try container.encode(counting, forKey: .counting)
        try container.encode(apps, forKey: .apps)
        try container.encode(rules ?? [], forKey: .rules)
        try container.encode(blocked ?? [], forKey: .blocked)
        try container.encodeIfPresent(selfExtension, forKey: .selfExtension)
    }

    /// The status as the agent sends it and `curfew status --json` prints it.
    public var json: JSONValue { JSONValueEncoder().value(of: self) }
}

/// What `extend` answers: the extra time taken, the day it is for, and the week's uses.
public struct SelfExtensionUse: Sendable, Equatable, Codable {
    public var minutes: Int
    public var date: String
    /// Uses this week, this one included.
    public var used: Int
    public var perWeek: Int
    /// Today's limit with the extra time, in minutes; nil when unlimited.
    public var limitMinutes: Int?

    public init(minutes: Int, date: String, used: Int, perWeek: Int, limitMinutes: Int?) {
        self.minutes = minutes
        self.date = date
        self.used = used
        self.perWeek = perWeek
        self.limitMinutes = limitMinutes
    }

    enum CodingKeys: String, CodingKey { case minutes, date, used, perWeek, limitMinutes }

    /// `limitMinutes` is sent as `null` when unlimited.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(minutes, forKey: .minutes)
        try container.encode(date, forKey: .date)
        try container.encode(used, forKey: .used)
        try container.encode(perWeek, forKey: .perWeek)
        try container.encode(limitMinutes, forKey: .limitMinutes)
    }

    /// `curfew extend --json` and the `extension` of the agent's reply.
    public var json: JSONValue { JSONValueEncoder().value(of: self) }

    /// For the child: `15m more today (1 of 3 this week); today's limit is now 2h15m`.
    public var message: String {
        "\(TimeAllowance.format(minutes: minutes)) more today (\(used) of \(perWeek) this week)"
            + (limitMinutes.map { "; today's limit is now \(TimeAllowance.format(minutes: $0))" } ?? "")
    }
}
