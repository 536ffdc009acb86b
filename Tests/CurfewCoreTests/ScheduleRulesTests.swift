import Foundation
import Testing

@testable import CurfewCore

// The schedule rules: downtime windows, the weekly budget, breaks, exceptions and self-service extra time.

func downtime(_ name: String, _ window: String, _ days: String = "all") -> DowntimeWindow {
    try! DowntimeWindow.parse(name: name, window: window, days: Weekday.parseSet(days))
}

/// A policy with no limit, the given bedtime (`off` for none) and the given rules.
func rulesPolicy(
    bedtime: String = "off", limit: TimeAllowance = .unlimited, weekly: Int? = nil, downtime: [DowntimeWindow] = [],
    breaks: Breaks? = nil, exceptions: [PolicyException] = []
) -> Policy {
    Policy(
        user: "kid", dailyLimit: limit, bedtime: try! BedtimeWindow.parse(bedtime), weeklyLimitMinutes: weekly,
        downtime: downtime, breaks: breaks, exceptions: exceptions)
}

/// `(state, window, start, end)` periods, instants in UTC.
typealias PeriodRow = (UseState, String?, String, String)

func periodRows(_ rows: [PeriodRow]) -> [Period] {
    rows.map { Period(start: utcInstant($0.2), end: utcInstant($0.3), state: $0.0, window: $0.1) }
}

struct DowntimeDayCase: Sendable, CustomTestStringConvertible {
    var label: String
    var zone: String
    var windows: [(String, String, String)]
    var date: String
    var rows: [PeriodRow]

    init(_ label: String, _ zone: String, _ windows: [(String, String, String)], _ date: String, _ rows: [PeriodRow]) {
        self.label = label
        self.zone = zone
        self.windows = windows
        self.date = date
        self.rows = rows
    }

    var testDescription: String { "\(zone) \(date): \(label)" }
}

@Suite("Downtime windows")
struct DowntimeTests {
    static let cases: [DowntimeDayCase] = [
        .init(
            "window across midnight, its end in the skipped hour moves to 03:00", "Europe/Berlin",
            [("late", "23:00-02:30", "all")], "2026-03-29",
            [
                (.downtime, "late", "2026-03-28T23:00Z", "2026-03-29T01:00Z"), (.allowed, nil, "2026-03-29T01:00Z", "2026-03-29T21:00Z"),
                (.downtime, "late", "2026-03-29T21:00Z", "2026-03-29T22:00Z"),
            ]),
        .init(
            "window across midnight, its end in the repeated hour takes the first", "America/New_York",
            [("late", "23:00-01:30", "all")], "2026-11-01",
            [
                (.downtime, "late", "2026-11-01T04:00Z", "2026-11-01T05:30Z"), (.allowed, nil, "2026-11-01T05:30Z", "2026-11-02T04:00Z"),
                (.downtime, "late", "2026-11-02T04:00Z", "2026-11-02T05:00Z"),
            ]),
        .init(
            "a 30-minute shift: 02:15 does not exist and becomes 02:30", "Australia/Lord_Howe",
            [("night", "22:00-02:15", "all")], "2026-10-04",
            [
                (.downtime, "night", "2026-10-03T13:30Z", "2026-10-03T15:30Z"),
                (.allowed, nil, "2026-10-03T15:30Z", "2026-10-04T11:00Z"), (.downtime, "night", "2026-10-04T11:00Z", "2026-10-04T13:00Z"),
            ]),
        .init(
            "the day before a skipped midnight", "America/Santiago", [("late", "22:00-00:30", "all")], "2026-09-05",
            [
                (.downtime, "late", "2026-09-05T04:00Z", "2026-09-05T04:30Z"), (.allowed, nil, "2026-09-05T04:30Z", "2026-09-06T02:00Z"),
                (.downtime, "late", "2026-09-06T02:00Z", "2026-09-06T04:00Z"),
            ]),
        .init(
            "midnight is skipped: the night's window ends where the day starts, at 01:00", "America/Santiago",
            [("late", "22:00-00:30", "all")], "2026-09-06",
            [(.allowed, nil, "2026-09-06T04:00Z", "2026-09-07T01:00Z"), (.downtime, "late", "2026-09-07T01:00Z", "2026-09-07T03:00Z")]),
        .init(
            "midnight is skipped in Beirut too", "Asia/Beirut", [("late", "23:30-00:30", "all")], "2026-03-29",
            [(.allowed, nil, "2026-03-28T22:00Z", "2026-03-29T20:30Z"), (.downtime, "late", "2026-03-29T20:30Z", "2026-03-29T21:00Z")]),
        .init(
            "a window wholly inside the skipped hour is empty", "America/Havana", [("study", "00:00-01:00", "sun")], "2026-03-08",
            [(.allowed, nil, "2026-03-08T05:00Z", "2026-03-09T04:00Z")]),
        .init(
            "a window keyed by the day it starts: Friday night's reaches into Saturday", "UTC",
            [("gaming", "22:00-01:00", "fri")], "2026-03-14",
            [(.downtime, "gaming", "2026-03-14T00:00Z", "2026-03-14T01:00Z"), (.allowed, nil, "2026-03-14T01:00Z", "2026-03-15T00:00Z")]),
        .init(
            "weekday windows do not apply on Saturday", "UTC", [("school", "08:00-15:00", "mon-fri")], "2026-03-14",
            [(.allowed, nil, "2026-03-14T00:00Z", "2026-03-15T00:00Z")]),
        .init(
            "overlapping windows: the one that ends last names the span", "UTC",
            [("homework", "15:00-17:00", "all"), ("music", "16:00-18:00", "all")], "2026-03-10",
            [
                (.allowed, nil, "2026-03-10T00:00Z", "2026-03-10T15:00Z"), (.downtime, "homework", "2026-03-10T15:00Z", "2026-03-10T16:00Z"),
                (.downtime, "music", "2026-03-10T16:00Z", "2026-03-10T18:00Z"), (.allowed, nil, "2026-03-10T18:00Z", "2026-03-11T00:00Z"),
            ]),
    ]

