import Foundation
import Testing

@testable import CurfewCore

// Extra time that answers the need: what blocks a child when they ask, and what a
// parent's approval lifts.

/// Limit 2 h, a weekly budget of 10 h, bedtime 21:00-07:00, downtime `school` 08:00-15:00 on
/// weekdays, breaks of 10 min after 45 min, `minecraft` limited to 1 h, `steam` blocked; in UTC.
/// 2026-11-25 is a Wednesday.
func extraTimeSchedule(adjustments: [LocalDate: DayAdjustment] = [:], breaks: Bool = true, weekly: Int? = 600) -> Schedule {
    var policy = rulesPolicy(
        bedtime: "21:00-07:00", limit: .minutes(120), weekly: weekly, downtime: [downtime("school", "08:00-15:00", "mon-fri")],
        breaks: breaks ? Breaks(afterMinutes: 45, lengthMinutes: 10) : nil)
    policy.apps = [AppRule(app: "minecraft", rule: .limit(minutes: 60)), AppRule(app: "steam", rule: .block)]
    return Schedule(policy: policy, zone: zoneRules("UTC"), adjustments: adjustments)
}

let wednesday = try! LocalDate.parse("2026-11-25")

struct BlockCase: Sendable, CustomTestStringConvertible {
    var label: String
    var time: String
    var usage: DayUsage
    var app: String?
    var expected: UseBlock?

    init(_ label: String, _ time: String, _ usage: DayUsage, app: String? = nil, _ expected: UseBlock?) {
        self.label = label
        self.time = time
        self.usage = usage
        self.app = app
        self.expected = expected
    }

    var testDescription: String { label }
}

@Suite("What blocks a child when they ask")
struct UseBlockTests {
    static let cases: [BlockCase] = [
        .init("nothing blocks", "2026-11-25T16:00Z", DayUsage(screenSeconds: 600), nil),
        .init("daily limit used up", "2026-11-25T16:00Z", DayUsage(screenSeconds: 7200), .dailyLimit),
        .init(
            "weekly budget used up before the day's", "2026-11-25T16:00Z", DayUsage(screenSeconds: 600, weekSeconds: 36_000),
            .weeklyLimit),
        .init("bedtime", "2026-11-25T21:30Z", DayUsage(screenSeconds: 0), .bedtime),
        .init("bedtime after midnight", "2026-11-26T06:00Z", DayUsage(screenSeconds: 0), .bedtime),
        .init("bedtime comes before a used-up limit", "2026-11-25T22:00Z", DayUsage(screenSeconds: 7200), .bedtime),
        .init("downtime window by name", "2026-11-25T10:00Z", DayUsage(screenSeconds: 0), .downtime("school")),
        .init(
            "break after 45 min of use", "2026-11-25T16:00Z", DayUsage(screenSeconds: 2700, continuousSeconds: 2700),
            .breakTime),
        .init(
            "a pause of the break's length ends it", "2026-11-25T16:00Z",
            DayUsage(screenSeconds: 2700, continuousSeconds: 2700, pauseSeconds: 600), nil),
        .init(
            "an app over its own limit, named", "2026-11-25T16:00Z", DayUsage(screenSeconds: 3600, appSeconds: ["minecraft": 3600]),
            app: "minecraft", .appLimit("minecraft")),
        .init(
            "an app within its limit", "2026-11-25T16:00Z", DayUsage(screenSeconds: 3600, appSeconds: ["minecraft": 3000]),
            app: "minecraft", nil),
        .init(
            "an app over its limit, not named: the request is for screen time", "2026-11-25T16:00Z",
            DayUsage(screenSeconds: 3600, appSeconds: ["minecraft": 3600]), nil),
        .init(
            "the day's block comes before an app's", "2026-11-25T16:00Z",
            DayUsage(screenSeconds: 7200, appSeconds: ["minecraft": 3600]), app: "minecraft", .dailyLimit),
        .init("an app without a limit", "2026-11-25T16:00Z", DayUsage(screenSeconds: 600, appSeconds: ["steam": 600]), app: "steam", nil),
    ]

    @Test(arguments: cases)
    func table(_ test: BlockCase) {
        let block = ExtraTime.block(schedule: extraTimeSchedule(), now: utcInstant(test.time), usage: test.usage, app: test.app)
        #expect(block == test.expected)
    }

