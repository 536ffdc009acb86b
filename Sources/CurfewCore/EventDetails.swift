/// The `data` of the audit log's events, one type per shape, as scripts read them from
/// `curfew events --json`: the fields in this order, `null` where readers expect a field that is
/// unset, and optional ones only when they apply.
public enum EventDetails {
    /// `warning`: what runs out (`screen`, `week`, `app`, ...), how soon, and at which threshold.
    public struct Warning: Encodable, Sendable {
        public var subject: String
        public var remainingSeconds: Int64
        public var thresholdSeconds: Int64
        /// The app, when its own limit runs out.
        public var app: String?

        public init(subject: String, remainingSeconds: Int64, thresholdSeconds: Int64, app: String?) {
            self.subject = subject
            self.remainingSeconds = remainingSeconds
            self.thresholdSeconds = thresholdSeconds
            self.app = app
        }

        /// The data of `warning`.
        public init(_ warning: CurfewCore.Warning) {
            var app: String? = nil
            if case .app(let name) = warning.subject { app = name }
            self.init(
                subject: warning.subject.word, remainingSeconds: warning.remainingSeconds, thresholdSeconds: warning.thresholdSeconds, app: app)
        }
    }

    /// `lockout`: the state that began, the lockout it brings and when use is allowed again.
    public struct Lockout: Encodable, Sendable {
        public var state: String
        public var lockout: String
        @OrNull public var allowedAgainAt: String?

        public init(state: String, lockout: String, allowedAgainAt: String?) {
            self.state = state
            self.lockout = lockout
            self.allowedAgainAt = allowedAgainAt
        }
    }

    /// `session-ended`, `session-locked`: the logind session, its terminal, and why a session under
    /// `lock` was ended instead.
    public struct Session: Encodable, Sendable {
        public var session: String
        public var tty: String?
        public var why: String?

        public init(session: String, tty: String? = nil, why: String? = nil) {
            self.session = session
            self.tty = tty
            self.why = why
        }
    }

    /// `app-stopped`: the app, why and which processes; `execDenied` when its start was refused.
    public struct AppStopped: Encodable, Sendable {
        public var app: String
        public var reason: String
        public var pids: [Int32]
        public var execDenied: Bool?

        public init(app: String, reason: String, pids: [Int32], execDenied: Bool) {
            self.app = app
            self.reason = reason
            self.pids = pids
            self.execDenied = execDenied ? true : nil
        }
    }

    /// `app-stopped` for stops only counted: how many more times the app was stopped.
    public struct AppStopsCounted: Encodable, Sendable {
        public var app: String
        public var count: Int
        public var summary = true

        public init(app: String, count: Int) {
            self.app = app
            self.count = count
        }
    }

    /// `pin-try`: whether the PIN was right (never the PIN), what it would approve and which try it was.
    public struct PINTry: Encodable, Sendable {
        public var right: Bool
        public var minutes: Int
        public var `try`: Int
        public var of: Int

        public init(right: Bool, minutes: Int, try count: Int, of maxTries: Int) {
            self.right = right
            self.minutes = minutes
            self.try = count
            self.of = maxTries
        }
    }

    /// `pin-approved`: the request the PIN answered, what it asked, what was granted, the grant record,
    /// and the minutes the PIN approved in the last 24 hours (this one included) of the day's maximum.
    public struct PINApproval: Encodable, Sendable {
        public var request: Int64
        public var asked: Int
        public var granted: Int
        public var record: String
        public var approvedInDay: Int
        public var maxPerDay: Int

        public init(request: Int64, asked: Int, granted: Int, record: String, approvedInDay: Int, maxPerDay: Int) {
            self.request = request
            self.asked = asked
            self.granted = granted
            self.record = record
            self.approvedInDay = approvedInDay
            self.maxPerDay = maxPerDay
        }
    }

    /// `extra-time-granted`: the grant record and what it gives.
    public struct Grant: Encodable, Sendable {
        public var record: String
        public var date: String
        public var minutes: Int
        public var bedtimeDelayMinutes: Int
        public var requestId: Int64?
        public var lift: GrantLift