    @Test("periods of a day with downtime windows", arguments: cases)
    func periods(_ test: DowntimeDayCase) {
        let windows = test.windows.map { downtime($0.0, $0.1, $0.2) }
        let schedule = Schedule(policy: rulesPolicy(downtime: windows), zone: zoneRules(test.zone))
        #expect(schedule.periods(on: localDate(test.date)) == periodRows(test.rows))
    }

    /// Berlin, a school day: bedtime 21:00-07:00, `early` 06:00-07:30 reaching past bedtime's end,
    /// `school` 08:00-15:00 on weekdays, `evening` 20:00-22:00 running into bedtime.
    static let family = Schedule(
        policy: rulesPolicy(
            bedtime: "21:00-07:00",
            downtime: [downtime("early", "06:00-07:30"), downtime("school", "08:00-15:00", "mon-fri"), downtime("evening", "20:00-22:00")]),
        zone: zoneRules("Europe/Berlin"))

    @Test("downtime inside and across bedtime: bedtime wins where both apply")
    func withBedtime() {
        #expect(
            Self.family.periods(on: localDate("2026-03-10"))
                == periodRows([
                    (.bedtime, nil, "2026-03-09T23:00Z", "2026-03-10T06:00Z"), (.downtime, "early", "2026-03-10T06:00Z", "2026-03-10T06:30Z"),
                    (.allowed, nil, "2026-03-10T06:30Z", "2026-03-10T07:00Z"), (.downtime, "school", "2026-03-10T07:00Z", "2026-03-10T14:00Z"),
                    (.allowed, nil, "2026-03-10T14:00Z", "2026-03-10T19:00Z"), (.downtime, "evening", "2026-03-10T19:00Z", "2026-03-10T20:00Z"),
                    (.bedtime, nil, "2026-03-10T20:00Z", "2026-03-10T23:00Z"),
                ]))
    }

    @Test("decide names the window, when it ends and when use is allowed again")
    func decide() {
        let school = Self.family.decide(now: utcInstant("2026-03-10T10:00Z"), usedSeconds: 0)
        #expect(school.state == .downtime)
        #expect(school.reason == "downtime: school until 15:00")
        #expect(school.nextChange == Decision.Change(at: utcInstant("2026-03-10T14:00Z"), state: .allowed))
        #expect(school.allowedAgainAt == utcInstant("2026-03-10T14:00Z"))
        #expect(school.remainingSeconds == 0)

        let afternoon = Self.family.decide(now: utcInstant("2026-03-10T15:00Z"), usedSeconds: 0)
        #expect(afternoon.state == .allowed)
        #expect(afternoon.nextChange == Decision.Change(at: utcInstant("2026-03-10T19:00Z"), state: .downtime, window: "evening"))
        #expect(afternoon.remainingSeconds == Int64(4 * 3600))

        // From the evening window into bedtime and the next morning's `early` window.
        let evening = Self.family.decide(now: utcInstant("2026-03-10T19:30Z"), usedSeconds: 0)
        #expect(evening.reason == "downtime: evening until 22:00")
        #expect(evening.nextChange == Decision.Change(at: utcInstant("2026-03-10T20:00Z"), state: .bedtime))
        #expect(evening.allowedAgainAt == utcInstant("2026-03-11T06:30Z"))
        #expect(LoginVerdict.decide(user: "kid", schedule: Self.family, usedSeconds: 0, now: utcInstant("2026-03-10T10:00Z")).message
            == "Curfew: kid may not log in now: downtime: school until 15:00. You may log in again at 15:00.")
    }

    @Test("an app-lockout stops apps in downtime and warns before the window, naming it")
    func enforcement() {
        var policy = Self.family.policy
        policy.lockout = .apps
        policy.apps = [AppRule(app: "calculator", rule: .allow)]
        let schedule = Schedule(policy: policy, zone: Self.family.zone)
        let during = Enforcement.plan(
            schedule: schedule, now: utcInstant("2026-03-10T10:00Z"), usage: DayUsage(screenSeconds: 0),
            running: ["minecraft", "calculator"], tracked: ["minecraft", "calculator"])
        #expect(during.stopApps == ["minecraft": .lockout(.downtime)])
        #expect(StopReason.lockout(.downtime).message(app: "minecraft") == "minecraft was stopped: it is downtime")
        let before = Enforcement.plan(
            schedule: schedule, now: utcInstant("2026-03-10T18:50Z"), usage: DayUsage(screenSeconds: 0), running: [], tracked: [])
        #expect(before.countdowns == [.downtime("evening"): 600])
        #expect(Warning(subject: .downtime("evening"), thresholdSeconds: 900, remainingSeconds: 600).message
            == "downtime evening starts in 10 minutes")
    }

    @Test("every day of 2026 is covered without gaps with windows and bedtime", arguments: scheduleZones)
    func wholeYear(zone: String) {
        let schedule = Schedule(policy: Self.family.policy, zone: zoneRules(zone))
        var date = localDate("2026-01-01")
        while date.year == 2026 {
            let periods = schedule.periods(on: date)
            #expect(periods.first?.start == schedule.zone.start(of: date))
            #expect(periods.last?.end == schedule.zone.start(of: date.adding(days: 1)))
            for (a, b) in zip(periods, periods.dropFirst()) {
                #expect(a.end == b.start && a.start < a.end && (a.state != b.state || a.window != b.window))
            }
            date = date.adding(days: 1)
        }
    }
}

