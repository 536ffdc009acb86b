/// Extra time a parent granted for one local day.
public struct DayAdjustment: Sendable, Equatable {
    /// Added to that day's limit.
    public var extraMinutes: Int
    /// Moves the start of the bedtime window that begins on that day.
    public var bedtimeDelayMinutes: Int
    /// Added to each named app's own limit that day.
    public var appExtraMinutes: [String: Int]
    /// Moves the start of each named downtime window that begins on that day.
    public var downtimeDelayMinutes: [String: Int]

    public init(
        extraMinutes: Int = 0, bedtimeDelayMinutes: Int = 0, appExtraMinutes: [String: Int] = [:],
        downtimeDelayMinutes: [String: Int] = [:]
    ) {
        self.extraMinutes = extraMinutes
        self.bedtimeDelayMinutes = bedtimeDelayMinutes
        self.appExtraMinutes = appExtraMinutes
        self.downtimeDelayMinutes = downtimeDelayMinutes
    }

    /// Whether nothing was granted.
    public var isEmpty: Bool {
        extraMinutes == 0 && bedtimeDelayMinutes == 0 && appExtraMinutes.isEmpty && downtimeDelayMinutes.isEmpty
    }
}

/// Whether a managed user may use the computer.
public enum UseState: String, Sendable, Equatable, CaseIterable {
    case allowed
    case bedtime
    /// A named downtime window.
    case downtime
    case limitReached = "limit-reached"
    /// The week's budget is used up.
    case weekLimitReached = "week-limit-reached"
    /// A forced pause after a stretch of screen time.
    case breakTime = "break"
}

/// Why a span of the day is blocked by the clock (not by usage).
public enum BlockCause: Sendable, Equatable {
    case bedtime
    /// A downtime window, by name, and the clock time it ends.
    case downtime(String, until: ClockTime)

    var state: UseState {
        switch self {
        case .bedtime: .bedtime
        case .downtime: .downtime
        }
    }
}

/// A half-open span of time `[start, end)`.
public struct Period: Sendable, Equatable {
    public var start: Instant
    public var end: Instant
    public var state: UseState
    /// The downtime window that blocks this period, when `state` is `downtime`.
    public var window: String?

    public init(start: Instant, end: Instant, state: UseState, window: String? = nil) {
        self.start = start
        self.end = end
        self.state = state
        self.window = window
    }

    /// Its length in whole seconds.
    public var seconds: Int64 { (end - start).wholeSeconds }
}

/// The figures a decision needs about use so far, which only the agent (or its database) knows.
public struct ScheduleUsage: Sendable, Equatable {
    /// Screen time counted on the local day of `now`, in seconds.
    public var daySeconds: Int64
    /// Screen time counted in the week of `now` (from Monday 00:00 in the policy's zone), today
    /// included; nil when unknown, then taken as `daySeconds`.
    public var weekSeconds: Int64?
    /// Screen time since the last pause of at least the break's length (for breaks).
    public var continuousSeconds: Int64
    /// How long no screen time has counted up to `now` (0 while it counts).
    public var pauseSeconds: Int64

    public init(daySeconds: Int64, weekSeconds: Int64? = nil, continuousSeconds: Int64 = 0, pauseSeconds: Int64 = 0) {
        self.daySeconds = daySeconds
        self.weekSeconds = weekSeconds
        self.continuousSeconds = continuousSeconds
        self.pauseSeconds = pauseSeconds
    }
}

/// A policy placed in time: its zone and the parent's grants, ready to answer "may they use it now?".
public struct Schedule: Sendable {
    public let policy: Policy
    public let zone: ZoneRules
    public let adjustments: [LocalDate: DayAdjustment]
    /// The policy's exceptions by date, for a binary search.
    private let exceptionList: [PolicyException]

    public init(policy: Policy, zone: ZoneRules, adjustments: [LocalDate: DayAdjustment] = [:]) {
        self.policy = policy
        self.zone = zone
        self.adjustments = adjustments
        self.exceptionList = policy.exceptions.sorted { $0.from < $1.from }
    }

    /// The exception covering `date`, if any.
    public func exception(on date: LocalDate) -> PolicyException? {
        var low = 0
        var high = exceptionList.count
        while low < high {
            let middle = (low + high) / 2
            if exceptionList[middle].from <= date { low = middle + 1 } else { high = middle }
        }
        guard low > 0, exceptionList[low - 1].to >= date else { return nil }
        return exceptionList[low - 1]
    }

    /// The daily limit that day before extra time: an exception's, else the weekday's.
    public func baseLimit(on date: LocalDate) -> TimeAllowance {
        exception(on: date)?.dailyLimit ?? policy.limit(on: date.weekday)
    }