    /// The cause is the enforcer's: whenever the plan blocks use, the cause names the same state.
    @Test func sameDecisionAsTheEnforcer() {
        let schedule = extraTimeSchedule()
        var instant = utc("2026-11-23T00:00Z")
        while instant < utc("2026-11-30T00:00Z") {
            for used: Int64 in [0, 2700, 7200] {
                let usage = DayUsage(screenSeconds: used, weekSeconds: used, continuousSeconds: used == 2700 ? 2700 : 0)
                let plan = Enforcement.plan(schedule: schedule, now: Instant(seconds: instant), usage: usage, running: [], tracked: [])
                let block = ExtraTime.block(schedule: schedule, now: Instant(seconds: instant), usage: usage, app: nil)
                let expected: UseBlock? =
                    switch plan.decision.state {
                    case .allowed: nil
                    case .bedtime: .bedtime
                    case .downtime: .downtime(plan.decision.window ?? "")
                    case .limitReached: .dailyLimit
                    case .weekLimitReached: .weeklyLimit
                    case .breakTime: .breakTime
                    }
                #expect(block == expected, "\(instant) \(used)")
            }
            instant += 1800
        }
    }

    @Test(arguments: [
        (UseBlock.dailyLimit, "daily-limit", "daily limit"), (.weeklyLimit, "weekly-limit", "weekly budget"),
        (.bedtime, "bedtime", "bedtime"), (.downtime("school"), "downtime:school", "downtime school"),
        (.breakTime, "break", "break"), (.appLimit("minecraft"), "app-limit:minecraft", "minecraft's limit"),
    ])
    func codes(_ block: UseBlock, _ code: String, _ words: String) {
        #expect(block.code == code)
        #expect(UseBlock(code: code) == block)
        #expect(block.words == words)
    }

    @Test func unknownCodes() {
        for code in ["", "downtime:", "app-limit:", "limit", "bedtime ", "Bedtime"] { #expect(UseBlock(code: code) == nil, "\(code)") }
    }
}

struct LiftCase: Sendable, CustomTestStringConvertible {
    var label: String
    var block: UseBlock?
    var app: String?
    var time: String
    var minutes: Int
    var expected: ExtraTime.Plan

    init(_ label: String, _ block: UseBlock?, app: String? = nil, _ time: String, _ minutes: Int, _ expected: ExtraTime.Plan) {
        self.label = label
        self.block = block
        self.app = app
        self.time = time
        self.minutes = minutes
        self.expected = expected
    }

    var testDescription: String { label }
}

@Suite("What approving a request lifts")
struct ExtraTimePlanTests {
    static let thursday = wednesday.adding(days: 1)
    static let tuesday = wednesday.adding(days: -1)

    static let cases: [LiftCase] = [
        .init(
            "daily limit: more screen time today, the week's too", .dailyLimit, "2026-11-25T16:00Z", 30,
            .init(date: wednesday, extraMinutes: 30, words: "30m more screen time today (this week's budget too)")),
        .init(
            "weekly budget: more screen time today", .weeklyLimit, "2026-11-25T16:00Z", 45,
            .init(date: wednesday, extraMinutes: 45, words: "45m more screen time today (this week's budget too)")),
        .init(
            "nothing blocked: more screen time", nil, "2026-11-25T16:00Z", 15,
            .init(date: wednesday, extraMinutes: 15, words: "15m more screen time today (this week's budget too)")),
        .init(
            "bedtime: starts 30 min from now (10 min past its start: 40 min later)", .bedtime, "2026-11-25T21:10Z", 30,
            .init(date: wednesday, bedtimeDelayMinutes: 40, words: "until 21:40 (bedtime moved)")),
        .init(
            "bedtime after midnight: last night's moves", .bedtime, "2026-11-26T02:00Z", 30,
            .init(date: wednesday, bedtimeDelayMinutes: 330, words: "until 02:30 (bedtime moved)")),
        .init(
            "downtime window: its start moves to 30 min from now", .downtime("school"), "2026-11-25T10:00Z", 30,
            .init(
                date: wednesday, lift: GrantLift(downtime: .init(window: "school", delayMinutes: 150)),
                words: "until 10:30 (downtime school moved)")),
        .init(
            "downtime window near its end: lifted for the rest of the day", .downtime("school"), "2026-11-25T14:50Z", 30,
            .init(
                date: wednesday, lift: GrantLift(downtime: .init(window: "school", delayMinutes: 440)),
                words: "no more downtime school today (it would have ended at 15:00)")),
        .init(
            "a downtime window that is over: more screen time instead", .downtime("school"), "2026-11-25T16:00Z", 30,
            .init(date: wednesday, extraMinutes: 30, words: "30m more screen time today (this week's budget too)")),
        .init(
            "bedtime that is over: more screen time instead", .bedtime, "2026-11-25T16:00Z", 30,
            .init(date: wednesday, extraMinutes: 30, words: "30m more screen time today (this week's budget too)")),
        .init(
            "break: ended now", .breakTime, "2026-11-25T16:00Z", 30,
            .init(date: wednesday, lift: GrantLift(endsBreak: true), words: "the end of the break now (the next one after 45m of use)")),
        .init(
            "app limit: more of that app", .appLimit("minecraft"), "2026-11-25T16:00Z", 30,
            .init(date: wednesday, lift: GrantLift(app: .init(app: "minecraft", minutes: 30)), words: "30m more of minecraft today")),
        .init(
            "a request that names a limited app, nothing blocking: more of that app", nil, app: "minecraft", "2026-11-25T16:00Z", 20,
            .init(date: wednesday, lift: GrantLift(app: .init(app: "minecraft", minutes: 20)), words: "20m more of minecraft today")),
        .init(
            "a request that names an app at bedtime: bedtime moves", .bedtime, app: "minecraft", "2026-11-25T21:00Z", 30,
            .init(date: wednesday, bedtimeDelayMinutes: 30, words: "until 21:30 (bedtime moved)")),
    ]

