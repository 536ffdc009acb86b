import Testing

@testable import CurfewCore

/// One question to `Enforcement.plan` and the answer expected. Times are UTC; the zone is UTC so
/// local and UTC times read the same. 2026-06-05 is a Friday.
struct EnforcementCase: Sendable, CustomTestStringConvertible {
    var label: String
    var limit: TimeAllowance = .minutes(120)
    var bedtime = "21:00-07:00"
    var apps: [AppRule] = []
    var lockout: Lockout = .logout
    var grant = DayAdjustment()
    var now = "2026-06-05T12:00Z"
    var screen: Int64 = 0
    var appSeconds: [String: Int64] = [:]
    var running: Set<String> = []
    /// Defaults to `running`.
    var tracked: Set<String>? = nil

    var state: UseState
    var action: SessionAction = .none
    var stop: [String: StopReason] = [:]
    var countdowns: [WarningSubject: Int64] = [:]

    var testDescription: String { label }

    var plan: EnforcementPlan {
        let policy = Policy(
            user: "kid", dailyLimit: limit, bedtime: try! BedtimeWindow.parse(bedtime), apps: apps, lockout: lockout,
            timezone: "UTC")
        let schedule = Schedule(policy: policy, zone: zoneRules("UTC"), adjustments: [localDate("2026-06-05"): grant])
        return Enforcement.plan(
            schedule: schedule, now: utcInstant(now), usage: DayUsage(screenSeconds: screen, appSeconds: appSeconds),
            running: running, tracked: tracked ?? running)
    }
}

private let steamBlocked = AppRule(app: "steam", rule: .block)
private let minecraft60 = AppRule(app: "minecraft", rule: .limit(minutes: 60))
private let tuxmathAllowed = AppRule(app: "tuxmath", rule: .allow)

@Suite("Enforcement decisions")
struct EnforcementTests {
    static let cases: [EnforcementCase] = [
        // The day's limit.
        EnforcementCase(
            label: "time left: nothing to do, the limit counts down", screen: 3600, state: .allowed,
            countdowns: [.dailyLimit: 3600]),
        EnforcementCase(
            label: "limit reached, logout", screen: 7200, running: ["firefox"], state: .limitReached, action: .logout),
        EnforcementCase(
            label: "limit reached, lock", lockout: .lock, screen: 7300, state: .limitReached, action: .lock),
        EnforcementCase(
            label: "limit reached, apps: tracked apps stop, untracked ones and allowed ones stay",
            apps: [tuxmathAllowed], lockout: .apps, screen: 7200, running: ["firefox", "tuxmath", "xterm"],
            tracked: ["firefox", "tuxmath"], state: .limitReached, stop: ["firefox": .lockout(.limitReached)]),
        EnforcementCase(
            label: "limit of 0: no screen time at all", limit: .minutes(0), running: ["firefox"], state: .limitReached,
            action: .logout),
        EnforcementCase(
            label: "unlimited: only bedtime counts down", limit: .unlimited, screen: 50_000, state: .allowed,
            countdowns: [.bedtime: 9 * 3600]),
        EnforcementCase(
            label: "bedtime is nearer than the limit: warn about bedtime", now: "2026-06-05T20:50Z", screen: 0,
            state: .allowed, countdowns: [.bedtime: 600]),
        // Bedtime, also across midnight.
        EnforcementCase(
            label: "bedtime evening, logout", now: "2026-06-05T21:00Z", state: .bedtime, action: .logout),
        EnforcementCase(
            label: "bedtime after midnight (window of the day before), lock", lockout: .lock,
            now: "2026-06-05T03:00Z", state: .bedtime, action: .lock),
        EnforcementCase(
            label: "bedtime ends at 07:00", now: "2026-06-05T07:00Z", state: .allowed,
            countdowns: [.dailyLimit: 7200]),
        EnforcementCase(
            label: "bedtime, apps: every tracked app but the allowed one stops", apps: [tuxmathAllowed, minecraft60],
            lockout: .apps, now: "2026-06-05T23:30Z", running: ["minecraft", "tuxmath", "firefox"], state: .bedtime,
            stop: ["minecraft": .lockout(.bedtime), "firefox": .lockout(.bedtime)],
            countdowns: [.app("minecraft"): 3600]),
        EnforcementCase(
            label: "window crossing midnight that starts at 23:30", bedtime: "23:30-06:00", now: "2026-06-05T23:45Z",
            state: .bedtime, action: .logout),
        // Apps.
        EnforcementCase(
            label: "a blocked app is stopped while time is left", apps: [steamBlocked], running: ["steam", "firefox"],
            state: .allowed, stop: ["steam": .blocked], countdowns: [.dailyLimit: 7200]),
        EnforcementCase(
            label: "a blocked app that is not running: nothing", apps: [steamBlocked], running: ["firefox"],
            state: .allowed, countdowns: [.dailyLimit: 7200]),
        EnforcementCase(
            label: "an app under its limit counts down", apps: [minecraft60], appSeconds: ["minecraft": 3000],
            running: ["minecraft"], state: .allowed, countdowns: [.dailyLimit: 7200, .app("minecraft"): 600]),
        EnforcementCase(
            label: "an app past its limit is stopped, the rest goes on", apps: [minecraft60], screen: 3600,
            appSeconds: ["minecraft": 3600], running: ["minecraft", "firefox"], state: .allowed,
            stop: ["minecraft": .appLimit(minutes: 60)], countdowns: [.dailyLimit: 3600]),
        EnforcementCase(
            label: "an app past its limit that is not running: nothing", apps: [minecraft60],
            appSeconds: ["minecraft": 4000], state: .allowed, countdowns: [.dailyLimit: 7200]),
        EnforcementCase(
            label: "a blocked app at bedtime with logout: stopped and logged out", apps: [steamBlocked],
            now: "2026-06-05T22:00Z", running: ["steam"], state: .bedtime, action: .logout, stop: ["steam": .blocked]),
        EnforcementCase(
            label: "an allowed app is never stopped, not even at the limit with apps lockout", apps: [tuxmathAllowed],
            lockout: .apps, screen: 9000, running: ["tuxmath"], state: .limitReached),
        // Grants.
        EnforcementCase(
            label: "extra time lets a child past the limit", grant: DayAdjustment(extraMinutes: 30), screen: 7200,
            state: .allowed, countdowns: [.dailyLimit: 1800]),
        EnforcementCase(
            label: "extra time used up", grant: DayAdjustment(extraMinutes: 30), screen: 9000, state: .limitReached,
            action: .logout),
        EnforcementCase(
            label: "a later bedtime tonight", grant: DayAdjustment(bedtimeDelayMinutes: 45), now: "2026-06-05T21:30Z",
            state: .allowed, countdowns: [.bedtime: 900]),
        EnforcementCase(
            label: "a later bedtime tonight, reached", grant: DayAdjustment(bedtimeDelayMinutes: 45),
            now: "2026-06-05T21:45Z", state: .bedtime, action: .logout),
        EnforcementCase(
            label: "extra time does not lift an app's own limit", apps: [minecraft60],
            grant: DayAdjustment(extraMinutes: 60), appSeconds: ["minecraft": 3600], running: ["minecraft"],
            state: .allowed, stop: ["minecraft": .appLimit(minutes: 60)], countdowns: [.dailyLimit: 10_800]),
    ]

