
/// What `curfew status` shows: today's figures for one user, as the agent or the database knows them.
public struct UserStatus: Sendable, Equatable {
    public struct App: Sendable, Equatable {
        public var app: String
        public var milliseconds: Int64
        public var running: Bool
    }

    public var user: String
    public var date: LocalDate
    public var timezone: String
    public var screenMilliseconds: Int64
    public var decision: Decision
    public var apps: [App]
    /// Whether screen time is being counted right now (nil when the agent is not running).
    public var counting: Bool?
    public var zone: ZoneRules
    /// Extra time granted for the day (already part of the decision's limit), with last night's
    /// bedtime or downtime delay while that window lasts (`Schedule.adjustmentInForce`).
    public var adjustment: DayAdjustment = DayAdjustment()
    /// Screen time on the family's other computers that the daily limit counts; nil when the policy
    /// counts this computer only.
    public var otherComputersMilliseconds: Int64? = nil
    /// The policy's app rules, each with today's use of the app.
    public var rules: [StatusReport.Rule] = []
    /// Today's blocked periods (bedtime and downtime windows), in local clock times.
    public var blocked: [StatusReport.Window] = []
    /// Extra time the child may take without asking, when the policy gives it.
    public var selfExtension: SelfExtension? = nil

    /// Today's status from the day's totals (`""` = screen time) and the running apps.
    public static func make(
        user: String, policy: Policy, zone: ZoneRules, now: Instant, totals: [String: Int64], running: Set<String>,
        counting: Bool?, adjustments: [LocalDate: DayAdjustment] = [:], otherComputers: Int64 = 0,
        weekMilliseconds: Int64? = nil, breakClock: BreakClock? = nil
    ) -> UserStatus {
        let screen = totals[UsageKey.screen] ?? 0
        let others = policy.limitScope == .allComputers ? otherComputers : nil
        let usage = ScheduleUsage(
            daySeconds: (screen + (others ?? 0)) / 1000, weekSeconds: weekMilliseconds.map { ($0 + (others ?? 0)) / 1000 },
            continuousSeconds: breakClock?.continuousSeconds ?? 0, pauseSeconds: breakClock?.pauseSeconds ?? 0)
        let decision = Schedule(policy: policy, zone: zone, adjustments: adjustments).decide(now: now, usage: usage)
        var names = Set(totals.keys.filter { $0 != UsageKey.screen }).union(running)
        names.subtract(Accounting.sessionPlumbing)
        let apps = names.map { App(app: $0, milliseconds: totals[$0] ?? 0, running: running.contains($0)) }
            .sorted { ($0.milliseconds, $1.app) > ($1.milliseconds, $0.app) }
        let schedule = Schedule(policy: policy, zone: zone, adjustments: adjustments)
        // An app's limit as it stands today: with the extra time a parent gave it.
        let rules = policy.apps.map { rule -> StatusReport.Rule in
            StatusReport.Rule(
                app: rule.app, rule: rule.rule.name, limitMinutes: schedule.appLimitMinutes(rule.app, on: decision.date),
                seconds: seconds(totals[rule.app] ?? 0), extraMinutes: adjustments[decision.date]?.appExtraMinutes[rule.app])
        }
        let dayStart = zone.start(of: decision.date)
        let dayEnd = zone.start(of: decision.date.adding(days: 1))
        func clock(_ instant: Instant) -> String {
            if instant >= dayEnd { return "24:00" }
            let second = zone.localTime(at: instant).secondOfDay
            return "\(ClockTime(hour: second / 3600, minute: second / 60 % 60))"
        }
        let blocked = schedule.periods(on: decision.date).filter { $0.state != .allowed }.map {
            StatusReport.Window(start: clock(max($0.start, dayStart)), end: clock($0.end), state: $0.state.rawValue, window: $0.window)
        }
        return UserStatus(
            user: user, date: decision.date, timezone: zone.identifier, screenMilliseconds: screen, decision: decision,
            apps: apps, counting: counting, zone: zone, adjustment: schedule.adjustmentInForce(on: decision.date, now: now),
            otherComputersMilliseconds: others, rules: rules, blocked: blocked, selfExtension: policy.selfExtension)
    }

    public static func == (lhs: UserStatus, rhs: UserStatus) -> Bool {
        lhs.json == rhs.json
    }

    /// The figures as `curfew status` reads them (the same fields as `json`).
    public var report: StatusReport {
        var report = StatusReport(
            user: user, date: "\(date)", timezone: timezone, screenSeconds: UserStatus.seconds(screenMilliseconds),
            otherComputersSeconds: otherComputersMilliseconds.map(UserStatus.seconds), limitMinutes: decision.limitMinutes,
            extraMinutes: adjustment.extraMinutes, bedtimeDelayMinutes: adjustment.bedtimeDelayMinutes,
            remainingSeconds: decision.remainingSeconds, state: decision.state, reason: decision.reason,
            nextChange: decision.nextChange.map { StatusReport.Change(at: zone.iso8601($0.at), state: $0.state) },
            allowedAgainAt: decision.allowedAgainAt.map { zone.iso8601($0) }, counting: counting,
            apps: apps.map { StatusReport.App(app: $0.app, seconds: UserStatus.seconds($0.milliseconds), running: $0.running) },
            rules: rules, blocked: blocked,
            selfExtension: selfExtension.map { StatusReport.Allowance(minutes: $0.minutes, perWeek: $0.perWeek) })
        if !adjustment.downtimeDelayMinutes.isEmpty { report.downtimeDelayMinutes = adjustment.downtimeDelayMinutes }
        report.window = decision.window
        report.exception = decision.exception
        if let week = decision.weekLimitMinutes {
            report.weekLimitMinutes = week
            report.weekSeconds = decision.weekUsedSeconds ?? 0
            report.weekRemainingSeconds = decision.weekRemainingSeconds ?? 0
        }
        return report
    }

    /// Rounded to whole seconds, as reports show them.
    public static func seconds(_ milliseconds: Int64) -> Int64 { (milliseconds + 500) / 1000 }

    /// `report` as JSON: what the agent sends and `curfew status --json` prints.
    public var json: JSONValue { report.json }
}