    @Test(arguments: cases)
    func table(_ test: LiftCase) throws {
        let plan = try ExtraTime.plan(
            for: test.block, app: test.app, minutes: test.minutes, user: "kid", schedule: extraTimeSchedule(), now: utcInstant(test.time))
        #expect(plan.date == test.expected.date)
        #expect(plan.extraMinutes == test.expected.extraMinutes)
        #expect(plan.bedtimeDelayMinutes == test.expected.bedtimeDelayMinutes)
        #expect(plan.lift == test.expected.lift)
        if !test.expected.words.isEmpty { #expect(plan.words == test.expected.words) }
    }

    @Test func bedtimeAfterMidnightTooLongIsRefused() {
        // 06:00 is 9 h past 21:00: a delay of 570 min is more than a grant may move bedtime.
        #expect(throws: PolicyError("bedtime delay must be between 1 and 480 minutes, got 570")) {
            try ExtraTime.plan(for: .bedtime, app: nil, minutes: 30, user: "kid", schedule: extraTimeSchedule(), now: utcInstant("2026-11-26T06:00Z"))
        }
    }

    /// Each plan, applied as a grant, lifts the block it was made for.
    @Test func eachPlanLiftsItsBlock() throws {
        let cases: [(UseBlock?, String?, String, DayUsage)] = [
            (.dailyLimit, nil, "2026-11-25T16:00Z", DayUsage(screenSeconds: 7200, weekSeconds: 7200)),
            (.weeklyLimit, nil, "2026-11-25T16:00Z", DayUsage(screenSeconds: 600, weekSeconds: 36_000)),
            (.bedtime, nil, "2026-11-25T21:10Z", DayUsage(screenSeconds: 0)),
            (.downtime("school"), nil, "2026-11-25T10:00Z", DayUsage(screenSeconds: 0)),
            (.appLimit("minecraft"), "minecraft", "2026-11-25T16:00Z", DayUsage(screenSeconds: 3600, appSeconds: ["minecraft": 3600])),
        ]
        for (block, app, time, usage) in cases {
            let before = extraTimeSchedule()
            #expect(ExtraTime.block(schedule: before, now: utcInstant(time), usage: usage, app: app) == block)
            let plan = try ExtraTime.plan(for: block, app: app, minutes: 30, user: "kid", schedule: before, now: utcInstant(time))
            var adjustment = DayAdjustment(extraMinutes: plan.extraMinutes, bedtimeDelayMinutes: plan.bedtimeDelayMinutes)
            if let app = plan.lift.app { adjustment.appExtraMinutes[app.app] = app.minutes }
            if let window = plan.lift.downtime { adjustment.downtimeDelayMinutes[window.window] = window.delayMinutes }
            let after = extraTimeSchedule(adjustments: [plan.date: adjustment])
            #expect(ExtraTime.block(schedule: after, now: utcInstant(time), usage: usage, app: app) == nil, "\(String(describing: block))")
            // 29 minutes later the child still has time; 31 minutes later the block (or another) is back.
            let later = utc(time) + 29 * 60
            var used = usage
            used.screenSeconds += 29 * 60
            used.weekSeconds = used.weekSeconds.map { $0 + 29 * 60 }
            if let app { used.appSeconds[app, default: 0] += 29 * 60 }
            #expect(ExtraTime.block(schedule: after, now: Instant(seconds: later), usage: used, app: app) == nil, "\(String(describing: block)) later")
        }
    }