    @Test("plans", arguments: cases)
    func plans(_ test: EnforcementCase) {
        let plan = test.plan
        #expect(plan.decision.state == test.state)
        #expect(plan.sessionAction == test.action)
        #expect(plan.stopApps == test.stop)
        #expect(plan.countdowns == test.countdowns)
    }

    @Test func everyLockoutAtEveryBlockedState() {
        for lockout in Lockout.allCases {
            for (now, screen, state) in [("2026-06-05T22:00Z", Int64(0), UseState.bedtime), ("2026-06-05T12:00Z", 7200, .limitReached)] {
                let plan = EnforcementCase(
                    label: "", apps: [tuxmathAllowed], lockout: lockout, now: now, screen: screen,
                    running: ["firefox", "tuxmath"], state: state
                ).plan
                #expect(plan.decision.state == state)
                switch lockout {
                case .logout:
                    #expect(plan.sessionAction == .logout && plan.stopApps.isEmpty)
                case .lock:
                    #expect(plan.sessionAction == .lock && plan.stopApps.isEmpty)
                case .apps:
                    #expect(plan.sessionAction == SessionAction.none && plan.stopApps == ["firefox": .lockout(state)])
                case .none:
                    #expect(plan.sessionAction == SessionAction.none && plan.stopApps.isEmpty)
                case .network:
                    #expect(plan.sessionAction == SessionAction.none && plan.stopApps.isEmpty && plan.networkOff)
                }
                #expect(plan.lockout == lockout)
                #expect(plan.networkOff == (lockout == .network))
            }
        }
    }

