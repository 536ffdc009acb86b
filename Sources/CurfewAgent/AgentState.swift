import CurfewCore
import CurfewLinux
import Synchronization

/// What the agent's threads share: the policies in force, the sessions logind reported, and each
/// managed user's figures for today. Every access goes through one lock; nothing blocks inside it.
public final class AgentState: Sendable {
    public struct LiveUser: Sendable, Equatable {
        public var day: LocalDate
        /// Milliseconds used today by app, `""` = screen time (stored plus not yet flushed).
        public var totals: [String: Int64]
        public var running: Set<String>
        public var counting: Bool
        /// The session whose idle or locked hint is not believed because an app is busy (the tracker's
        /// `weighClaims`): counted, and under `lock` not taken for locked.
        public var claimIgnored: String? = nil
        /// Screen time of the same day on the family's other computers, when the user's policy makes
        /// the daily limit count every computer (`limitScope` all-computers); else 0.
        public var otherComputers: Int64 = 0
        /// Screen time on this computer from Monday through yesterday, when the policy has a weekly
        /// budget (else 0).
        public var weekBeforeToday: Int64 = 0
        /// Screen time since the last pause of a break's length.
        public var breakClock = BreakClock()

        /// The screen time the daily limit counts, in milliseconds.
        public var screenForLimit: Int64 { (totals[UsageKey.screen] ?? 0) + otherComputers }

        /// The figures a decision takes: today's, the week's and the break's.
        public var scheduleUsage: ScheduleUsage {
            ScheduleUsage(
                daySeconds: screenForLimit / 1000, weekSeconds: (weekBeforeToday + screenForLimit) / 1000,
                continuousSeconds: breakClock.continuousSeconds, pauseSeconds: breakClock.pauseSeconds)
        }
    }

    /// Something to tell a child: on their terminals and as a desktop notification.
    public struct ChildMessage: Sendable, Equatable {
        /// What the message is about: desktop notifications of one kind replace each other while
        /// they wait (`DesktopNotifications`).
        public enum Kind: String, Sendable, Hashable {
            case warning, lockout, appStopped = "app-stopped", answer, other
        }

        public var user: String
        public var summary: String
        public var body: String
        /// freedesktop urgency: 0 low, 1 normal, 2 critical.
        public var urgency: UInt8
        public var kind: Kind

        public init(user: String, summary: String, body: String, urgency: UInt8 = 1, kind: Kind = .other) {
            self.user = user
            self.summary = summary
            self.body = body
            self.urgency = urgency
            self.kind = kind
        }
    }

    /// Screen time on the family's other computers on one local day.
    struct DayUsage: Sendable, Equatable {
        var day: LocalDate
        var milliseconds: Int64
    }

    /// A user's budget of `login-refused` events, and the refusals not recorded since the last one
    /// that was.
    struct RefusalRecord: Sendable {
        var budget: EventBudget
        var unrecorded: Int
    }

    struct Contents: Sendable {
        var policies: [String: Policy] = [:]
        var adjustments: [String: [LocalDate: DayAdjustment]] = [:]
        /// Minutes children took without asking (`curfew extend`), per user and local day.
        var selfService: [String: [LocalDate: Int]] = [:]
        var outbox: [ChildMessage] = []
        var versions: [String: Int] = [:]
        /// nil while logind is not available.
        var sessions: [LoginSession]? = nil
        var sessionsChanged = true
        var sleeping = false
        var live: [String: LiveUser] = [:]
        /// Other computers' screen time per user, for one local day each.
        var otherComputers: [String: DayUsage] = [:]
        var stopping = false
        /// A child asked for more time since the enforcer last looked (it then watches for the answer).
        var requestFiled = false
        /// Users whose break a parent ended (a grant that `endsBreak`) since the tracker last looked.
        var breaksEnded: Set<String> = []
        /// Per managed user: the budget of `login-refused` events, and refusals not recorded since the last.
        var loginRefusals: [String: RefusalRecord] = [:]
    }