    /// That day's limit in minutes including extra time, nil when unlimited.
    public func limitMinutes(on date: LocalDate) -> Int? {
        guard case .minutes(let minutes) = baseLimit(on: date) else { return nil }
        return minutes + (adjustments[date]?.extraMinutes ?? 0)
    }

    /// The week's budget in minutes as it stands on `date`: the policy's, raised by the extra time
    /// granted from that week's Monday through `date` (extra time is more time for the week too, or a
    /// grant on a day the week's budget is used up would lift nothing). nil without a weekly budget.
    public func weekLimitMinutes(on date: LocalDate) -> Int? {
        guard let week = policy.weeklyLimitMinutes else { return nil }
        guard !adjustments.isEmpty else { return week }
        var extra = 0
        var day = date.weekStart
        while day <= date {
            extra += adjustments[day]?.extraMinutes ?? 0
            day = day.adding(days: 1)
        }
        return week + extra
    }

    /// An app's own limit on `date` in minutes including extra time for it; nil when the app has no
    /// limit (no rule, `allow` or `block`).
    public func appLimitMinutes(_ app: String, on date: LocalDate) -> Int? {
        guard case .limit(let minutes)? = policy.rule(for: app) else { return nil }
        return minutes + (adjustments[date]?.appExtraMinutes[app] ?? 0)
    }

    /// The bedtime window starting on `date`: an exception's, else the weekday's.
    public func bedtimeWindow(startingOn date: LocalDate) -> BedtimeWindow? {
        if let exception = exception(on: date), let bedtime = exception.bedtime { return bedtime }
        return policy.bedtime(startingOn: date.weekday)
    }

    /// The bedtime that starts on `date`, as instants, after any delay a parent granted. nil when there
    /// is none that night, or when a DST change makes it empty.
    public func bedtimeInterval(startingOn date: LocalDate) -> (start: Instant, end: Instant)? {
        guard let window = bedtimeWindow(startingOn: date) else { return nil }
        let delay = Duration.seconds((adjustments[date]?.bedtimeDelayMinutes ?? 0) * 60)
        let start = zone.instant(date, window.start) + delay
        let end = zone.instant(window.crossesMidnight ? date.adding(days: 1) : date, window.end)
        return start < end ? (start, end) : nil
    }

    /// What a parent granted that holds on `date` at `now`: that day's grants, and a delay of last
    /// night's bedtime or of a downtime window that began yesterday when it moved that window's start
    /// past midnight and the window has not ended by `now` (it is what lets the child in after
    /// midnight, and what `status` and `schedule` should name; a window moved past its end, lifted,
    /// too). The day's own delay wins.
    public func adjustmentInForce(on date: LocalDate, now: Instant) -> DayAdjustment {
        var adjustment = adjustments[date] ?? DayAdjustment()
        let yesterday = date.adding(days: -1)
        guard let last = adjustments[yesterday] else { return adjustment }
        let midnight = zone.start(of: date)
        /// Last night's window from `start` to `end` (past midnight), moved `delay` minutes.
        func holds(_ start: ClockTime, _ end: ClockTime, delay: Int) -> Bool {
            zone.instant(yesterday, start) + .seconds(delay * 60) > midnight && now < zone.instant(date, end)
        }
        if adjustment.bedtimeDelayMinutes == 0, last.bedtimeDelayMinutes > 0, let window = bedtimeWindow(startingOn: yesterday),
            window.crossesMidnight, holds(window.start, window.end, delay: last.bedtimeDelayMinutes)
        {
            adjustment.bedtimeDelayMinutes = last.bedtimeDelayMinutes
        }
        if exception(on: yesterday)?.liftsDowntime != true {
            for window in policy.downtime where window.crossesMidnight && window.days.contains(yesterday.weekday) {
                if adjustment.downtimeDelayMinutes[window.name] == nil, let delay = last.downtimeDelayMinutes[window.name],
                    holds(window.start, window.end, delay: delay)
                {
                    adjustment.downtimeDelayMinutes[window.name] = delay
                }
            }
        }
        return adjustment
    }

    /// The downtime windows that start on `date` (none on an exception's day that lifts them), as
    /// instants; empty ones (a DST change) left out.
    public func downtimeIntervals(startingOn date: LocalDate) -> [(start: Instant, end: Instant, window: DowntimeWindow)] {
        guard !policy.downtime.isEmpty, exception(on: date)?.liftsDowntime != true else { return [] }
        let weekday = date.weekday
        var intervals: [(start: Instant, end: Instant, window: DowntimeWindow)] = []
        let delays = adjustments[date]?.downtimeDelayMinutes ?? [:]
        for window in policy.downtime where window.days.contains(weekday) {
            let start = zone.instant(date, window.start) + .seconds((delays[window.name] ?? 0) * 60)
            let end = zone.instant(window.crossesMidnight ? date.adding(days: 1) : date, window.end)
            if start < end { intervals.append((start, end, window)) }
        }
        return intervals
    }