    @Test func nothingToLift() {
        // No daily limit and no weekly budget: more screen time lifts nothing.
        let free = Schedule(policy: rulesPolicy(), zone: zoneRules("UTC"))
        #expect(throws: PolicyError("kid has no daily limit or weekly budget today; more screen time would lift nothing")) {
            try ExtraTime.plan(for: nil, app: nil, minutes: 30, user: "kid", schedule: free, now: utcInstant("2026-11-25T16:00Z"))
        }
        // An app with no limit gains nothing from app time.
        #expect(throws: PolicyError("steam has no daily limit for kid; more time for it would lift nothing")) {
            try ExtraTime.plan(
                for: .appLimit("steam"), app: "steam", minutes: 30, user: "kid", schedule: extraTimeSchedule(), now: utcInstant("2026-11-25T16:00Z"))
        }
        #expect(throws: PolicyError("extra time must be between 1 and 480 minutes, got 0")) {
            try ExtraTime.plan(for: nil, app: nil, minutes: 0, user: "kid", schedule: extraTimeSchedule(), now: utcInstant("2026-11-25T16:00Z"))
        }
    }
}

@Suite("Grants that lift more than screen time")
struct GrantLiftTests {
    /// Extra time raises the week's budget from its day on, for the rest of that week only.
    @Test func extraTimeCountsForTheWeek() {
        let schedule = extraTimeSchedule(adjustments: [wednesday: DayAdjustment(extraMinutes: 30)])
        #expect(schedule.weekLimitMinutes(on: wednesday.adding(days: -1)) == 600)
        #expect(schedule.weekLimitMinutes(on: wednesday) == 630)
        #expect(schedule.weekLimitMinutes(on: wednesday.adding(days: 4)) == 630)
        #expect(schedule.weekLimitMinutes(on: wednesday.adding(days: 5)) == 600)
        let now = utcInstant("2026-11-25T16:00Z")
        let decision = schedule.decide(now: now, usage: ScheduleUsage(daySeconds: 600, weekSeconds: 36_000))
        #expect(decision.state == .allowed)
        #expect(decision.weekRemainingSeconds == 1800)
        #expect(decision.nextChange == Decision.Change(at: now + .seconds(1800), state: .weekLimitReached))
    }

    @Test func appExtraRaisesTheAppsLimit() {
        let schedule = extraTimeSchedule(adjustments: [wednesday: DayAdjustment(appExtraMinutes: ["minecraft": 30])])
        #expect(schedule.appLimitMinutes("minecraft", on: wednesday) == 90)
        #expect(schedule.appLimitMinutes("minecraft", on: wednesday.adding(days: 1)) == 60)
        #expect(schedule.appLimitMinutes("steam", on: wednesday) == nil)
        let now = utc("2026-11-25T16:00Z")
        let usage = DayUsage(screenSeconds: 3600, appSeconds: ["minecraft": 3600])
        let plan = Enforcement.plan(schedule: schedule, now: Instant(seconds: now), usage: usage, running: ["minecraft"], tracked: ["minecraft"])
        #expect(plan.stopApps.isEmpty)
        #expect(plan.countdowns[.app("minecraft")] == 1800)
        var over = usage
        over.appSeconds["minecraft"] = 5400
        let stopped = Enforcement.plan(schedule: schedule, now: Instant(seconds: now), usage: over, running: ["minecraft"], tracked: ["minecraft"])
        #expect(stopped.stopApps == ["minecraft": .appLimit(minutes: 90)])
    }