@Suite("Weekly budget")
struct WeeklyBudgetTests {
    // Berlin's week of Monday 2026-03-23 ends on the Sunday clocks go forward; the next week starts
    // Monday 2026-03-30 00:00 +02:00, 2026-03-29T22:00Z.
    static let schedule = Schedule(policy: rulesPolicy(weekly: 600), zone: zoneRules("Europe/Berlin"))

    @Test("the week's budget runs out, and comes back on Monday, across a DST change")
    func acrossDST() {
        let almost = Self.schedule.decide(now: utcInstant("2026-03-29T12:00Z"), usage: ScheduleUsage(daySeconds: 0, weekSeconds: 600 * 60 - 1800))
        #expect(almost.state == .allowed)
        #expect(almost.remainingSeconds == 1800)
        #expect(almost.weekRemainingSeconds == 1800)
        #expect(almost.nextChange == Decision.Change(at: utcInstant("2026-03-29T12:30Z"), state: .weekLimitReached))
        #expect(almost.allowedAgainAt == utcInstant("2026-03-29T12:00Z"))

        let spent = Self.schedule.decide(now: utcInstant("2026-03-29T12:30Z"), usage: ScheduleUsage(daySeconds: 1800, weekSeconds: 600 * 60))
        #expect(spent.state == .weekLimitReached)
        #expect(spent.reason == "this week's limit of 10h is used up")
        #expect(spent.nextChange == Decision.Change(at: utcInstant("2026-03-29T22:00Z"), state: .allowed))
        #expect(spent.allowedAgainAt == utcInstant("2026-03-29T22:00Z"))

        // A new day that is not Monday does not bring the week back.
        let saturday = Self.schedule.decide(now: utcInstant("2026-03-28T12:00Z"), usage: ScheduleUsage(daySeconds: 0, weekSeconds: 600 * 60))
        #expect(saturday.allowedAgainAt == utcInstant("2026-03-29T22:00Z"))
    }

    @Test("the day's limit and the week's: whichever runs out first blocks")
    func both() {
        let schedule = Schedule(policy: rulesPolicy(limit: .minutes(120), weekly: 600), zone: zoneRules("UTC"))
        let dayFirst = schedule.decide(now: utcInstant("2026-03-10T12:00Z"), usage: ScheduleUsage(daySeconds: 6600, weekSeconds: 3600))
        #expect(dayFirst.nextChange == Decision.Change(at: utcInstant("2026-03-10T12:10Z"), state: .limitReached))
        let weekFirst = schedule.decide(now: utcInstant("2026-03-10T12:00Z"), usage: ScheduleUsage(daySeconds: 0, weekSeconds: 35_700))
        #expect(weekFirst.nextChange == Decision.Change(at: utcInstant("2026-03-10T12:05Z"), state: .weekLimitReached))
        #expect(weekFirst.remainingSeconds == 300)
        // Without the week's figure, today's is all that is known of the week.
        #expect(schedule.decide(now: utcInstant("2026-03-10T12:00Z"), usedSeconds: 0).weekRemainingSeconds == 36_000)
    }
}

@Suite("Breaks")
struct BreakTests {
    static let schedule = Schedule(policy: rulesPolicy(breaks: Breaks(afterMinutes: 45, lengthMinutes: 10)), zone: zoneRules("UTC"))

    struct Case: Sendable, CustomTestStringConvertible {
        var label: String
        var now: String
        var continuous: Int64
        var pause: Int64
        var state: UseState
        var next: (String, UseState)
        var allowedAgain: String
        var testDescription: String { label }
    }

