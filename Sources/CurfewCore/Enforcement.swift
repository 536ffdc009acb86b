/// What one managed user used today, as the agent knows it at one instant.
public struct DayUsage: Sendable, Equatable {
    /// Screen time counted today, in seconds.
    public var screenSeconds: Int64
    /// Each app's time today, in seconds.
    public var appSeconds: [String: Int64]
    /// Screen time this week, today included (for a weekly budget); nil: unknown, taken as today's.
    public var weekSeconds: Int64? = nil
    /// Screen time since the last pause of at least the break's length (for breaks).
    public var continuousSeconds: Int64 = 0
    /// How long no screen time has counted up to now.
    public var pauseSeconds: Int64 = 0

    public init(
        screenSeconds: Int64, appSeconds: [String: Int64] = [:], weekSeconds: Int64? = nil, continuousSeconds: Int64 = 0,
        pauseSeconds: Int64 = 0
    ) {
        self.screenSeconds = screenSeconds
        self.appSeconds = appSeconds
        self.weekSeconds = weekSeconds
        self.continuousSeconds = continuousSeconds
        self.pauseSeconds = pauseSeconds
    }

    /// The figures `Schedule.decide` needs.
    public var scheduleUsage: ScheduleUsage {
        ScheduleUsage(
            daySeconds: screenSeconds, weekSeconds: weekSeconds, continuousSeconds: continuousSeconds,
            pauseSeconds: pauseSeconds)
    }
}

/// Why an app is stopped; `message` is what the child is told.
public enum StopReason: Sendable, Equatable, Hashable {
    /// A parent blocked the app.
    case blocked
    /// The app's own daily limit is used up.
    case appLimit(minutes: Int)
    /// Use is not allowed now (bedtime or the day's limit) and the lockout is `apps`.
    case lockout(UseState)

    public var word: String {
        switch self {
        case .blocked: "blocked"
        case .appLimit: "app-limit"
        case .lockout: "lockout"
        }
    }

    public func message(app: String) -> String {
        switch self {
        case .blocked: "\(app) was stopped: a parent blocked it"
        case .appLimit(let minutes):
            "\(app) was stopped: its daily limit of \(TimeAllowance.format(minutes: minutes)) is used up"
        case .lockout(.bedtime): "\(app) was stopped: it is bedtime"
        case .lockout(.downtime): "\(app) was stopped: it is downtime"
        case .lockout(.breakTime): "\(app) was stopped: it is time for a break"
        case .lockout(.weekLimitReached): "\(app) was stopped: this week's screen time is used up"
        case .lockout: "\(app) was stopped: today's screen time is used up"
        }
    }
}

/// What to do with a user's sessions.
public enum SessionAction: String, Sendable, Equatable {
    case none
    /// End every session (TerminateSession, then KillUser) and refuse logins.
    case logout
    /// Lock every session, and lock again after an unlock.
    case lock
}

/// What a warning is about: the day's limit, bedtime, or one app's limit.
public enum WarningSubject: Sendable, Hashable, Comparable {
    case dailyLimit
    case bedtime
    case app(String)
    /// A downtime window, by name.
    case downtime(String)
    case weeklyLimit
    case breakTime

    public var word: String {
        switch self {
        case .dailyLimit: "daily-limit"
        case .bedtime: "bedtime"
        case .app: "app-limit"
        case .downtime: "downtime"
        case .weeklyLimit: "weekly-limit"
        case .breakTime: "break"
        }
    }
}

/// The agent's plan for one user at one instant: whether use is allowed, what to do with their
/// sessions, which running apps to stop and why, and how long each warning subject has left.
public struct EnforcementPlan: Sendable, Equatable {
    public var decision: Decision
    public var sessionAction: SessionAction
    /// Running apps to stop, by name.
    public var stopApps: [String: StopReason]
    /// Seconds left before each subject blocks something, for subjects that can run out.
    public var countdowns: [WarningSubject: Int64]
    /// The lockout in force (by cause: `bedtimeLockout` at bedtime and downtime); nil while allowed.
    public var lockout: Lockout? = nil
    /// Seconds until use is blocked by a cause whose lockout ends or locks sessions (`logout`, `lock`):
    /// 0 while one is in force; nil when none is known to come. A cause whose lockout lets the session
    /// go on (`network` at bedtime, say) does not count, nor do app limits.
    public var sessionEndsIn: Int64? = nil

    public var blocked: Bool { decision.state != .allowed }
    /// Whether the user's network traffic is to be dropped (loopback excepted): the `network` lockout.
    public var networkOff: Bool { lockout == .network }
}