    /// A child at bedtime can run `su` to themself in a loop: 20 refusals are recorded at once, then
    /// one a minute; the next one recorded says how many were not.
    static let loginRefusalBurst = 20
    static let loginRefusalRefillMilliseconds: Int64 = 60_000

    /// Whether this refused login of `user` is recorded (and logged); if so, how many refusals before
    /// it were not. `monotonic` in milliseconds.
    public func admitLoginRefusal(of user: String, monotonic: Int64) -> Int? {
        contents.withLock { contents in
            var entry =
                contents.loginRefusals[user]
                ?? RefusalRecord(
                    budget: EventBudget(capacity: Self.loginRefusalBurst, refillMilliseconds: Self.loginRefusalRefillMilliseconds, now: monotonic),
                    unrecorded: 0)
            defer { contents.loginRefusals[user] = entry }
            guard entry.budget.take(now: monotonic) else {
                entry.unrecorded += 1
                return nil
            }
            let before = entry.unrecorded
            entry.unrecorded = 0
            return before
        }
    }

    let contents = Mutex(Contents())

    /// Readable when something the tracker acts on changed: policies, grants, sessions, sleep, other
    /// computers' usage. The tracker sleeps on it (with the process connector) while nobody it
    /// manages is active, instead of ticking.
    public let trackerWake = EventSignal()
    /// Readable when something the enforcer acts on changed: the above, the live figures, a message
    /// to deliver. The enforcer sleeps on it between the moments its schedules name.
    public let enforcerWake = EventSignal()

    /// Readable when a child's status may have changed (anything above, or the live figures): the
    /// socket polls it only while a child watches their status, so otherwise it wakes nobody.
    public let watchWake = EventSignal()

    /// Wakes both loops.
    func changed() {
        trackerWake.signal()
        enforcerWake.signal()
        watchWake.signal()
    }

    public init() {}

    public var policies: [String: Policy] { contents.withLock { $0.policies } }

    public func setPolicies(_ policies: [String: Policy], versions: [String: Int]) {
        let same = contents.withLock { contents in
            let same = contents.policies == policies && contents.versions == versions
            contents.policies = policies
            contents.versions = versions
            return same
        }
        if !same { changed() }
    }

    /// Extra time granted, per user and local day: parents' grants plus what children took under their
    /// allowance.
    public var adjustments: [String: [LocalDate: DayAdjustment]] { contents.withLock { $0.mergedAdjustments } }

    /// Sets the minutes `user` took without asking, per local day.
    public func setSelfService(of user: String, _ minutes: [LocalDate: Int]) {
        let same = contents.withLock { contents in
            let same = (contents.selfService[user] ?? [:]) == minutes
            contents.selfService[user] = minutes.isEmpty ? nil : minutes
            return same
        }
        if !same { changed() }
    }

    public func setAdjustments(_ adjustments: [String: [LocalDate: DayAdjustment]]) {
        let same = contents.withLock { contents in
            let same = contents.adjustments == adjustments
            contents.adjustments = adjustments
            return same
        }
        if !same { changed() }
    }

    /// The schedule a user is enforced by: policy, zone and grants.
    public func schedule(of user: String, systemZone: ZoneRules) -> Schedule? {
        contents.withLock { contents in
            contents.policies[user].map {
                Schedule(policy: $0, zone: Schedule.zone(for: $0, system: systemZone), adjustments: contents.mergedAdjustments[user] ?? [:])
            }
        }
    }

    /// Queues a message for a child; the enforcer delivers it.
    /// Messages waiting for the enforcer; more are dropped, oldest first (it takes them every 200 ms).
    static let maxOutbox = 256

    public func post(_ message: ChildMessage) {
        contents.withLock {
            if $0.outbox.count >= Self.maxOutbox { $0.outbox.removeFirst() }
            $0.outbox.append(message)
        }
        enforcerWake.signal()
    }

    public func takeMessages() -> [ChildMessage] {
        contents.withLock {
            let messages = $0.outbox
            $0.outbox = []
            return messages
        }
    }

    public func version(of user: String) -> Int? { contents.withLock { $0.versions[user] } }