    static let cases: [Case] = [
        .init(label: "fresh", now: "2026-03-10T12:00Z", continuous: 0, pause: 0, state: .allowed, next: ("2026-03-10T12:45Z", .breakTime), allowedAgain: "2026-03-10T12:00Z"),
        .init(label: "due", now: "2026-03-10T12:00Z", continuous: 2700, pause: 0, state: .breakTime, next: ("2026-03-10T12:10Z", .allowed), allowedAgain: "2026-03-10T12:10Z"),
        .init(label: "half over", now: "2026-03-10T12:00Z", continuous: 2700, pause: 300, state: .breakTime, next: ("2026-03-10T12:05Z", .allowed), allowedAgain: "2026-03-10T12:05Z"),
        .init(label: "paused long enough", now: "2026-03-10T12:00Z", continuous: 2700, pause: 600, state: .allowed, next: ("2026-03-10T12:45Z", .breakTime), allowedAgain: "2026-03-10T12:00Z"),
        .init(label: "a short pause does not reset", now: "2026-03-10T12:00Z", continuous: 2400, pause: 300, state: .allowed, next: ("2026-03-10T12:05Z", .breakTime), allowedAgain: "2026-03-10T12:00Z"),
        .init(label: "across midnight: the stretch goes on into the new day", now: "2026-03-10T23:50Z", continuous: 1800, pause: 0, state: .allowed, next: ("2026-03-11T00:05Z", .breakTime), allowedAgain: "2026-03-10T23:50Z"),
        .init(label: "a break across midnight", now: "2026-03-10T23:55Z", continuous: 2700, pause: 0, state: .breakTime, next: ("2026-03-11T00:05Z", .allowed), allowedAgain: "2026-03-11T00:05Z"),
    ]

    @Test("after the stretch, a break of its length", arguments: cases)
    func table(_ test: Case) {
        let decision = Self.schedule.decide(
            now: utcInstant(test.now), usage: ScheduleUsage(daySeconds: 0, continuousSeconds: test.continuous, pauseSeconds: test.pause))
        #expect(decision.state == test.state)
        #expect(decision.nextChange == Decision.Change(at: utcInstant(test.next.0), state: test.next.1))
        #expect(decision.allowedAgainAt == utcInstant(test.allowedAgain))
    }

    @Test("the reason says how long and until when; the day's limit at midnight does not end the stretch")
    func reasons() {
        let due = Self.schedule.decide(now: utcInstant("2026-03-10T12:00Z"), usage: ScheduleUsage(daySeconds: 0, continuousSeconds: 2700))
        #expect(due.reason == "time for a 10m break until 12:10")
        #expect(StopReason.lockout(.breakTime).message(app: "steam") == "steam was stopped: it is time for a break")
        var policy = Self.schedule.policy
        policy.dailyLimit = .minutes(60)
        let limited = Schedule(policy: policy, zone: Self.schedule.zone)
        // 10 minutes left today run out exactly at midnight, when a new day's hour begins: no change
        // then; the break comes 45 minutes into the stretch, at 00:05.
        let decision = limited.decide(now: utcInstant("2026-03-10T23:50Z"), usage: ScheduleUsage(daySeconds: 3000, continuousSeconds: 1800))
        #expect(decision.nextChange == Decision.Change(at: utcInstant("2026-03-11T00:05Z"), state: .breakTime))
        let plan = Enforcement.plan(
            schedule: Self.schedule, now: utcInstant("2026-03-10T12:40Z"), usage: DayUsage(screenSeconds: 0, continuousSeconds: 2400),
            running: [], tracked: [])
        #expect(plan.countdowns == [.breakTime: 300])
    }
}

@Suite("Exceptions")
struct ExceptionTests {
    /// Berlin: limit 2h, bedtime 21:00-07:00, `evening` 20:00-22:00 every day; the DST weekend
    /// (Friday 2026-03-27 to Sunday 2026-03-29) free: no limit, no bedtime, no downtime.
    static let schedule = Schedule(
        policy: rulesPolicy(
            bedtime: "21:00-07:00", limit: .minutes(120), downtime: [downtime("evening", "20:00-22:00")],
            exceptions: [
                PolicyException(
                    from: localDate("2026-03-27"), to: localDate("2026-03-29"), dailyLimit: .unlimited, bedtime: .some(nil),
                    liftsDowntime: true)
            ]),
        zone: zoneRules("Europe/Berlin"))