    @Test func downtimeDelayMovesTheWindowsStart() {
        let schedule = extraTimeSchedule(adjustments: [wednesday: DayAdjustment(downtimeDelayMinutes: ["school": 150])])
        let periods = schedule.periods(on: wednesday).filter { $0.state == .downtime }
        #expect(periods == [Period(start: utcInstant("2026-11-25T10:30Z"), end: utcInstant("2026-11-25T15:00Z"), state: .downtime, window: "school")])
        // Thursday's window is untouched.
        #expect(
            schedule.periods(on: wednesday.adding(days: 1)).filter { $0.state == .downtime }.first?.start == utcInstant("2026-11-26T08:00Z"))
        // A delay past the window's end lifts it for that day.
        let lifted = extraTimeSchedule(adjustments: [wednesday: DayAdjustment(downtimeDelayMinutes: ["school": 420])])
        #expect(lifted.periods(on: wednesday).allSatisfy { $0.state != .downtime })
    }

    @Test func fold() {
        let day = wednesday
        func summary(_ lift: GrantLift, extra: Int = 0) -> GrantSummary {
            GrantSummary(
                id: "x", user: "kid", date: day, extraMinutes: extra, bedtimeDelayMinutes: 0, author: "0123456789abcdef", time: 0,
                requestId: nil, lift: lift)
        }
        let adjustments = GrantFold.adjustments([
            summary(GrantLift(app: .init(app: "minecraft", minutes: 30))),
            summary(GrantLift(app: .init(app: "minecraft", minutes: 15)), extra: 10),
            summary(GrantLift(downtime: .init(window: "school", delayMinutes: 20))),
            summary(GrantLift(endsBreak: true)),
        ])
        #expect(
            adjustments["kid"]?[day]
                == DayAdjustment(extraMinutes: 10, appExtraMinutes: ["minecraft": 45], downtimeDelayMinutes: ["school": 20]))
    }

    @Test func breakClockEnds() {
        var clock = BreakClock()
        clock.advance(by: 2_700_000, counting: true, breakLength: 600)
        #expect(clock.continuousSeconds == 2700)
        clock.endBreak()
        #expect(clock.continuousSeconds == 0)
        #expect(clock.pauseSeconds == 0)
    }

    @Test func childMessages() {
        let now = utc("2026-11-25T21:10Z")
        func summary(extra: Int = 0, delay: Int = 0, lift: GrantLift = GrantLift(), date: LocalDate = wednesday) -> GrantSummary {
            GrantSummary(
                id: "x", user: "kid", date: date, extraMinutes: extra, bedtimeDelayMinutes: delay, author: "0123456789abcdef",
                time: 0, requestId: nil, lift: lift)
        }
        let bedtime = summary(delay: 40)
        #expect(
            ExtraTime.childMessage(bedtime, schedule: extraTimeSchedule(adjustments: [wednesday: DayAdjustment(bedtimeDelayMinutes: 40)]), now: Instant(seconds: now))
                == "a parent moved bedtime: you may use the computer until 21:40")
        #expect(
            ExtraTime.childMessage(summary(extra: 30), schedule: extraTimeSchedule(), now: Instant(seconds: now))
                == "a parent gave you 30m more screen time today")
        #expect(
            ExtraTime.childMessage(summary(lift: GrantLift(app: .init(app: "minecraft", minutes: 30))), schedule: extraTimeSchedule(), now: Instant(seconds: now))
                == "a parent gave you 30m more of minecraft today")
        let school = summary(lift: GrantLift(downtime: .init(window: "school", delayMinutes: 150)))
        #expect(
            ExtraTime.childMessage(
                school, schedule: extraTimeSchedule(adjustments: [wednesday: DayAdjustment(downtimeDelayMinutes: ["school": 150])]),
                now: utcInstant("2026-11-25T10:00Z"))
                == "a parent moved downtime school: you may use the computer until 10:30")
        #expect(
            ExtraTime.childMessage(summary(lift: GrantLift(endsBreak: true)), schedule: extraTimeSchedule(), now: Instant(seconds: now))
                == "a parent ended your break")
        // Another day's grant is not news now.
        #expect(ExtraTime.childMessage(summary(extra: 30, date: wednesday.adding(days: 3)), schedule: extraTimeSchedule(), now: Instant(seconds: now)) == nil)
    }
}

@Suite("Grant records with lifts")
struct GrantLiftRecordTests {
    func record(_ lift: GrantLift, extra: Int = 0) -> GrantRecord {
        GrantRecord(
            user: "kid", date: wednesday, extraMinutes: extra, bedtimeDelayMinutes: 0, author: "0123456789abcdef", time: 1_764_000_000,
            nonce: String(repeating: "ab", count: 16), lift: lift)
    }

