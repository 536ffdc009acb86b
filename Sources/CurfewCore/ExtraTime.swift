/// What keeps a child from using the computer, or one app, at the moment they ask for more time.
public enum UseBlock: Sendable, Equatable, Hashable {
    case dailyLimit
    case weeklyLimit
    case bedtime
    /// A downtime window, by name.
    case downtime(String)
    case breakTime
    /// An app's own daily limit, by app name.
    case appLimit(String)

    /// How it is stored and sent: `daily-limit`, `weekly-limit`, `bedtime`, `downtime:school`,
    /// `break`, `app-limit:minecraft`.
    public var code: String {
        switch self {
        case .dailyLimit: "daily-limit"
        case .weeklyLimit: "weekly-limit"
        case .bedtime: "bedtime"
        case .downtime(let name): "downtime:\(name)"
        case .breakTime: "break"
        case .appLimit(let app): "app-limit:\(app)"
        }
    }

    public init?(code: String) {
        switch code {
        case "daily-limit": self = .dailyLimit
        case "weekly-limit": self = .weeklyLimit
        case "bedtime": self = .bedtime
        case "break": self = .breakTime
        default:
            if code.hasPrefix("downtime:"), code.count > 9 {
                self = .downtime(String(code.dropFirst(9)))
            } else if code.hasPrefix("app-limit:"), code.count > 10 {
                self = .appLimit(String(code.dropFirst(10)))
            } else {
                return nil
            }
        }
    }

    /// In words for a parent: `daily limit`, `weekly budget`, `bedtime`, `downtime school`, `break`,
    /// `minecraft's limit`.
    public var words: String {
        switch self {
        case .dailyLimit: "daily limit"
        case .weeklyLimit: "weekly budget"
        case .bedtime: "bedtime"
        case .downtime(let name): "downtime \(name)"
        case .breakTime: "break"
        case .appLimit(let app): "\(app)'s limit"
        }
    }
}

/// What a grant of extra time lifts, worked out from the block the child asked about: more screen
/// time (a limit, the week's budget), a later bedtime or downtime window that day, the break ended,
/// or more time for one app. Pure: the schedule (policy, zone, grants so far), the instant and the
/// usage are passed in.
public enum ExtraTime {
    /// The block in force for a child at `now`, from the decision the enforcer makes with the same
    /// schedule and usage (`Enforcement.plan`): the clock's or the budget's block first, then `app`'s
    /// own limit when it is used up. nil when nothing blocks.
    public static func block(schedule: Schedule, now: Instant, usage: DayUsage, app: String?) -> UseBlock? {
        let decision = schedule.decide(now: now, usage: usage.scheduleUsage)
        switch decision.state {
        case .bedtime: return .bedtime
        case .downtime: return .downtime(decision.window ?? "")
        case .limitReached: return .dailyLimit
        case .weekLimitReached: return .weeklyLimit
        case .breakTime: return .breakTime
        case .allowed: break
        }
        if let app, let limit = schedule.appLimitMinutes(app, on: decision.date),
            usage.appSeconds[app, default: 0] >= Int64(limit) * 60
        {
            return .appLimit(app)
        }
        return nil
    }

    /// A grant that lifts a block, before it is signed: the day it is for, its amounts, and what it
    /// gives in words (`granted kid until 21:30 (bedtime moved)`).
    public struct Plan: Sendable, Equatable {
        public var date: LocalDate
        public var extraMinutes: Int = 0
        public var bedtimeDelayMinutes: Int = 0
        public var lift = GrantLift()
        /// What was lifted, in words for the parent, after `granted <user> `.
        public var words: String

        public init(
            date: LocalDate, extraMinutes: Int = 0, bedtimeDelayMinutes: Int = 0, lift: GrantLift = GrantLift(), words: String
        ) {
            self.date = date
            self.extraMinutes = extraMinutes
            self.bedtimeDelayMinutes = bedtimeDelayMinutes
            self.lift = lift
            self.words = words
        }
    }

