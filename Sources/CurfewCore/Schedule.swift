/// Extra time a parent granted for one local day.
public struct DayAdjustment: Sendable, Equatable {
    /// Added to that day's limit.
    public var extraMinutes: Int
    /// Moves the start of the bedtime window that begins on that day.
    public var bedtimeDelayMinutes: Int

    public init(extraMinutes: Int = 0, bedtimeDelayMinutes: Int = 0) {
        self.extraMinutes = extraMinutes
        self.bedtimeDelayMinutes = bedtimeDelayMinutes
    }
}

/// Whether a managed user may use the computer.
public enum UseState: String, Sendable, Equatable, CaseIterable {
    case allowed
    case bedtime
    case limitReached = "limit-reached"
}

/// A half-open span of time `[start, end)` in seconds since the epoch.
public struct Period: Sendable, Equatable {
    public var start: Int64
    public var end: Int64
    public var state: UseState

    public init(start: Int64, end: Int64, state: UseState) {
        self.start = start
        self.end = end
        self.state = state
    }

    public var seconds: Int64 { end - start }
}

/// A policy placed in time: its zone and the parent's grants, ready to answer "may they use it now?".
public struct Schedule: Sendable {
    public let policy: Policy
    public let zone: ZoneRules
    public let adjustments: [LocalDate: DayAdjustment]

    public init(policy: Policy, zone: ZoneRules, adjustments: [LocalDate: DayAdjustment] = [:]) {
        self.policy = policy
        self.zone = zone
        self.adjustments = adjustments
    }

    /// That day's limit in minutes including extra time, nil when unlimited.
    public func limitMinutes(on date: LocalDate) -> Int? {
        guard case .minutes(let minutes) = policy.limit(on: date.weekday) else { return nil }
        return minutes + (adjustments[date]?.extraMinutes ?? 0)
    }

    /// The bedtime that starts on `date`, as instants, after any delay a parent granted. nil when there
    /// is none that night, or when a DST change makes it empty.
    public func bedtimeInterval(startingOn date: LocalDate) -> (start: Int64, end: Int64)? {
        guard let window = policy.bedtime(startingOn: date.weekday) else { return nil }
        let delay = Int64(adjustments[date]?.bedtimeDelayMinutes ?? 0) * 60
        let start = zone.instant(date, window.start) + delay
        let end = zone.instant(window.crossesMidnight ? date.adding(days: 1) : date, window.end)
        return start < end ? (start, end) : nil
    }

    /// The local day's bedtime intervals clipped to the day, in order, overlaps merged.
    func bedtimeIntervals(within dayStart: Int64, _ dayEnd: Int64, date: LocalDate) -> [(Int64, Int64)] {
        var intervals: [(Int64, Int64)] = []
        for day in [date.adding(days: -1), date] {
            guard let window = bedtimeInterval(startingOn: day) else { continue }
            let start = max(window.start, dayStart)
            let end = min(window.end, dayEnd)
            if start < end { intervals.append((start, end)) }
        }
        intervals.sort { $0.0 < $1.0 }
        var merged: [(Int64, Int64)] = []
        for interval in intervals {
            if let last = merged.last, interval.0 <= last.1 {
                merged[merged.count - 1].1 = max(last.1, interval.1)
            } else {
                merged.append(interval)
            }
        }
        return merged
    }

    /// The local day from its 00:00 to the next day's 00:00 (23, 24, 24.5 or 25 hours around DST
    /// changes) as contiguous `allowed` and `bedtime` periods.
    public func periods(on date: LocalDate) -> [Period] {
        let dayStart = zone.startOfDay(date)
        let dayEnd = zone.startOfDay(date.adding(days: 1))
        var periods: [Period] = []
        var cursor = dayStart
        for (start, end) in bedtimeIntervals(within: dayStart, dayEnd, date: date) {
            if cursor < start { periods.append(Period(start: cursor, end: start, state: .allowed)) }
            periods.append(Period(start: start, end: end, state: .bedtime))
            cursor = end
        }
        if cursor < dayEnd { periods.append(Period(start: cursor, end: dayEnd, state: .allowed)) }
        return periods
    }