    func bytes(_ record: GrantRecord) -> [UInt8] {
        guard case .object(var object) = record.signedPayload else { return [] }
        object["signature"] = .string("sig")
        return JSONValue.object(object).canonicalBytes
    }

    @Test func roundTrip() throws {
        for lift in [
            GrantLift(app: .init(app: "minecraft", minutes: 30)), GrantLift(downtime: .init(window: "school", delayMinutes: 45)),
            GrantLift(endsBreak: true), GrantLift(),
        ] {
            let original = record(lift, extra: lift.isEmpty ? 30 : 0)
            let parsed = try GrantRecord.parse(bytes(original))
            #expect(parsed.record == original)
        }
    }

    /// A grant without lifts has the fields it always had: its bytes read the same on an older agent.
    @Test func plainGrantHasNoNewFields() {
        let text = String(decoding: bytes(record(GrantLift(), extra: 30)), as: UTF8.self)
        for field in ["app", "appMinutes", "downtimeWindow", "downtimeDelayMinutes", "endsBreak"] {
            #expect(!text.contains("\"\(field)\""), "\(field)")
        }
        let app = String(decoding: bytes(record(GrantLift(app: .init(app: "minecraft", minutes: 30)))), as: UTF8.self)
        #expect(app.contains(#""app":"minecraft","appMinutes":30"#))
    }

    @Test func invalid() {
        #expect(throws: PolicyError("extra time for minecraft must be between 1 and 480 minutes, got 0")) {
            try record(GrantLift(app: .init(app: "minecraft", minutes: 0))).validate()
        }
        #expect(throws: PolicyError("downtime delay must be between 1 and 480 minutes, got 481")) {
            try record(GrantLift(downtime: .init(window: "school", delayMinutes: 481))).validate()
        }
        #expect(throws: (any Error).self) { try record(GrantLift(app: .init(app: "Mine Craft", minutes: 30))).validate() }
        // Half of a pair, or endsBreak false, is not a grant this version writes.
        var half = bytes(record(GrantLift(app: .init(app: "minecraft", minutes: 30))))
        half = Array(String(decoding: half, as: UTF8.self).replacingOccurrences(of: #""appMinutes":30,"#, with: "").utf8)
        #expect(throws: RecordError.self) { try GrantRecord.parse(half) }
    }

    /// What an agent that does not know a field does with it: refuses the record, naming the field
    /// (the agent answers with a `rejected` confirmation whose reason is this message).
    @Test func unknownFieldIsNamed() {
        guard case .object(var object) = record(GrantLift(), extra: 30).signedPayload else { return }
        object["appBonus"] = .int(5)
        object["signature"] = .string("sig")
        #expect(throws: RecordError("unknown record field \"appBonus\"")) { try GrantRecord.parse(JSONValue.object(object).canonicalBytes) }
    }
}

@Suite("The policy in force on past days")
struct PolicyHistoryTests {
    func record(_ version: Int, _ time: String, limit: TimeAllowance?) -> PolicyMerge.Input {
        PolicyMerge.Input(
            id: "r\(version)",
            record: PolicyRecord(
                user: "kid", version: version, baseVersion: version - 1, author: "0123456789abcdef", time: utc(time),
                policy: limit.map { Policy(user: "kid", dailyLimit: $0) }))
    }

    @Test func eachDayByTheRecordsMadeBeforeItEnded() {
        let records = [
            record(1, "2026-11-10T12:00Z", limit: .minutes(120)),
            record(2, "2026-11-12T23:59Z", limit: .minutes(60)),
            record(3, "2026-11-14T08:00Z", limit: nil),
        ]
        let zone = zoneRules("UTC")
        let days = PolicyHistory.policies(
            records: records.reversed(), zone: zone, from: try! LocalDate.parse("2026-11-09"), to: try! LocalDate.parse("2026-11-16"))
        func limit(_ date: String) -> TimeAllowance? { days[try! LocalDate.parse(date)]?.dailyLimit }
        #expect(limit("2026-11-09") == nil, "before the first record: none (the report takes today's)")
        #expect(limit("2026-11-10") == .minutes(120))
        #expect(limit("2026-11-11") == .minutes(120))
        #expect(limit("2026-11-12") == .minutes(60), "changed before the day ended")
        #expect(limit("2026-11-13") == .minutes(60))
        #expect(limit("2026-11-14") == .minutes(60), "removed: the last policy they had")
        #expect(limit("2026-11-16") == .minutes(60))
        // In Berlin the change at 23:59 UTC falls on the 13th.
        let berlin = PolicyHistory.policies(
            records: records, zone: zoneRules("Europe/Berlin"), from: try! LocalDate.parse("2026-11-12"), to: try! LocalDate.parse("2026-11-13"))
        #expect(berlin[try! LocalDate.parse("2026-11-12")]?.dailyLimit == .minutes(120))
        #expect(berlin[try! LocalDate.parse("2026-11-13")]?.dailyLimit == .minutes(60))
        #expect(PolicyHistory.policies(records: [], zone: zone, from: try! LocalDate.parse("2026-11-12"), to: try! LocalDate.parse("2026-11-13")).isEmpty)
    }
}