    /// The lockout by cause. `bedtimeLockout` at bedtime and in downtime windows, `lockout` at
    /// the day's or the week's limit and in breaks; logins go on under `network`.
    @Test func theLockoutDependsOnTheCause() throws {
        var policy = Policy(
            user: "kid", dailyLimit: .minutes(120), bedtime: try BedtimeWindow.parse("21:00-07:00"),
            apps: [steamBlocked], lockout: .logout, bedtimeLockout: .network, timezone: "UTC",
            downtime: [DowntimeWindow(name: "school", start: ClockTime(hour: 8, minute: 0), end: ClockTime(hour: 12, minute: 0), days: Weekday.allCases)])
        func plan(_ now: String, screen: Int64 = 0, running: Set<String> = ["firefox", "steam"]) -> EnforcementPlan {
            Enforcement.plan(
                schedule: Schedule(policy: policy, zone: zoneRules("UTC")), now: utcInstant(now),
                usage: DayUsage(screenSeconds: screen), running: running, tracked: running)
        }
        let bedtime = plan("2026-06-05T22:00Z")
        #expect(bedtime.decision.state == .bedtime && bedtime.lockout == .network && bedtime.networkOff)
        #expect(bedtime.sessionAction == SessionAction.none)
        #expect(bedtime.stopApps == ["steam": .blocked], "a blocked app is still stopped; the rest goes on offline")
        #expect(bedtime.networkOffMessage(now: utcInstant("2026-06-05T22:00Z"), zone: zoneRules("UTC")) == "it is bedtime: the internet is off until tomorrow at 07:00")
        let downtime = plan("2026-06-05T09:30Z")
        #expect(downtime.decision.state == .downtime && downtime.networkOff && downtime.sessionAction == SessionAction.none)
        #expect(
            downtime.networkOffMessage(now: utcInstant("2026-06-05T09:30Z"), zone: zoneRules("UTC"))
                == "downtime: school until 12:00: the internet is off until 12:00")
        let limit = plan("2026-06-05T15:00Z", screen: 7200)
        #expect(limit.decision.state == .limitReached && limit.lockout == .logout && !limit.networkOff)
        #expect(limit.sessionAction == .logout)
        let allowed = plan("2026-06-05T15:00Z", screen: 60)
        #expect(allowed.lockout == nil && !allowed.networkOff && allowed.sessionAction == SessionAction.none)

        let schedule = { Schedule(policy: policy, zone: zoneRules("UTC")) }
        let atBedtime = LoginVerdict.decide(user: "kid", schedule: schedule(), usedSeconds: 0, now: utcInstant("2026-06-05T22:00Z"))
        #expect(atBedtime == LoginVerdict(allowed: true, message: "kid may log in (the internet is off: it is bedtime)"))
        let atLimit = LoginVerdict.decide(user: "kid", schedule: schedule(), usedSeconds: 7200, now: utcInstant("2026-06-05T15:00Z"))
        #expect(!atLimit.allowed)

        // The other way round: network at the limit, logout at bedtime.
        policy.lockout = .network
        policy.bedtimeLockout = .logout
        #expect(plan("2026-06-05T15:00Z", screen: 7200).networkOff)
        #expect(plan("2026-06-05T22:00Z").sessionAction == .logout)
        // Monitor only is only when every cause is none: blocked apps are stopped otherwise.
        policy.lockout = .none
        #expect(plan("2026-06-05T15:00Z", screen: 60).stopApps == ["steam": .blocked])
        policy.bedtimeLockout = nil
        #expect(plan("2026-06-05T15:00Z", screen: 60).stopApps.isEmpty)
        #expect(plan("2026-06-05T22:00Z").sessionAction == SessionAction.none)
        // A lockout that lasts past a day names the day.
        policy = Policy(user: "kid", dailyLimit: .unlimited, bedtime: nil, lockout: .network, timezone: "UTC", weeklyLimitMinutes: 60)
        let week = Enforcement.plan(
            schedule: Schedule(policy: policy, zone: zoneRules("UTC")), now: utcInstant("2026-06-05T12:00Z"),
            usage: DayUsage(screenSeconds: 0, weekSeconds: 3600), running: [], tracked: [])
        #expect(week.networkOff)
        #expect(week.networkOffMessage(now: utcInstant("2026-06-05T12:00Z"), zone: zoneRules("UTC")).hasPrefix("this week's limit of 1h is used up: the internet is off until Monday at 00:00"))
    }

    @Test func stopMessagesNameTheRule() {
        #expect(StopReason.blocked.message(app: "steam") == "steam was stopped: a parent blocked it")
        #expect(StopReason.appLimit(minutes: 90).message(app: "minecraft") == "minecraft was stopped: its daily limit of 1h30m is used up")
        #expect(StopReason.lockout(.bedtime).message(app: "firefox") == "firefox was stopped: it is bedtime")
        #expect(StopReason.lockout(.limitReached).message(app: "firefox") == "firefox was stopped: today's screen time is used up")
    }
}