    @Test("a free weekend over the DST change, and the days around it")
    func dstWeekend() {
        // Thursday night's bedtime started before the exception and still ends Friday morning.
        #expect(
            Self.schedule.periods(on: localDate("2026-03-27"))
                == periodRows([(.bedtime, nil, "2026-03-26T23:00Z", "2026-03-27T06:00Z"), (.allowed, nil, "2026-03-27T06:00Z", "2026-03-27T23:00Z")]))
        #expect(Self.schedule.periods(on: localDate("2026-03-29")) == periodRows([(.allowed, nil, "2026-03-28T23:00Z", "2026-03-29T22:00Z")]))
        #expect(
            Self.schedule.periods(on: localDate("2026-03-30"))
                == periodRows([
                    (.allowed, nil, "2026-03-29T22:00Z", "2026-03-30T18:00Z"), (.downtime, "evening", "2026-03-30T18:00Z", "2026-03-30T19:00Z"),
                    (.bedtime, nil, "2026-03-30T19:00Z", "2026-03-30T22:00Z"),
                ]))
        #expect(Self.schedule.limitMinutes(on: localDate("2026-03-29")) == nil)
        #expect(Self.schedule.limitMinutes(on: localDate("2026-03-30")) == 120)
        let sunday = Self.schedule.decide(now: utcInstant("2026-03-29T12:00Z"), usedSeconds: 5 * 3600)
        #expect(sunday.state == .allowed)
        #expect(sunday.exception == "2026-03-27..2026-03-29")
        // Monday's limit of 2h is the next thing that blocks: at 02:00 on Monday with use all night.
        #expect(sunday.nextChange == Decision.Change(at: utcInstant("2026-03-30T00:00Z"), state: .limitReached))
    }

    @Test("fields left out keep the normal rule; a later bedtime across the DST night")
    func partial() {
        let schedule = Schedule(
            policy: rulesPolicy(
                bedtime: "21:00-07:00", limit: .minutes(120), downtime: [downtime("evening", "20:00-22:00")],
                exceptions: [
                    PolicyException(from: localDate("2026-03-28"), to: localDate("2026-03-29"), bedtime: .some(try! BedtimeWindow.parse("22:00-08:00")))
                ]),
            zone: zoneRules("Europe/Berlin"))
        #expect(
            schedule.periods(on: localDate("2026-03-29"))
                == periodRows([
                    (.bedtime, nil, "2026-03-28T23:00Z", "2026-03-29T06:00Z"), (.allowed, nil, "2026-03-29T06:00Z", "2026-03-29T18:00Z"),
                    (.downtime, "evening", "2026-03-29T18:00Z", "2026-03-29T20:00Z"), (.bedtime, nil, "2026-03-29T20:00Z", "2026-03-29T22:00Z"),
                ]))
        #expect(schedule.limitMinutes(on: localDate("2026-03-29")) == 120)
    }

    @Test("lookup finds the range covering a date among many")
    func lookup() {
        var exceptions: [PolicyException] = []
        for index in 0..<64 {
            let from = localDate("2026-01-01").adding(days: index * 5)
            exceptions.append(PolicyException(from: from, to: from.adding(days: 1), dailyLimit: .minutes(15 * (index % 8))))
        }
        let schedule = Schedule(policy: rulesPolicy(exceptions: exceptions.reversed()), zone: zoneRules("UTC"))
        for day in 0..<330 {
            let date = localDate("2026-01-01").adding(days: day)
            #expect(schedule.exception(on: date) == exceptions.first { $0.contains(date) })
        }
    }
}