/// The enforcement rules (docs/design.md), with no I/O: the agent passes the schedule (policy, zone and grants),
/// the instant, today's usage and the apps running.
public enum Enforcement {
    /// - Parameters:
    ///   - running: the user's running apps (catalog names, else executable basenames), plumbing excluded.
    ///   - tracked: the subset of `running` that the `apps` lockout stops: catalog apps and apps with a
    ///     rule. Shells and unknown programs are not stopped by the lockout (a blocked or limited app
    ///     always is).
    public static func plan(
        schedule: Schedule, now instant: Instant, usage: DayUsage, running: Set<String>, tracked: Set<String>
    ) -> EnforcementPlan {
        // Counted from the whole second, as the decision's instants are.
        let now = Instant(seconds: instant.seconds)
        let policy = schedule.policy
        let decision = schedule.decide(now: instant, usage: usage.scheduleUsage)
        var stop: [String: StopReason] = [:]
        var countdowns: [WarningSubject: Int64] = [:]

        for rule in policy.apps {
            switch rule.rule {
            case .block:
                if running.contains(rule.app) { stop[rule.app] = .blocked }
            case .limit(let ruleMinutes):
                // Extra time a parent gave the app today raises its limit.
                let minutes = schedule.appLimitMinutes(rule.app, on: decision.date) ?? ruleMinutes
                let left = Int64(minutes) * 60 - (usage.appSeconds[rule.app] ?? 0)
                if left <= 0 {
                    if running.contains(rule.app) { stop[rule.app] = .appLimit(minutes: minutes) }
                } else if running.contains(rule.app) {
                    countdowns[.app(rule.app)] = left
                }
            case .allow:
                break
            }
        }

        var action = SessionAction.none
        if policy.monitorsOnly {
            // Monitor only: not even blocked or limited apps are stopped.
            stop = [:]
        }
        let lockout = policy.lockout(in: decision.state)
        // For the warnings and for the belt (`sessionEndsIn`): looked up once.
        let untilBedtime = schedule.secondsUntilBedtime(from: instant)
        if decision.state == .allowed {
            // Whichever blocks first is the one the child is warned about.
            let limitLeft = decision.limitRemainingSeconds
            var candidates: [(WarningSubject, Int64)] = []
            if let untilBedtime { candidates.append((.bedtime, untilBedtime)) }
            if let limitLeft { candidates.append((.dailyLimit, limitLeft)) }
            if let change = decision.nextChange {
                switch change.state {
                case .downtime: candidates.append((.downtime(change.window ?? ""), (change.at - now).wholeSeconds))
                case .weekLimitReached: candidates.append((.weeklyLimit, (change.at - now).wholeSeconds))
                case .breakTime: candidates.append((.breakTime, (change.at - now).wholeSeconds))
                default: break
                }
            }
            // Ties go to the subject listed first (bedtime before the day's limit, as before).
            if let first = candidates.min(by: { $0.1 < $1.1 }) { countdowns[first.0] = first.1 }
        } else if let lockout {
            switch lockout {
            case .logout: action = .logout
            case .lock: action = .lock
            case .apps:
                for app in tracked where running.contains(app) && policy.rule(for: app) != .allow && stop[app] == nil {
                    stop[app] = .lockout(decision.state)
                }
            case .none:
                // Monitor only: counted, warned and reported; nothing is stopped.
                break
            case .network:
                // The agent drops the user's traffic (`networkOff`); the session and its apps go on.
                break
            }
        }
        return EnforcementPlan(
            decision: decision, sessionAction: action, stopApps: stop, countdowns: countdowns, lockout: lockout,
            sessionEndsIn: sessionEndsIn(schedule: schedule, decision: decision, untilBedtime: untilBedtime, now: now))
    }

    /// `EnforcementPlan.sessionEndsIn`: now when the block in force ends sessions; else the first of the
    /// causes that will, each by the lockout of its own cause: bedtime (by the clock), the day's and the
    /// week's budget (at the earliest, after that much more use), and the next change the decision
    /// knows of (a downtime window, a break).
    static func sessionEndsIn(schedule: Schedule, decision: Decision, untilBedtime: Int64?, now: Instant) -> Int64? {
        func endsSessions(_ state: UseState) -> Bool {
            switch schedule.policy.lockout(in: state) {
            case .logout?, .lock?: true
            default: false
            }
        }
        if decision.state != .allowed && endsSessions(decision.state) { return 0 }
        var candidates: [Int64] = []
        if endsSessions(.bedtime), let untilBedtime { candidates.append(untilBedtime) }
        if endsSessions(.limitReached) {
            if let left = decision.limitRemainingSeconds { candidates.append(left) }
            if let left = decision.weekRemainingSeconds { candidates.append(left) }
        }
        if let change = decision.nextChange, change.state != .allowed, endsSessions(change.state) {
            candidates.append((change.at - now).wholeSeconds)
        }
        return candidates.min().map { max(0, $0) }
    }
}