@Suite("What a parent granted that holds now")
struct AdjustmentInForceTests {
    /// Bedtime 21:00-07:00 and downtime `gaming` 23:30-01:00 every day, in UTC; on Wednesday night a
    /// parent moved bedtime 4 h (to 01:00) and `gaming` 60 min (to 00:30), and gave 30 min more.
    let schedule = Schedule(
        policy: rulesPolicy(bedtime: "21:00-07:00", downtime: [downtime("gaming", "23:30-01:00")]), zone: zoneRules("UTC"),
        adjustments: [wednesday: DayAdjustment(extraMinutes: 30, bedtimeDelayMinutes: 240, downtimeDelayMinutes: ["gaming": 60])])
    let thursday = wednesday.adding(days: 1)

    @Test func lastNightsDelaysPastMidnightHoldUntilTheirWindowsEnd() {
        let onWednesday = schedule.adjustmentInForce(on: wednesday, now: utcInstant("2026-11-25T22:00Z"))
        #expect(onWednesday == schedule.adjustments[wednesday], "the day's own grants, as they are")
        // After midnight: both windows began last night and still run; the extra time was Wednesday's.
        let early = schedule.adjustmentInForce(on: thursday, now: utcInstant("2026-11-26T00:10Z"))
        #expect(early == DayAdjustment(bedtimeDelayMinutes: 240, downtimeDelayMinutes: ["gaming": 60]))
        // `gaming` ended at 01:00; bedtime lasts until 07:00.
        let later = schedule.adjustmentInForce(on: thursday, now: utcInstant("2026-11-26T01:00Z"))
        #expect(later == DayAdjustment(bedtimeDelayMinutes: 240))
        #expect(schedule.adjustmentInForce(on: thursday, now: utcInstant("2026-11-26T07:00Z")).isEmpty)
    }

    @Test func theDaysOwnGrantWinsAndADelayThatEndsBeforeMidnightIsNotCarried() {
        var adjustments = schedule.adjustments
        adjustments[thursday] = DayAdjustment(bedtimeDelayMinutes: 15)
        let both = Schedule(policy: schedule.policy, zone: schedule.zone, adjustments: adjustments)
        #expect(both.adjustmentInForce(on: thursday, now: utcInstant("2026-11-26T00:10Z")).bedtimeDelayMinutes == 15)
        let daytime = Schedule(
            policy: rulesPolicy(bedtime: "13:00-15:00"), zone: zoneRules("UTC"),
            adjustments: [wednesday: DayAdjustment(bedtimeDelayMinutes: 60)])
        #expect(daytime.adjustmentInForce(on: thursday, now: utcInstant("2026-11-26T00:10Z")).isEmpty)
        // A bedtime moved from 21:00 to 22:00 is over the night's start by midnight: Thursday does not
        // have it, at any time.
        let hourLater = Schedule(
            policy: schedule.policy, zone: schedule.zone, adjustments: [wednesday: DayAdjustment(bedtimeDelayMinutes: 60)])
        #expect(hourLater.adjustmentInForce(on: thursday, now: utcInstant("2026-11-26T00:10Z")).isEmpty)
        // Moved past their ends (lifted for the night), both are still what holds until those ends.
        let lifted = Schedule(
            policy: schedule.policy, zone: schedule.zone,
            adjustments: [wednesday: DayAdjustment(bedtimeDelayMinutes: 480, downtimeDelayMinutes: ["gaming": 120])])
        #expect(
            lifted.adjustmentInForce(on: thursday, now: utcInstant("2026-11-26T00:10Z"))
                == DayAdjustment(bedtimeDelayMinutes: 480, downtimeDelayMinutes: ["gaming": 120]))
    }
}