        public init(record: String, date: String, minutes: Int, bedtimeDelayMinutes: Int, requestId: Int64?, lift: GrantLift) {
            self.record = record
            self.date = date
            self.minutes = minutes
            self.bedtimeDelayMinutes = bedtimeDelayMinutes
            self.requestId = requestId
            self.lift = lift
        }

        enum CodingKeys: String, CodingKey { case record, date, minutes, bedtimeDelayMinutes, requestId }

        /// `requestId` always (`null` when the grant answers none), then the lift's fields that are set.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(record, forKey: .record)
            try container.encode(date, forKey: .date)
            try container.encode(minutes, forKey: .minutes)
            try container.encode(bedtimeDelayMinutes, forKey: .bedtimeDelayMinutes)
            try container.encode(requestId, forKey: .requestId)
            try lift.encode(to: encoder)
        }
    }

    /// `time-requested`: the request, the minutes asked, the child's reason, what blocked them and
    /// the app (each `null` when none).
    public struct Request: Encodable, Sendable {
        public var request: Int64
        public var minutes: Int
        @OrNull public var reason: String?
        @OrNull public var cause: String?
        @OrNull public var app: String?

        public init(request: Int64, minutes: Int, reason: String?, cause: String?, app: String?) {
            self.request = request
            self.minutes = minutes
            self.reason = reason
            self.cause = cause
            self.app = app
        }
    }

    /// `self-extension`: the extra time taken without asking, the day, and the week's uses.
    public struct SelfExtension: Encodable, Sendable {
        public var request: Int64
        public var minutes: Int
        public var date: String
        public var used: Int
        public var perWeek: Int
        /// Always `null`: a child gives no reason for what the policy allows.
        @OrNull public var reason: String? = nil

        public init(request: Int64, minutes: Int, date: String, used: Int, perWeek: Int) {
            self.request = request
            self.minutes = minutes
            self.date = date
            self.used = used
            self.perWeek = perWeek
        }
    }

    /// `login-refused`: the PAM service, and the refusals only counted since the last event.
    public struct LoginRefused: Encodable, Sendable {
        public var service: String
        public var unrecordedBefore: Int?

        public init(service: String, unrecordedBefore: Int) {
            self.service = service
            self.unrecordedBefore = unrecordedBefore > 0 ? unrecordedBefore : nil
        }
    }

    /// `idle-claim-ignored`: the session, what it claimed (`idle`, `locked`) and the busy app.
    public struct IdleClaimIgnored: Encodable, Sendable {
        public var session: String
        public var claim: String
        public var app: String

        public init(session: String, claim: String, app: String) {
            self.session = session
            self.claim = claim
            self.app = app
        }
    }

    /// `clock-jump`: how far the wall clock was set, in seconds (negative: back).
    public struct ClockJump: Encodable, Sendable {
        public var seconds: Int64

        public init(seconds: Int64) { self.seconds = seconds }
    }

    /// `database-corrupt`: where the damaged database was moved.
    public struct DatabaseMoved: Encodable, Sendable {
        public var movedTo: String

        public init(movedTo: String) { self.movedTo = movedTo }
    }

    /// `network-off`, `network-on`: the account whose traffic is dropped or flows again.
    public struct Network: Encodable, Sendable {
        public var uid: UInt32

        public init(uid: UInt32) { self.uid = uid }
    }

    /// `events-summarised`: how many events were replaced by daily counts, and after how many days.
    public struct Summarised: Encodable, Sendable {
        public var count: Int
        public var retentionDays: Int

        public init(count: Int, retentionDays: Int) {
            self.count = count
            self.retentionDays = retentionDays
        }
    }

    /// `policy-loaded`, `policy-kept`, `record-missing`: the policy version concerned.
    public struct PolicyVersion: Encodable, Sendable {
        public var version: Int

        public init(version: Int) { self.version = version }
    }
}

extension AgentEvent {
    /// An event whose `data` is `details` encoded (one of `EventDetails`' types).
    public init(id: Int64? = nil, time: Instant, user: String? = nil, kind: EventKind, message: String, details: some Encodable) {
        self.init(id: id, time: time, user: user, kind: kind, message: message, data: JSONValueEncoder().value(of: details))
    }
}