    /// Every clock-made block that starts on `date`: bedtime, then downtime windows.
    func blocks(startingOn date: LocalDate) -> [(start: Instant, end: Instant, cause: BlockCause)] {
        var blocks: [(start: Instant, end: Instant, cause: BlockCause)] = []
        if let bedtime = bedtimeInterval(startingOn: date) { blocks.append((bedtime.start, bedtime.end, .bedtime)) }
        for interval in downtimeIntervals(startingOn: date) {
            blocks.append((interval.start, interval.end, .downtime(interval.window.name, until: interval.window.end)))
        }
        return blocks
    }

    /// One local day cut into spans at every block edge, each with the block that decides it (bedtime
    /// before downtime; among windows, the one that ends last, then by name) or nil where the clock
    /// allows use.
    struct DayPlan {
        var date: LocalDate
        var start: Instant
        var end: Instant
        var spans: [(start: Instant, end: Instant, cause: BlockCause?)]

        func span(at instant: Instant) -> (start: Instant, end: Instant, cause: BlockCause?) {
            var low = 0
            var high = spans.count
            while low < high {
                let middle = (low + high) / 2
                if spans[middle].start <= instant { low = middle + 1 } else { high = middle }
            }
            return spans[max(0, low - 1)]
        }
    }

    func dayPlan(_ date: LocalDate) -> DayPlan {
        let dayStart = zone.start(of: date)
        let dayEnd = zone.start(of: date.adding(days: 1))
        var blocks: [(start: Instant, end: Instant, cause: BlockCause)] = []
        for day in [date.adding(days: -1), date] {
            for block in self.blocks(startingOn: day) {
                let start = max(block.start, dayStart)
                let end = min(block.end, dayEnd)
                if start < end { blocks.append((start, end, block.cause)) }
            }
        }
        var edges = [dayStart, dayEnd]
        for block in blocks {
            edges.append(block.start)
            edges.append(block.end)
        }
        edges = Array(Set(edges)).sorted()
        var spans: [(start: Instant, end: Instant, cause: BlockCause?)] = []
        for (start, end) in zip(edges, edges.dropFirst()) {
            var cause: BlockCause? = nil
            var causeEnd = Instant.epoch
            for block in blocks where block.start <= start && start < block.end {
                switch (cause, block.cause) {
                case (.bedtime?, _): continue
                case (_, .bedtime): cause = .bedtime
                case (nil, _): cause = block.cause
                case (.downtime(let name, _)?, .downtime(let other, _)):
                    if block.end > causeEnd || (block.end == causeEnd && other < name) { cause = block.cause } else { continue }
                }
                causeEnd = block.end
            }
            if let last = spans.last, last.cause == cause {
                spans[spans.count - 1].end = end
            } else {
                spans.append((start, end, cause))
            }
        }
        return DayPlan(date: date, start: dayStart, end: dayEnd, spans: spans)
    }

    /// The local day from its 00:00 to the next day's 00:00 (23, 24, 24.5 or 25 hours around DST
    /// changes) as contiguous `allowed`, `bedtime` and `downtime` periods (a downtime period names
    /// its window).
    public func periods(on date: LocalDate) -> [Period] {
        dayPlan(date).spans.map { span in
            switch span.cause {
            case nil: Period(start: span.start, end: span.end, state: .allowed)
            case .bedtime: Period(start: span.start, end: span.end, state: .bedtime)
            case .downtime(let name, _): Period(start: span.start, end: span.end, state: .downtime, window: name)
            }
        }
    }

    public func isBedtime(at instant: Instant) -> Bool {
        let date = zone.localTime(at: instant).date
        for day in [date.adding(days: -1), date] {
            if let window = bedtimeInterval(startingOn: day), window.start <= instant, instant < window.end {
                return true
            }
        }
        return false
    }

    /// The state at `instant` given the screen time already used on that local day.
    public func state(at instant: Instant, usedSeconds: Int64) -> UseState {
        let plan = dayPlan(zone.localTime(at: instant).date)
        return state(cause: plan.span(at: instant).cause, date: plan.date, usage: ScheduleUsage(daySeconds: usedSeconds))
    }