@Suite("Schedule rules: validation, JSON and merge")
struct ScheduleRulesValidationTests {
    static let full = #"""
        {"user": "kid", "weeklyLimitMinutes": 600,
         "downtime": [{"name": "school", "start": "08:00", "end": "15:00", "days": ["mon", "tue", "wed", "thu", "fri"]},
                      {"name": "dinner", "start": "18:30", "end": "19:15", "days": ["sun"]}],
         "breaks": {"afterMinutes": 45, "lengthMinutes": 10},
         "exceptions": [{"from": "2026-12-21", "to": "2027-01-03", "dailyLimitMinutes": 180, "bedtime": {"start": "22:00", "end": "08:00"}, "downtime": false},
                        {"from": "2026-12-24", "to": "2026-12-24", "dailyLimitMinutes": null, "bedtime": null}],
         "selfExtension": {"minutes": 15, "perWeek": 3}}
        """#

    @Test("decoded strictly, kept in order, and written back the same")
    func roundTrip() throws {
        // The two exceptions overlap: an error naming both.
        #expect(decodeError(Self.full) == "exceptions must not overlap, got 2026-12-21..2027-01-03 and 2026-12-24")
        let valid = Self.full.replacingOccurrences(of: #""2026-12-24", "to": "2026-12-24""#, with: #""2027-02-14", "to": "2027-02-14""#)
        let policy = try decodePolicy(valid)
        #expect(policy.weeklyLimitMinutes == 600)
        #expect(policy.downtime.map(\.name) == ["dinner", "school"])
        #expect(policy.downtime[1].days == [.mon, .tue, .wed, .thu, .fri])
        #expect(policy.breaks == Breaks(afterMinutes: 45, lengthMinutes: 10))
        #expect(policy.exceptions.map(\.range) == ["2026-12-21..2027-01-03", "2027-02-14"])
        #expect(policy.exceptions[0].liftsDowntime && policy.exceptions[0].dailyLimit == .minutes(180))
        #expect(policy.exceptions[1].dailyLimit == .unlimited && policy.exceptions[1].bedtime == .some(nil))
        #expect(policy.selfExtension == SelfExtension(minutes: 15, perWeek: 3))
        #expect(try Policy.decode(policy.json) == policy)
        #expect(try Policy.decode(JSONValue.parse(policy.json.prettyString)) == policy)
        guard case .object(let object) = policy.json else { return }
        #expect(Array(object.keys.suffix(5)) == ["weeklyLimitMinutes", "downtime", "breaks", "exceptions", "selfExtension"])
        // A policy without them writes none of them: its records verify as before.
        guard case .object(let plain) = Policy.defaults(for: "kid").json else { return }
        #expect(!plain.keys.contains("downtime") && !plain.keys.contains("exceptions") && !plain.keys.contains("breaks"))
    }

    static let errorCases: [(String, String)] = [
        (#""weeklyLimitMinutes": 3375"#, "weekly limit must be between 0 and 3360 minutes, got 3375"),
        (#""weeklyLimitMinutes": 610"#, "weekly limit must be a multiple of 15 minutes, got 610"),
        (#""weeklyLimitMinutes": "10h""#, #"policy field "weeklyLimitMinutes" must be a whole number, got a string"#),
        (
            #""downtime": [{"name": "school!", "start": "08:00", "end": "15:00", "days": ["mon"]}]"#,
            #"downtime window name must be 1 to 32 letters, digits, '-' or '_', got "school!""#
        ),
        (
            #""downtime": [{"name": "school", "start": "08:00", "end": "08:00", "days": ["mon"]}]"#,
            "downtime window school: start and end must differ, got 08:00-08:00"
        ),
        (
            #""downtime": [{"name": "school", "start": "08:00", "end": "15:00", "days": []}]"#,
            "downtime window school: needs at least one day, got none"
        ),
        (
            #""downtime": [{"name": "school", "start": "08:00", "end": "15:00", "days": ["monday"]}]"#,
            #"downtime[0].days must hold mon, tue, wed, thu, fri, sat or sun, got "monday""#
        ),
        (
            #""downtime": [{"name": "a", "start": "08:00", "end": "15:00", "days": ["mon"]}, {"name": "a", "start": "16:00", "end": "17:00", "days": ["mon"]}]"#,
            #"downtime windows must have different names, got "a" twice"#
        ),
        (
            #""downtime": [{"name": "school", "start": "8am", "end": "15:00", "days": ["mon"]}]"#,
            #"downtime start must look like HH:MM, got "8am""#
        ),
        (
            #""downtime": [{"name": "school", "start": "08:00", "end": "15:00", "days": ["mon"], "label": "x"}]"#,
            #"unknown field "label" in downtime[0] (known fields: name, start, end, days)"#
        ),
        (#""downtime": [{"name": "school", "start": "08:00", "days": ["mon"]}]"#, "downtime[0].end is missing"),
        (#""breaks": {"afterMinutes": 10, "lengthMinutes": 10}"#, "break interval must be between 15 and 240 minutes, got 10"),
        (#""breaks": {"afterMinutes": 47, "lengthMinutes": 10}"#, "break interval must be a multiple of 5 minutes, got 47"),
        (#""breaks": {"afterMinutes": 45, "lengthMinutes": 65}"#, "break length must be between 5 and 60 minutes, got 65"),
        (#""breaks": {"afterMinutes": 45, "lengthMinutes": 7}"#, "break length must be a multiple of 5 minutes, got 7"),
        (#""breaks": {"afterMinutes": 45}"#, "breaks.lengthMinutes is missing"),
        (
            #""exceptions": [{"from": "2027-01-03", "to": "2026-12-21"}]"#,
            "exception range must not end before it starts, got 2027-01-03..2026-12-21"
        ),
        (
            #""exceptions": [{"from": "2026-01-01", "to": "2027-06-01"}]"#,
            "exception range may span at most 366 days, got 2026-01-01..2027-06-01 (517 days)"
        ),
        (
            #""exceptions": [{"from": "2026-12-24", "to": "2026-12-24", "dailyLimitMinutes": 17}]"#,
            "daily limit of the exception 2026-12-24 must be a multiple of 15 minutes, got 17"
        ),
        (
            #""exceptions": [{"from": "2026-12-24", "to": "2026-12-24", "downtime": true}]"#,
            "exceptions[0].downtime must be false (no downtime those days) or left out, got true"
        ),
        (#""exceptions": [{"from": "2026-12-32", "to": "2026-12-24"}]"#, #"date must be a real calendar day, got "2026-12-32""#),
        (
            #""exceptions": [{"from": "2026-12-24", "to": "2026-12-24", "weeklyLimitMinutes": 60}]"#,
            #"unknown field "weeklyLimitMinutes" in exceptions[0] (known fields: from, to, dailyLimitMinutes, bedtime, downtime)"#
        ),
        (#""selfExtension": {"minutes": 3, "perWeek": 3}"#, "self-service extra time must be between 5 and 120 minutes, got 3"),
        (#""selfExtension": {"minutes": 12, "perWeek": 3}"#, "self-service extra time must be a multiple of 5 minutes, got 12"),
        (#""selfExtension": {"minutes": 15, "perWeek": 0}"#, "self-service extra time uses per week must be between 1 and 21, got 0"),
    ]

    @Test("each broken rule is one line naming the rule and the value", arguments: errorCases)
    func errors(_ field: String, _ message: String) {
        #expect(decodeError(#"{"user": "kid", "# + field + "}") == message)
    }

    @Test("at most 16 windows and 64 exceptions")
    func counts() {
        let windows = (0..<17).map { downtime("w\($0)", "08:00-09:00") }
        #expect(validationError(rulesPolicy(downtime: windows)) == "downtime may hold at most 16 windows, got 17")
        #expect(validationError(rulesPolicy(downtime: Array(windows.prefix(16)))) == nil)
        let exceptions = (0..<65).map { PolicyException(from: localDate("2026-01-01").adding(days: $0), to: localDate("2026-01-01").adding(days: $0)) }
        #expect(validationError(rulesPolicy(exceptions: exceptions)) == "exceptions may hold at most 64 date ranges, got 65")
    }

    @Test(
        "weekday sets: ranges, lists, weekend and weekdays",
        arguments: [
            ("mon-fri", [Weekday.mon, .tue, .wed, .thu, .fri]), ("sat,sun", [.sat, .sun]), ("weekend", [.sat, .sun]),
            ("weekdays", [.mon, .tue, .wed, .thu, .fri]), ("fri-mon", [.mon, .fri, .sat, .sun]), ("Tuesday", [.tue]),
            ("mon,wed-thu,sun", [.mon, .wed, .thu, .sun]), ("all", Weekday.allCases),
        ])
    func weekdaySets(_ text: String, _ days: [Weekday]) throws {
        #expect(try Weekday.parseSet(text) == days)
    }

    @Test("weekday sets: errors and the short form")
    func weekdaySetErrors() {
        #expect(policyErrorMessage { () throws(PolicyError) in _ = try Weekday.parseSet("mon-funday") }
            == #"days must be weekdays like mon, mon-fri, sat,sun, weekend or weekdays, got "mon-funday""#)
        #expect(policyErrorMessage { () throws(PolicyError) in _ = try Weekday.parseSet("mon,someday") }
            == #"weekday must be one of mon, tue, wed, thu, fri, sat, sun, got "someday""#)
        #expect(Weekday.describe([.mon, .tue, .wed, .thu, .fri]) == "mon-fri")
        #expect(Weekday.describe([.sat, .sun]) == "sat,sun")
        #expect(Weekday.describe([.mon, .wed, .thu, .fri, .sun]) == "mon,wed-fri,sun")
        #expect(Weekday.describe(Weekday.allCases) == "every day")
    }

    @Test("two parents adding different downtime windows concurrently: both kept, no conflict")
    func mergeWindows() {
        typealias F = MergeFixture
        let a = F.input("a", version: 2, author: F.parentA, time: 200, policy: F.policy { $0.downtime = [downtime("school", "08:00-15:00", "mon-fri")] })
        let b = F.input("b", version: 2, author: F.parentB, time: 150, policy: F.policy { $0.downtime = [downtime("dinner", "18:30-19:15")] })
        let result = PolicyMerge.fold([F.first, a, b])
        #expect(PolicyMerge.fold([b, F.first, a]) == result)
        #expect(result.policy?.downtime == [downtime("dinner", "18:30-19:15"), downtime("school", "08:00-15:00", "mon-fri")])
        #expect(result.conflicts == [])

        // Both change the same window: the later record's wins, and the conflict names the window.
        let base = F.input("r2", version: 2, time: 200, policy: F.policy { $0.downtime = [downtime("school", "08:00-15:00", "mon-fri")] })
        let c = F.input("c", version: 3, author: F.parentA, time: 300, policy: F.policy { $0.downtime = [downtime("school", "08:00-14:00", "mon-fri")] })
        let d = F.input("d", version: 3, author: F.parentB, time: 350, policy: F.policy {
            $0.downtime = [downtime("school", "08:00-16:00", "mon-fri")]
            $0.exceptions = [PolicyException(from: localDate("2026-12-24"), to: localDate("2026-12-24"), dailyLimit: .unlimited)]
        })
        let merged = PolicyMerge.fold([F.first, base, c, d])
        #expect(merged.policy?.downtime == [downtime("school", "08:00-16:00", "mon-fri")])
        #expect(merged.policy?.exceptions.map(\.range) == ["2026-12-24"])
        #expect(merged.conflicts == ["downtime[school]"])

        // One parent removes a window while the other adds an exception: both happen.
        let e = F.input("e", version: 3, author: F.parentA, time: 300, policy: F.policy { _ in })
        let f = F.input("f", version: 3, author: F.parentB, time: 310, policy: F.policy {
            $0.downtime = [downtime("school", "08:00-15:00", "mon-fri")]
            $0.weeklyLimitMinutes = 600
            $0.breaks = Breaks(afterMinutes: 45, lengthMinutes: 10)
        })
        let removed = PolicyMerge.fold([F.first, base, e, f])
        #expect(removed.policy?.downtime == [])
        #expect(removed.policy?.weeklyLimitMinutes == 600)
        #expect(removed.policy?.breaks == Breaks(afterMinutes: 45, lengthMinutes: 10))
        #expect(removed.conflicts == [])
    }
}

@Suite("Self-service extra time")
struct SelfExtensionTests {
    @Test("the socket's extend request, the room left in a week, and what the child is told")
    func extend() {
        #expect(AgentRequest.extend.line == #"{"command":"extend"}"#)
        #expect(AgentRequest.parse(#"{"command": "extend"}"#) == .success(.extend))
        let allowance = SelfExtension(minutes: 15, perWeek: 3)
        #expect(policyErrorMessage { () throws(PolicyError) in try allowance.checkRoom(usedThisWeek: 2) } == nil)
        #expect(
            policyErrorMessage { () throws(PolicyError) in try allowance.checkRoom(usedThisWeek: 3) }
                == "extra time without asking is used up this week (3 of 3); ask a parent with curfew request")
        #expect(
            SelfExtensionUse(minutes: 15, date: "2026-03-10", used: 1, perWeek: 3, limitMinutes: 135).message
                == "15m more today (1 of 3 this week); today's limit is now 2h15m")
        #expect(localDate("2026-03-29").weekStart == localDate("2026-03-23"))
        #expect(localDate("2026-03-23").weekStart == localDate("2026-03-23"))
    }
}

@Suite("Monitor only")
struct MonitorOnlyTests {
    @Test("lockout none: warned and reported, nothing stopped, logins let in with the reason")
    func none() throws {
        var policy = DowntimeTests.family.policy
        policy.lockout = .none
        policy.apps = [AppRule(app: "steam", rule: .block)]
        #expect(try Policy.decode(policy.json).lockout == Lockout.none)
        let schedule = Schedule(policy: policy, zone: DowntimeTests.family.zone)
        let during = Enforcement.plan(
            schedule: schedule, now: utcInstant("2026-03-10T10:00Z"), usage: DayUsage(screenSeconds: 0), running: ["steam", "minecraft"],
            tracked: ["steam", "minecraft"])
        #expect(during.blocked && during.decision.reason == "downtime: school until 15:00")
        #expect(during.sessionAction == .none && during.stopApps.isEmpty)
        let before = Enforcement.plan(
            schedule: schedule, now: utcInstant("2026-03-10T18:50Z"), usage: DayUsage(screenSeconds: 0), running: [], tracked: [])
        #expect(before.countdowns == [.downtime("evening"): 600])
        let login = LoginVerdict.decide(user: "kid", schedule: schedule, usedSeconds: 0, now: utcInstant("2026-03-10T10:00Z"))
        #expect(login == LoginVerdict(allowed: true, message: "kid may log in (monitor only: downtime: school until 15:00)"))
    }
}

@Suite("Break clock")
struct BreakClockTests {
    @Test("a stretch grows while counting; a pause of the break's length ends it, a shorter one does not")
    func stretch() {
        var clock = BreakClock()
        clock.advance(by: 40 * 60_000, counting: true, breakLength: 600)
        clock.advance(by: 5 * 60_000, counting: false, breakLength: 600)
        #expect(clock.continuousSeconds == 2400 && clock.pauseSeconds == 300)
        clock.advance(by: 5 * 60_000, counting: true, breakLength: 600)
        #expect(clock.continuousSeconds == 2700 && clock.pauseSeconds == 0)
        clock.advance(by: 10 * 60_000, counting: false, breakLength: 600)
        #expect(clock.continuousSeconds == 0 && clock.pauseSeconds == 600)
        clock.advance(by: 1000, counting: true, breakLength: 600)
        #expect(clock.continuousSeconds == 1 && clock.pauseSeconds == 0)
        var without = BreakClock()
        without.advance(by: 3_600_000, counting: true, breakLength: nil)
        without.advance(by: 3_600_000, counting: false, breakLength: nil)
        #expect(without.continuousSeconds == 3600)
    }

    @Test("kept across a restart: the time the agent was away is a pause, which ends the stretch only at a break's length")
    func restored() throws {
        var clock = BreakClock()
        clock.advance(by: 40 * 60_000, counting: true, breakLength: 600)
        clock.advance(by: 60_000, counting: false, breakLength: 600)
        let text = clock.persisted(at: Instant(milliseconds: 1_000_000))
        #expect(text == "2400000 60000 1000000")
        // A reboot of two minutes: three minutes of pause, the stretch goes on.
        let quick = try #require(BreakClock.restored(text, now: Instant(milliseconds: 1_000_000 + 120_000), breakLength: 600))
        #expect(quick.continuousSeconds == 2400 && quick.pauseSeconds == 180)
        // Away for nine more minutes than the pause had: a break's length in all, the stretch is over.
        let long = try #require(BreakClock.restored(text, now: Instant(milliseconds: 1_000_000 + 540_000), breakLength: 600))
        #expect(long.continuousSeconds == 0 && long.pauseSeconds == 600)
        // A wall clock set back counts no pause (and no screen time).
        let back = try #require(BreakClock.restored(text, now: .epoch, breakLength: 600))
        #expect(back.continuousSeconds == 2400 && back.pauseSeconds == 60)
        // Without breaks in the policy the stretch is kept as it is.
        #expect(BreakClock.restored(text, now: Instant(milliseconds: 1_000_000 + 86_400_000), breakLength: nil)?.continuousSeconds == 2400)
        for bad in ["", "1 2", "1 2 3 4", "-1 0 0", "a b c", "1  2 3"] {
            #expect(BreakClock.restored(bad, now: .epoch, breakLength: 600) == nil, "\(bad)")
        }
    }
}