    public func isBedtime(at instant: Int64) -> Bool {
        let date = zone.localTime(at: instant).date
        for day in [date.adding(days: -1), date] {
            if let window = bedtimeInterval(startingOn: day), window.start <= instant, instant < window.end {
                return true
            }
        }
        return false
    }

    /// The state at `instant` given the screen time already used on that local day.
    public func state(at instant: Int64, usedSeconds: Int64) -> UseState {
        if isBedtime(at: instant) { return .bedtime }
        if let limit = limitMinutes(on: zone.localTime(at: instant).date), usedSeconds >= Int64(limit) * 60 {
            return .limitReached
        }
        return .allowed
    }

    /// Answers "may they use it now, why not, how long is left, and when does that change?".
    ///
    /// `usedSeconds` is the screen time counted so far on the local day of `now`. The next change is
    /// found by walking forward through the day boundaries and bedtime edges, assuming the user keeps
    /// using the computer whenever allowed, for at most `horizonDays` days.
    public func decide(now: Int64, usedSeconds: Int64, horizonDays: Int = 14) -> Decision {
        let today = zone.localTime(at: now).date
        let state = state(at: now, usedSeconds: usedSeconds)
        let limit = limitMinutes(on: today)
        let limitLeft = limit.map { max(0, Int64($0) * 60 - usedSeconds) }

        // Every instant where the state can change without usage: day starts and bedtime edges.
        var edges: [(instant: Int64, newDay: Bool)] = []
        for offset in -1...horizonDays {
            let day = today.adding(days: offset)
            edges.append((zone.startOfDay(day.adding(days: 1)), true))
            if let window = bedtimeInterval(startingOn: day) {
                edges.append((window.start, false))
                edges.append((window.end, false))
            }
        }
        edges = edges.filter { $0.instant > now }.sorted { $0.instant < $1.instant }

        var cursor = now
        var used = usedSeconds
        var current = state
        var nextChange: (Int64, UseState)? = nil
        var allowedAgain: Int64? = state == .allowed ? now : nil
        for edge in edges {
            // While allowed, time is used up; running out before the next edge is a change too.
            if current == .allowed, let limit = limitMinutes(on: zone.localTime(at: cursor).date) {
                let runsOutAt = cursor + max(0, Int64(limit) * 60 - used)
                if runsOutAt < edge.instant {
                    if nextChange == nil { nextChange = (runsOutAt, .limitReached) }
                    current = .limitReached
                }
            }
            if current == .allowed { used += edge.instant - cursor }
            cursor = edge.instant
            if edge.newDay { used = 0 }
            let next = self.state(at: cursor, usedSeconds: used)
            if next != current {
                if nextChange == nil { nextChange = (cursor, next) }
                if next == .allowed && allowedAgain == nil { allowedAgain = cursor }
                current = next
            }
            if nextChange != nil && allowedAgain != nil { break }
        }

        let untilBedtime = edges.first(where: { !$0.newDay && isBedtime(at: $0.instant) }).map { $0.instant - now }
        let remaining: Int64?
        switch state {
        case .allowed:
            // From `allowed` the next change is always to a blocked state. It comes before both the
            // limit and bedtime when a new day starts with no time at all (a weekday limit of 0).
            remaining = [limitLeft, untilBedtime, nextChange.map { $0.0 - now }].compactMap { $0 }.min()
        case .bedtime, .limitReached:
            remaining = 0
        }
        return Decision(
            state: state, date: today, limitMinutes: limit, usedSeconds: usedSeconds,
            limitRemainingSeconds: limitLeft, remainingSeconds: remaining,
            nextChange: nextChange.map { Decision.Change(at: $0.0, state: $0.1) },
            allowedAgainAt: allowedAgain)
    }
}

/// The answer of `Schedule.decide`.
public struct Decision: Sendable, Equatable {
    public struct Change: Sendable, Equatable {
        public var at: Int64
        public var state: UseState
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
    public var allowedAgainAt: Int64?

    /// Why use is not allowed, in words for the child.
    public var reason: String? {
        switch state {
        case .allowed: nil
        case .bedtime: "it is bedtime"
        case .limitReached:
            limitMinutes == 0
                ? "no screen time is allowed today" : "today's limit of \(TimeAllowance.format(minutes: limitMinutes ?? 0)) is used up"
        }
    }
}