    public func setSessions(_ sessions: [LoginSession]?) {
        let same = contents.withLock { contents in
            let same = contents.sessions == sessions
            contents.sessions = sessions
            contents.sessionsChanged = true
            return same
        }
        if !same { changed() }
    }

    public var sessions: [LoginSession]? { contents.withLock { $0.sessions } }

    public func setSleeping(_ sleeping: Bool) {
        let same = contents.withLock { contents in
            let same = contents.sleeping == sleeping
            contents.sleeping = sleeping
            return same
        }
        if !same { changed() }
    }
    public var sleeping: Bool { contents.withLock { $0.sleeping } }

    /// The tracker's figures. The enforcer is woken when they changed in more than the time used:
    /// used time grows at most as fast as the clock, so the enforcer's own timers, which assume it
    /// does, already wake it for the next warning or the limit (then the tick's figures tell).
    public func setLive(_ live: [String: LiveUser]) {
        let (same, sameMinutes) = contents.withLock { contents in
            let same =
                contents.live.count == live.count
                && live.allSatisfy { user, figures in
                    guard var old = contents.live[user] else { return false }
                    old.totals = figures.totals
                    return old == figures
                }
            // Watchers see figures in whole minutes: a new minute of any total is news to them.
            let sameMinutes = live.allSatisfy { user, figures in
                let old = contents.live[user]?.totals ?? [:]
                return figures.totals.allSatisfy { app, milliseconds in (old[app] ?? 0) / 60_000 == milliseconds / 60_000 }
            }
            contents.live = live
            return (same, sameMinutes)
        }
        if !same { enforcerWake.signal() }
        if !same || !sameMinutes { watchWake.signal() }
    }
    public func live(of user: String) -> LiveUser? { contents.withLock { $0.live[user] } }

    /// A parent ended `user`'s break: their stretch starts again now, in the figures the enforcer reads
    /// at once and in the tracker's own (which it takes with `takeBreaksEnded`).
    public func endBreak(of user: String) {
        contents.withLock { contents in
            contents.live[user]?.breakClock.endBreak()
            contents.breaksEnded.insert(user)
        }
        changed()
    }

    /// The users whose break a parent ended since the last call.
    public func takeBreaksEnded() -> Set<String> {
        contents.withLock { contents in
            defer { contents.breaksEnded = [] }
            return contents.breaksEnded
        }
    }

    /// Other computers' screen time of `user` on `day` (their latest usage summaries).
    public func setOtherComputers(_ user: String, day: LocalDate, milliseconds: Int64) {
        let same = contents.withLock { contents in
            let usage = DayUsage(day: day, milliseconds: milliseconds)
            defer { contents.otherComputers[user] = usage }
            return contents.otherComputers[user] == usage
        }
        if !same { changed() }
    }

    public func otherComputers(of user: String, on day: LocalDate) -> Int64 {
        contents.withLock { contents in
            contents.otherComputers[user].flatMap { $0.day == day ? $0.milliseconds : nil } ?? 0
        }
    }

    /// A child's time request was stored: the enforcer looks for the parent's answer from now on.
    public func noteRequestFiled() {
        contents.withLock { $0.requestFiled = true }
        enforcerWake.signal()
    }

    /// Whether a request was filed since the last call.
    public func takeRequestFiled() -> Bool {
        contents.withLock { contents in
            defer { contents.requestFiled = false }
            return contents.requestFiled
        }
    }

    /// Set once on shutdown; every thread loop checks it.
    public func stop() {
        contents.withLock { $0.stopping = true }
        changed()
    }
    public var isStopping: Bool { contents.withLock { $0.stopping } }
}

extension AgentState.Contents {
    /// Grants and self-service minutes together, as schedules take them.
    var mergedAdjustments: [String: [LocalDate: DayAdjustment]] {
        guard !selfService.isEmpty else { return adjustments }
        var merged = adjustments
        for (user, days) in selfService {
            for (day, minutes) in days { merged[user, default: [:]][day, default: DayAdjustment()].extraMinutes += minutes }
        }
        return merged
    }
}