extension Schedule {
    /// Seconds from `now` until the next bedtime window starts, if one starts within two days and
    /// `now` is not already in one.
    public func secondsUntilBedtime(from instant: Instant) -> Int64? {
        // Counted from the whole second, as the schedule's instants are.
        let now = Instant(seconds: instant.seconds)
        if isBedtime(at: now) { return nil }
        let today = zone.localTime(at: now).date
        var starts: [Instant] = []
        for offset in -1...2 {
            if let window = bedtimeInterval(startingOn: today.adding(days: offset)), window.start > now {
                starts.append(window.start)
            }
        }
        return starts.min().map { ($0 - now).wholeSeconds }
    }
}

extension EnforcementPlan {
    /// What a child is told when the `network` lockout cuts their traffic, one line in local clock
    /// time with a relative day: `it is bedtime: the internet is off until tomorrow at 07:00` (the child is
    /// told it with what to do, `ChildMessages.networkOff`; the audit log keeps it as it is).
    public func networkOffMessage(now: Instant, zone: ZoneRules) -> String {
        let reason = decision.blockedReason
        guard let again = decision.allowedAgainAt, again > now else { return "\(reason): the internet is off" }
        return "\(reason): the internet is off \(ChildMessages.until(again, now: now, zone: zone))"
    }
}

/// One warning to deliver.
public struct Warning: Sendable, Equatable {
    public var subject: WarningSubject
    /// The threshold crossed, in seconds before the subject runs out.
    public var thresholdSeconds: Int64
    /// What is actually left.
    public var remainingSeconds: Int64
    /// Part of the final countdown (the last minute).
    public var isCountdown: Bool { thresholdSeconds <= 60 }

    public var message: String {
        let left = Warning.describe(seconds: remainingSeconds)
        switch subject {
        case .dailyLimit: return "\(left) of screen time left today"
        case .bedtime: return "bedtime starts in \(left)"
        case .downtime(let name): return "downtime \(name) starts in \(left)"
        case .weeklyLimit: return "\(left) of screen time left this week"
        case .breakTime: return "a break starts in \(left)"
        case .app(let app): return "\(left) of \(app) left today"
        }
    }

    /// "15 minutes", "1 minute", "30 seconds".
    public static func describe(seconds: Int64) -> String {
        if seconds >= 60 {
            let minutes = (seconds + 30) / 60
            return minutes == 1 ? "1 minute" : "\(minutes) minutes"
        }
        return seconds == 1 ? "1 second" : "\(seconds) seconds"
    }
}

/// Which warnings are due, each sent once per threshold, and again after time was added and runs out
/// again. Thresholds are the policy's warning minutes plus a final countdown at 60, 30 and 10 seconds.
///
/// No day is kept: a new day brings a new limit, so its countdown starts above the thresholds and
/// arms them again, exactly as extra time does; a bedtime after midnight is not warned twice.
public struct WarningTracker: Sendable, Equatable {
    public static let countdownSeconds: [Int64] = [60, 30, 10]

    /// Thresholds already warned about, per subject, while the subject has not gone back above them.
    var sent: [WarningSubject: Set<Int64>] = [:]
    /// What was left of each subject at the last look: a threshold is warned about only when the time
    /// left passed it since then, so a policy change that adds a warning already behind the child
    /// (or edits anything else) sends nothing again.
    var lastLeft: [WarningSubject: Int64] = [:]

    public init() {}

    public static func thresholds(warnMinutes: [Int]) -> [Int64] {
        Array(Set(warnMinutes.map { Int64($0) * 60 } + countdownSeconds)).sorted(by: >)
    }

    /// The warnings due now. When several thresholds were crossed at once (the agent started late, or
    /// a limit was lowered) only the nearest is sent and the others count as sent. A subject missing
    /// from `countdowns` (run out, blocked, the app not running) keeps what was sent.
    public mutating func update(countdowns: [WarningSubject: Int64], warnMinutes: [Int]) -> [Warning] {
        let thresholds = WarningTracker.thresholds(warnMinutes: warnMinutes)
        var due: [Warning] = []
        for (subject, left) in countdowns.sorted(by: { $0.key < $1.key }) where left > 0 {
            // Time was added: thresholds now in the future are armed again.
            var subjectSent = (sent[subject] ?? []).filter { $0 >= left }
            let crossed = thresholds.filter { left <= $0 }
            // Crossed since the last look (all of them the first time a subject is seen).
            let fresh = lastLeft[subject].map { previous in crossed.filter { $0 < previous } } ?? crossed
            if let nearest = fresh.filter({ !subjectSent.contains($0) }).min() {
                due.append(Warning(subject: subject, thresholdSeconds: nearest, remainingSeconds: left))
            }
            subjectSent.formUnion(crossed)
            sent[subject] = subjectSent
            lastLeft[subject] = left
        }
        return due
    }
}