@Suite("Warnings")
struct WarningTrackerTests {
    /// Feeds the tracker a countdown second by second from `from` down to `to` and returns the
    /// thresholds warned, in order.
    static func run(_ tracker: inout WarningTracker, subject: WarningSubject = .dailyLimit, from: Int64, to: Int64, warn: [Int] = [15, 5, 1]) -> [Int64] {
        var warned: [Int64] = []
        var left = from
        while left >= to {
            for warning in tracker.update(countdowns: [subject: left], warnMinutes: warn) {
                #expect(warning.subject == subject && warning.remainingSeconds == left)
                warned.append(warning.thresholdSeconds)
            }
            left -= 1
        }
        return warned
    }

    @Test func eachThresholdOnceThenTheFinalCountdown() {
        var tracker = WarningTracker()
        #expect(Self.run(&tracker, from: 1200, to: 0) == [900, 300, 60, 30, 10])
        // Time stays at zero: nothing more.
        #expect(tracker.update(countdowns: [.dailyLimit: 0], warnMinutes: [15, 5, 1]).isEmpty)
        #expect(tracker.update(countdowns: [:], warnMinutes: [15, 5, 1]).isEmpty)
    }

    @Test func addedTimeArmsTheWarningsAgain() {
        var tracker = WarningTracker()
        // Starting with 400 s left: the 15-minute warning (saying "7 minutes"), then 5 minutes.
        #expect(Self.run(&tracker, from: 400, to: 100) == [900, 300])
        // A parent grants 10 minutes: 700 s left; 5 minutes is in the future again, 15 is not.
        #expect(Self.run(&tracker, from: 700, to: 0) == [300, 60, 30, 10])
        // Run out, then 30 minutes more.
        #expect(Self.run(&tracker, from: 1800, to: 850) == [900])
    }

    @Test func startingLateSendsOnlyTheNearestThreshold() {
        var tracker = WarningTracker()
        let warnings = tracker.update(countdowns: [.dailyLimit: 200], warnMinutes: [15, 5, 1])
        #expect(warnings.map(\.thresholdSeconds) == [300])
        #expect(warnings.first?.message == "3 minutes of screen time left today")
        #expect(Self.run(&tracker, from: 199, to: 50) == [60])
    }

    @Test func subjectsAreIndependent() {
        var tracker = WarningTracker()
        let first = tracker.update(countdowns: [.dailyLimit: 890, .app("minecraft"): 290], warnMinutes: [15, 5])
        #expect(first.map(\.subject) == [.dailyLimit, .app("minecraft")])
        #expect(first.map(\.message) == ["15 minutes of screen time left today", "5 minutes of minecraft left today"])
        // The app stops and starts again with the same time left: no repeat.
        #expect(tracker.update(countdowns: [.dailyLimit: 880], warnMinutes: [15, 5]).isEmpty)
        #expect(tracker.update(countdowns: [.dailyLimit: 879, .app("minecraft"): 290], warnMinutes: [15, 5]).isEmpty)
    }

    /// A policy change that does not move the moment (here: another warning added, already behind the
    /// child) sends no warning again.
    @Test func aWarningsEditThatMovesNothingSendsNothingAgain() {
        var tracker = WarningTracker()
        #expect(Self.run(&tracker, subject: .app("minecraft"), from: 400, to: 250) == [900, 300])
        #expect(tracker.update(countdowns: [.app("minecraft"): 249], warnMinutes: [15, 10, 5, 1]).isEmpty)
        #expect(tracker.update(countdowns: [.app("minecraft"): 248], warnMinutes: [5]).isEmpty)
        // The limit lowered: the moment moved, the nearest warning crossed is sent.
        #expect(tracker.update(countdowns: [.dailyLimit: 3000], warnMinutes: [15, 5, 1]).isEmpty)
        #expect(tracker.update(countdowns: [.dailyLimit: 200], warnMinutes: [15, 5, 1]).map(\.thresholdSeconds) == [300])
    }

    @Test func noWarningMinutesStillCountsDownTheLastMinute() {
        var tracker = WarningTracker()
        #expect(Self.run(&tracker, subject: .bedtime, from: 3000, to: 1, warn: []) == [60, 30, 10])
        #expect(Warning(subject: .bedtime, thresholdSeconds: 60, remainingSeconds: 60).message == "bedtime starts in 1 minute")
        #expect(Warning(subject: .bedtime, thresholdSeconds: 10, remainingSeconds: 10).isCountdown)
    }
}