    /// The state at `instant` given the day's, the week's and the break's figures.
    public func state(at instant: Instant, usage: ScheduleUsage) -> UseState {
        let plan = dayPlan(zone.localTime(at: instant).date)
        var figures = usage
        if let breaks = policy.breaks, figures.pauseSeconds >= Int64(breaks.lengthMinutes) * 60 { figures.continuousSeconds = 0 }
        return state(cause: plan.span(at: instant).cause, date: plan.date, usage: figures)
    }

    /// The state given the clock's block (if any) and the usage so far, blocks by the clock first.
    func state(cause: BlockCause?, date: LocalDate, usage: ScheduleUsage) -> UseState {
        if let cause { return cause.state }
        if let limit = limitMinutes(on: date), usage.daySeconds >= Int64(limit) * 60 { return .limitReached }
        if let week = weekLimitMinutes(on: date), (usage.weekSeconds ?? usage.daySeconds) >= Int64(week) * 60 {
            return .weekLimitReached
        }
        if let breaks = policy.breaks, usage.continuousSeconds >= Int64(breaks.afterMinutes) * 60,
            usage.pauseSeconds < Int64(breaks.lengthMinutes) * 60
        {
            return .breakTime
        }
        return .allowed
    }

    /// `decide(now:usage:)` with only the day's screen time known.
    public func decide(now: Instant, usedSeconds: Int64, horizonDays: Int = 14) -> Decision {
        decide(now: now, usage: ScheduleUsage(daySeconds: usedSeconds), horizonDays: horizonDays)
    }

    /// Answers "may they use it now, why not, how long is left, and when does that change?".
    ///
    /// The next change is found by walking forward through day boundaries, block edges, and the
    /// moments a limit, the week's budget or a break runs out, assuming the user keeps using the
    /// computer whenever allowed, for at most `horizonDays` days. A break ends once no screen time
    /// has counted for its length; any blocked time counts as a pause.
    public func decide(now instant: Instant, usage: ScheduleUsage, horizonDays: Int = 14) -> Decision {
        // The schedule's instants (block edges, the decision's) are whole seconds.
        let now = Instant(seconds: instant.seconds)
        var plan = dayPlan(zone.localTime(at: now).date)
        let today = plan.date
        let breakAfter = policy.breaks.map { Int64($0.afterMinutes) * 60 }
        let breakLength = policy.breaks.map { Int64($0.lengthMinutes) * 60 } ?? 0
        var figures = usage
        if figures.weekSeconds == nil { figures.weekSeconds = figures.daySeconds }
        if breakAfter != nil, figures.pauseSeconds >= breakLength { figures.continuousSeconds = 0 }

        let nowSpan = plan.span(at: now)
        let state = self.state(cause: nowSpan.cause, date: today, usage: figures)
        let limit = limitMinutes(on: today)
        let limitLeft = limit.map { max(0, Int64($0) * 60 - usage.daySeconds) }
        let weekLimit = weekLimitMinutes(on: today)
        let weekLeft = weekLimit.map { max(0, Int64($0) * 60 - figures.weekSeconds!) }

        var cursor = now
        var current = state
        var nextChange: Decision.Change? = nil
        var allowedAgain: Instant? = state == .allowed ? now : nil
        let horizon = zone.start(of: today.adding(days: horizonDays + 1))
        var steps = 0
        while cursor < horizon, nextChange == nil || allowedAgain == nil, steps < 10_000 {
            steps += 1
            let span = plan.span(at: cursor)
            var end = span.end
            if current == .allowed {
                if let limit = limitMinutes(on: plan.date) { end = min(end, cursor + .seconds(Int64(limit) * 60 - figures.daySeconds)) }
                if let week = weekLimitMinutes(on: plan.date) { end = min(end, cursor + .seconds(Int64(week) * 60 - figures.weekSeconds!)) }
                if let breakAfter { end = min(end, cursor + .seconds(breakAfter - figures.continuousSeconds)) }
                let used = (end - cursor).wholeSeconds
                figures.daySeconds += used
                figures.weekSeconds! += used
                figures.continuousSeconds += used
                figures.pauseSeconds = 0
            } else {
                if current == .breakTime { end = min(end, cursor + .seconds(breakLength - figures.pauseSeconds)) }
                figures.pauseSeconds += (end - cursor).wholeSeconds
                if breakAfter != nil, figures.pauseSeconds >= breakLength { figures.continuousSeconds = 0 }
            }
            cursor = end
            if cursor >= plan.end {
                plan = dayPlan(plan.date.adding(days: 1))
                figures.daySeconds = 0
                if plan.date.weekday == .mon { figures.weekSeconds = 0 }
            }
            let cause = plan.span(at: cursor).cause
            let next = self.state(cause: cause, date: plan.date, usage: figures)
            if next != current {
                if nextChange == nil {
                    var window: String? = nil
                    if case .downtime(let name, _)? = cause { window = name }
                    nextChange = Decision.Change(at: cursor, state: next, window: window)
                }
                if next == .allowed && allowedAgain == nil { allowedAgain = cursor }
                current = next
            }
        }

        let remaining: Int64?
        switch state {
        case .allowed:
            // From `allowed` the next change is always to a blocked state. It comes before both the
            // limit and bedtime when a new day starts with no time at all (a weekday limit of 0).
            let untilBedtime = secondsUntilBedtime(from: instant)
            remaining = [limitLeft, weekLeft, untilBedtime, nextChange.map { ($0.at - now).wholeSeconds }].compactMap { $0 }.min()
        default:
            remaining = 0
        }
        var window: String? = nil
        var until: ClockTime? = nil
        if case .downtime(let name, let end)? = nowSpan.cause {
            window = name
            until = end
        }
        if state == .breakTime, let again = allowedAgain {
            let second = zone.localTime(at: again).secondOfDay
            until = ClockTime(hour: second / 3600 % 24, minute: second / 60 % 60)
        }
        return Decision(
            state: state, date: today, limitMinutes: limit, usedSeconds: usage.daySeconds,
            limitRemainingSeconds: limitLeft, remainingSeconds: remaining, nextChange: nextChange,
            allowedAgainAt: allowedAgain, weekLimitMinutes: weekLimit,
            weekUsedSeconds: weekLimit == nil ? nil : (usage.weekSeconds ?? usage.daySeconds),
            weekRemainingSeconds: weekLeft, window: window, blockedUntil: until,
            breakMinutes: policy.breaks?.lengthMinutes, exception: exception(on: today).map(\.range))
    }
}