    /// The grant that lifts `block` (as recorded when the child asked) with `minutes` at `now`.
    ///
    /// - Bedtime or a downtime window still in force: its start moves so that it begins `minutes`
    ///   from now (the window ends earlier or not at all that day when that is past its end).
    /// - A break (with breaks in the policy): the break ends now.
    /// - An app's limit, or a request that names an app with a limit: `minutes` more for that app.
    /// - A daily limit or weekly budget, a clock block that is over by now, or nothing: `minutes` more
    ///   screen time today (counted against the week too).
    ///
    /// Throws when nothing would be lifted: a day with neither a daily limit nor a weekly budget
    /// gains nothing from more screen time, an app without a limit from more app time.
    public static func plan(
        for block: UseBlock?, app: String?, minutes: Int, user: String, schedule: Schedule, now instant: Instant
    ) throws(PolicyError) -> Plan {
        // The schedule's windows are in whole seconds, and so is now here (a delay is counted from it).
        let now = Instant(seconds: instant.seconds)
        guard (1...GrantRecord.maxMinutes).contains(minutes) else {
            throw PolicyError("extra time must be between 1 and \(GrantRecord.maxMinutes) minutes, got \(minutes)")
        }
        let zone = schedule.zone
        let today = zone.localTime(at: now).date
        switch block {
        case .bedtime?:
            for night in [today, today.adding(days: -1)] {
                guard let window = schedule.bedtimeInterval(startingOn: night), window.start <= now, now < window.end else {
                    continue
                }
                let already = schedule.adjustments[night]?.bedtimeDelayMinutes ?? 0
                let delay = Int(((now - window.start).wholeSeconds + 59) / 60) + minutes
                try GrantRecord.validate(extraMinutes: 0, bedtimeDelayMinutes: already + delay)
                let until = window.start + .seconds(delay * 60)
                let words =
                    until >= window.end
                    ? "no bedtime tonight (it would have ended \(ChildMessages.when(window.end, now: instant, zone: zone)))"
                    : "until \(ChildMessages.when(until, now: instant, zone: zone)) (bedtime moved)"
                return Plan(date: night, bedtimeDelayMinutes: delay, words: words)
            }
        case .downtime(let name)?:
            for day in [today, today.adding(days: -1)] {
                for interval in schedule.downtimeIntervals(startingOn: day) where interval.window.name == name {
                    guard interval.start <= now, now < interval.end else { continue }
                    let already = schedule.adjustments[day]?.downtimeDelayMinutes[name] ?? 0
                    let delay = Int(((now - interval.start).wholeSeconds + 59) / 60) + minutes
                    guard already + delay <= GrantRecord.maxMinutes else {
                        throw PolicyError(
                            "downtime delay must be between 1 and \(GrantRecord.maxMinutes) minutes, got \(already + delay)")
                    }
                    let until = interval.start + .seconds(delay * 60)
                    let words =
                        until >= interval.end
                        ? "no more downtime \(name) today (it would have ended at \(ChildMessages.when(interval.end, now: instant, zone: zone)))"
                        : "until \(ChildMessages.when(until, now: instant, zone: zone)) (downtime \(name) moved)"
                    return Plan(
                        date: day, lift: GrantLift(downtime: GrantLift.Window(window: name, delayMinutes: delay)), words: words)
                }
            }
        case .breakTime?:
            if let breaks = schedule.policy.breaks {
                return Plan(
                    date: today, lift: GrantLift(endsBreak: true),
                    words: "the end of the break now (the next one after \(TimeAllowance.format(minutes: breaks.afterMinutes)) of use)")
            }
        case .appLimit(let limited)?:
            return try appPlan(limited, minutes: minutes, user: user, schedule: schedule, today: today)
        case .dailyLimit?, .weeklyLimit?, nil:
            break
        }
        if let app, schedule.appLimitMinutes(app, on: today) != nil {
            return try appPlan(app, minutes: minutes, user: user, schedule: schedule, today: today)
        }
        let week = schedule.weekLimitMinutes(on: today)
        guard schedule.limitMinutes(on: today) != nil || week != nil else {
            throw PolicyError("\(user) has no daily limit or weekly budget today; more screen time would lift nothing")
        }
        return Plan(
            date: today, extraMinutes: minutes,
            words: "\(TimeAllowance.format(minutes: minutes)) more screen time today" + (week == nil ? "" : " (this week's budget too)"))
    }

    static func appPlan(_ app: String, minutes: Int, user: String, schedule: Schedule, today: LocalDate) throws(PolicyError) -> Plan {
        guard schedule.appLimitMinutes(app, on: today) != nil else {
            throw PolicyError("\(app) has no daily limit for \(user); more time for it would lift nothing")
        }
        return Plan(
            date: today, lift: GrantLift(app: GrantLift.App(app: app, minutes: minutes)),
            words: "\(TimeAllowance.format(minutes: minutes)) more of \(app) today")
    }

    /// What a child is told when a grant applies, with until when: `a parent gave you 30m more screen
    /// time today`, `a parent moved bedtime: you may use the computer until 21:30`. `schedule` already
    /// holds the grant. nil for a grant of another day (told when it comes, by status).
    public static func childMessage(_ grant: GrantSummary, schedule: Schedule, now: Instant) -> String? {
        let zone = schedule.zone
        let today = zone.localTime(at: now).date
        var parts: [String] = []
        if grant.extraMinutes > 0, grant.date == today {
            parts.append("a parent gave you \(TimeAllowance.format(minutes: grant.extraMinutes)) more screen time today")
        }
        if grant.bedtimeDelayMinutes > 0, let bedtime = schedule.bedtimeInterval(startingOn: grant.date), now < bedtime.end,
            grant.date >= today.adding(days: -1)
        {
            parts.append("a parent moved bedtime: you may use the computer until \(ChildMessages.when(bedtime.start, now: now, zone: zone))")
        } else if grant.bedtimeDelayMinutes > 0, grant.date >= today.adding(days: -1),
            schedule.bedtimeWindow(startingOn: grant.date) != nil
        {
            parts.append("a parent lifted bedtime tonight")
        }
        if let window = grant.lift.downtime, grant.date >= today.adding(days: -1) {
            if let interval = schedule.downtimeIntervals(startingOn: grant.date).first(where: { $0.window.name == window.window }),
                now < interval.end
            {
                parts.append(
                    "a parent moved downtime \(window.window): you may use the computer until \(ChildMessages.when(interval.start, now: now, zone: zone))")
            } else {
                parts.append("a parent lifted downtime \(window.window) for today")
            }
        }
        if grant.lift.endsBreak, grant.date == today { parts.append("a parent ended your break") }
        if let app = grant.lift.app, grant.date == today {
            parts.append("a parent gave you \(TimeAllowance.format(minutes: app.minutes)) more of \(app.app) today")
        }
        guard !parts.isEmpty else { return nil }
        return parts.joined(separator: "; ")
    }
}