/// The answer of `Schedule.decide`; its instants are whole seconds.
public struct Decision: Sendable, Equatable {
    public struct Change: Sendable, Equatable {
        public var at: Instant
        public var state: UseState
        /// The downtime window that starts then, when `state` is `downtime`.
        public var window: String? = nil
    }

    public var state: UseState
    /// The local day the figures are for.
    public var date: LocalDate
    /// Today's limit including extra time; nil when unlimited.
    public var limitMinutes: Int?
    public var usedSeconds: Int64
    /// Screen time left under today's limit; nil when unlimited.
    public var limitRemainingSeconds: Int64?
    /// Seconds of use left before use is blocked by the limit or bedtime, whichever comes first;
    /// nil when neither ever blocks.
    public var remainingSeconds: Int64?
    /// The next instant the state changes, assuming continuous use while allowed.
    public var nextChange: Change?
    /// When use is next allowed: `now` if it is allowed now; nil if not within the horizon.
    public var allowedAgainAt: Instant?
    /// The week's budget in minutes; nil without one.
    public var weekLimitMinutes: Int? = nil
    /// Screen time this week so far, when the policy has a weekly budget.
    public var weekUsedSeconds: Int64? = nil
    /// Screen time left this week; nil without a weekly budget.
    public var weekRemainingSeconds: Int64? = nil
    /// The downtime window in force, when `state` is `downtime`.
    public var window: String? = nil
    /// The local clock time the downtime window or break in force ends.
    public var blockedUntil: ClockTime? = nil
    /// The break's length, when the policy has breaks.
    public var breakMinutes: Int? = nil
    /// The exception in force today (`2026-12-24` or `2026-12-21..2027-01-03`).
    public var exception: String? = nil

    /// `reason`, with words for a decision that gives none: what a lockout, a refusal or a message
    /// says when something blocks use.
    public var blockedReason: String { reason ?? "use is not allowed now" }

    /// Why use is not allowed, in words for the child.
    public var reason: String? {
        switch state {
        case .allowed: nil
        case .bedtime: "it is bedtime"
        case .downtime: "downtime: \(window ?? "a window")" + (blockedUntil.map { " until \($0)" } ?? "")
        case .weekLimitReached: "this week's limit of \(TimeAllowance.format(minutes: weekLimitMinutes ?? 0)) is used up"
        case .breakTime:
            "time for a \(TimeAllowance.format(minutes: breakMinutes ?? 0)) break" + (blockedUntil.map { " until \($0)" } ?? "")
        case .limitReached:
            limitMinutes == 0
                ? "no screen time is allowed today" : "today's limit of \(TimeAllowance.format(minutes: limitMinutes ?? 0)) is used up"
        }
    }
}
