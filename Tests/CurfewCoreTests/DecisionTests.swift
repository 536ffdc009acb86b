import Testing

@testable import CurfewCore

/// One question to `Schedule.decide` and the whole answer expected, with times in UTC.
struct DecisionCase: Sendable, CustomTestStringConvertible {
    var label: String
    var schedule: Schedule
    var now: String
    var used: Int64
    var state: UseState
    var date: String
    var limit: Int?
    var limitLeft: Int64?
    var remaining: Int64?
    var next: (String, UseState)?
    var allowedAgain: String?

    var testDescription: String { label }

    var expected: Decision {
        Decision(
            state: state, date: localDate(date), limitMinutes: limit, usedSeconds: used, limitRemainingSeconds: limitLeft,
            remainingSeconds: remaining, nextChange: next.map { Decision.Change(at: utcInstant($0.0), state: $0.1) },
            allowedAgainAt: allowedAgain.map(utcInstant))
    }
}

@Suite("Decisions")
struct DecisionTests {
    // Europe/Berlin in June 2026 is on +02:00; 2026-06-05 is a Friday.
    static let berlin120 = schedule("Europe/Berlin", limit: .minutes(120))

    static let cases: [DecisionCase] = [
        DecisionCase(
            label: "allowed, the limit runs out before bedtime", schedule: berlin120, now: "2026-06-05T08:00Z", used: 1800,
            state: .allowed, date: "2026-06-05", limit: 120, limitLeft: 5400, remaining: 5400,
            next: ("2026-06-05T09:30Z", .limitReached), allowedAgain: "2026-06-05T08:00Z"),
        DecisionCase(
            label: "allowed, bedtime comes before the limit runs out", schedule: berlin120, now: "2026-06-05T18:30Z",
            used: 0, state: .allowed, date: "2026-06-05", limit: 120, limitLeft: 7200, remaining: 1800,
            next: ("2026-06-05T19:00Z", .bedtime), allowedAgain: "2026-06-05T18:30Z"),
        DecisionCase(
            label: "the limit runs out exactly when bedtime starts", schedule: berlin120, now: "2026-06-05T18:00Z",
            used: 3600, state: .allowed, date: "2026-06-05", limit: 120, limitLeft: 3600, remaining: 3600,
            next: ("2026-06-05T19:00Z", .bedtime), allowedAgain: "2026-06-05T18:00Z"),
        DecisionCase(
            label: "one second left", schedule: berlin120, now: "2026-06-05T10:00Z", used: 7199, state: .allowed,
            date: "2026-06-05", limit: 120, limitLeft: 1, remaining: 1, next: ("2026-06-05T10:00:01Z", .limitReached),
            allowedAgain: "2026-06-05T10:00Z"),
        DecisionCase(
            label: "limit reached in the evening: allowed again after bedtime the next morning", schedule: berlin120,
            now: "2026-06-05T16:00Z", used: 7200, state: .limitReached, date: "2026-06-05", limit: 120, limitLeft: 0,
            remaining: 0, next: ("2026-06-05T19:00Z", .bedtime), allowedAgain: "2026-06-06T05:00Z"),
        DecisionCase(
            label: "more used than the limit", schedule: berlin120, now: "2026-06-05T16:00Z", used: 9000,
            state: .limitReached, date: "2026-06-05", limit: 120, limitLeft: 0, remaining: 0,
            next: ("2026-06-05T19:00Z", .bedtime), allowedAgain: "2026-06-06T05:00Z"),
        DecisionCase(
            label: "limit reached without a bedtime: allowed again at midnight",
            schedule: schedule("Europe/Berlin", bedtime: "off", limit: .minutes(60)), now: "2026-06-05T16:00Z",
            used: 3600, state: .limitReached, date: "2026-06-05", limit: 60, limitLeft: 0, remaining: 0,
            next: ("2026-06-05T22:00Z", .allowed), allowedAgain: "2026-06-05T22:00Z"),
        DecisionCase(
            label: "bedtime before midnight", schedule: berlin120, now: "2026-06-05T21:00Z", used: 0, state: .bedtime,
            date: "2026-06-05", limit: 120, limitLeft: 7200, remaining: 0, next: ("2026-06-06T05:00Z", .allowed),
            allowedAgain: "2026-06-06T05:00Z"),
        DecisionCase(
            label: "bedtime after midnight, in the window that began the day before", schedule: berlin120,
            now: "2026-06-06T00:00Z", used: 0, state: .bedtime, date: "2026-06-06", limit: 120, limitLeft: 7200,
            remaining: 0, next: ("2026-06-06T05:00Z", .allowed), allowedAgain: "2026-06-06T05:00Z"),
        DecisionCase(
            label: "bedtime starts at its first second", schedule: berlin120, now: "2026-06-05T19:00Z", used: 0,
            state: .bedtime, date: "2026-06-05", limit: 120, limitLeft: 7200, remaining: 0,
            next: ("2026-06-06T05:00Z", .allowed), allowedAgain: "2026-06-06T05:00Z"),
        DecisionCase(
            label: "allowed from the first second after bedtime", schedule: berlin120, now: "2026-06-06T05:00Z", used: 0,
            state: .allowed, date: "2026-06-06", limit: 120, limitLeft: 7200, remaining: 7200,
            next: ("2026-06-06T07:00Z", .limitReached), allowedAgain: "2026-06-06T05:00Z"),
        DecisionCase(
            label: "bedtime wins over a reached limit", schedule: berlin120, now: "2026-06-05T20:00Z", used: 7200,
            state: .bedtime, date: "2026-06-05", limit: 120, limitLeft: 0, remaining: 0,
            next: ("2026-06-06T05:00Z", .allowed), allowedAgain: "2026-06-06T05:00Z"),
        DecisionCase(
            label: "unlimited and no bedtime: nothing ever changes",
            schedule: schedule("Europe/Berlin", bedtime: "off", limit: .unlimited), now: "2026-06-05T10:00Z",
            used: 50_000, state: .allowed, date: "2026-06-05", limit: nil, limitLeft: nil, remaining: nil, next: nil,
            allowedAgain: "2026-06-05T10:00Z"),
        DecisionCase(
            label: "unlimited with a bedtime: remaining is the time until bedtime",
            schedule: schedule("Europe/Berlin", limit: .unlimited), now: "2026-06-05T08:00Z", used: 30_000,
            state: .allowed, date: "2026-06-05", limit: nil, limitLeft: nil, remaining: 39_600,
            next: ("2026-06-05T19:00Z", .bedtime), allowedAgain: "2026-06-05T08:00Z"),
        DecisionCase(
            label: "a limit of 0 every day and no bedtime: never allowed",
            schedule: schedule("Europe/Berlin", bedtime: "off", limit: .minutes(0)), now: "2026-06-05T10:00Z", used: 0,
            state: .limitReached, date: "2026-06-05", limit: 0, limitLeft: 0, remaining: 0, next: nil,
            allowedAgain: nil),
        DecisionCase(
            label: "a limit of 0 today, bedtime tonight, normal tomorrow",
            schedule: schedule("Europe/Berlin", limit: .minutes(60), weekdayLimits: [.fri: .minutes(0)]),
            now: "2026-06-05T10:00Z", used: 0, state: .limitReached, date: "2026-06-05", limit: 0, limitLeft: 0,
            remaining: 0, next: ("2026-06-05T19:00Z", .bedtime), allowedAgain: "2026-06-06T05:00Z"),
        DecisionCase(
            label: "limit reached on Friday, Saturday's limit is 0: allowed again on Sunday morning",
            schedule: schedule("Europe/Berlin", limit: .minutes(60), weekdayLimits: [.sat: .minutes(0)]),
            now: "2026-06-05T16:00Z", used: 3600, state: .limitReached, date: "2026-06-05", limit: 60, limitLeft: 0,
            remaining: 0, next: ("2026-06-05T19:00Z", .bedtime), allowedAgain: "2026-06-07T05:00Z"),
        DecisionCase(
            label: "allowed late on Friday, Saturday's limit is 0: the change is at midnight",
            schedule: schedule("Europe/Berlin", bedtime: "off", limit: .minutes(60), weekdayLimits: [.sat: .minutes(0)]),
            // Only 30 minutes of use are left: at midnight Saturday's limit of 0 blocks it.
            now: "2026-06-05T21:30Z", used: 0, state: .allowed, date: "2026-06-05", limit: 60, limitLeft: 3600,
            remaining: 1800, next: ("2026-06-05T22:00Z", .limitReached), allowedAgain: "2026-06-05T21:30Z"),
        DecisionCase(
            label: "unlimited on Friday, Saturday's limit is 0 and no bedtime: blocked at midnight",
            schedule: schedule("Europe/Berlin", bedtime: "off", limit: .unlimited, weekdayLimits: [.sat: .minutes(0)]),
            now: "2026-06-05T21:00Z", used: 20_000, state: .allowed, date: "2026-06-05", limit: nil, limitLeft: nil,
            remaining: 3600, next: ("2026-06-05T22:00Z", .limitReached), allowedAgain: "2026-06-05T21:00Z"),
        DecisionCase(
            label: "Saturday's limit is 0: allowed again when Sunday begins",
            schedule: schedule("Europe/Berlin", bedtime: "off", limit: .minutes(60), weekdayLimits: [.sat: .minutes(0)]),
            now: "2026-06-06T08:00Z", used: 0, state: .limitReached, date: "2026-06-06", limit: 0, limitLeft: 0,
            remaining: 0, next: ("2026-06-06T22:00Z", .allowed), allowedAgain: "2026-06-06T22:00Z"),
        DecisionCase(
            label: "a weekday bedtime off on Friday night: the limit decides",
            schedule: schedule("Europe/Berlin", limit: .minutes(60), weekdayBedtimes: [.fri: noBedtime]),
            now: "2026-06-05T21:00Z", used: 1800, state: .allowed, date: "2026-06-05", limit: 60, limitLeft: 1800,
            remaining: 1800, next: ("2026-06-05T21:30Z", .limitReached), allowedAgain: "2026-06-05T21:00Z"),
        // Extra time.
        DecisionCase(
            label: "extra minutes today raise the limit",
            schedule: schedule(
                "Europe/Berlin", limit: .minutes(60), adjustments: ["2026-06-05": DayAdjustment(extraMinutes: 30)]),
            now: "2026-06-05T08:00Z", used: 3600, state: .allowed, date: "2026-06-05", limit: 90, limitLeft: 1800,
            remaining: 1800, next: ("2026-06-05T08:30Z", .limitReached), allowedAgain: "2026-06-05T08:00Z"),
        DecisionCase(
            label: "extra minutes for tomorrow do not help today",
            schedule: schedule(
                "Europe/Berlin", limit: .minutes(60), adjustments: ["2026-06-06": DayAdjustment(extraMinutes: 30)]),
            now: "2026-06-05T08:00Z", used: 3600, state: .limitReached, date: "2026-06-05", limit: 60, limitLeft: 0,
            remaining: 0, next: ("2026-06-05T19:00Z", .bedtime), allowedAgain: "2026-06-06T05:00Z"),
        DecisionCase(
            label: "a bedtime delay moves the next change and the time remaining",
            schedule: schedule(
                "Europe/Berlin", limit: .minutes(120), adjustments: ["2026-06-05": DayAdjustment(bedtimeDelayMinutes: 30)]),
            now: "2026-06-05T18:30Z", used: 0, state: .allowed, date: "2026-06-05", limit: 120, limitLeft: 7200,
            remaining: 3600, next: ("2026-06-05T19:30Z", .bedtime), allowedAgain: "2026-06-05T18:30Z"),
        DecisionCase(
            label: "a bedtime delay lets the child back on at the old bedtime",
            schedule: schedule(
                "Europe/Berlin", limit: .minutes(120), adjustments: ["2026-06-05": DayAdjustment(bedtimeDelayMinutes: 30)]),
            now: "2026-06-05T19:10Z", used: 0, state: .allowed, date: "2026-06-05", limit: 120, limitLeft: 7200,
            remaining: 1200, next: ("2026-06-05T19:30Z", .bedtime), allowedAgain: "2026-06-05T19:10Z"),
        // Around DST changes the real time counts, not the wall clock.
        DecisionCase(
            label: "Berlin spring forward: from 00:30 to a 02:30 bedtime, moved to 03:00, is 90 minutes",
            schedule: schedule("Europe/Berlin", bedtime: "02:30-06:00"), now: "2026-03-28T23:30Z", used: 0,
            state: .allowed, date: "2026-03-29", limit: nil, limitLeft: nil, remaining: 5400,
            next: ("2026-03-29T01:00Z", .bedtime), allowedAgain: "2026-03-28T23:30Z"),
        DecisionCase(
            label: "Berlin fall back: 00:00 to a 02:30 bedtime is 150 minutes",
            schedule: schedule("Europe/Berlin", bedtime: "02:30-06:00"), now: "2026-10-24T22:00Z", used: 0,
            state: .allowed, date: "2026-10-25", limit: nil, limitLeft: nil, remaining: 9000,
            next: ("2026-10-25T00:30Z", .bedtime), allowedAgain: "2026-10-24T22:00Z"),
        DecisionCase(
            label: "Berlin spring forward: bedtime ends at 07:00 summer time",
            schedule: schedule("Europe/Berlin", limit: .minutes(60)), now: "2026-03-28T21:00Z", used: 0, state: .bedtime,
            date: "2026-03-28", limit: 60, limitLeft: 3600, remaining: 0, next: ("2026-03-29T05:00Z", .allowed),
            allowedAgain: "2026-03-29T05:00Z"),
        DecisionCase(
            label: "Berlin: limit reached before the short night, allowed again at 00:00",
            schedule: schedule("Europe/Berlin", bedtime: "off", limit: .minutes(60)), now: "2026-03-28T19:00Z",
            used: 3600, state: .limitReached, date: "2026-03-28", limit: 60, limitLeft: 0, remaining: 0,
            next: ("2026-03-28T23:00Z", .allowed), allowedAgain: "2026-03-28T23:00Z"),
        DecisionCase(
            label: "Lord Howe: limit reached, the new day starts at 00:00 +11:00",
            schedule: schedule("Australia/Lord_Howe", bedtime: "off", limit: .minutes(60)), now: "2026-04-04T10:00Z",
            used: 3600, state: .limitReached, date: "2026-04-04", limit: 60, limitLeft: 0, remaining: 0,
            next: ("2026-04-04T13:00Z", .allowed), allowedAgain: "2026-04-04T13:00Z"),
        DecisionCase(
            label: "Lord Howe: bedtime ends at 07:00 +10:30 after the long night",
            schedule: schedule("Australia/Lord_Howe", limit: .minutes(60)), now: "2026-04-04T12:00Z", used: 0,
            state: .bedtime, date: "2026-04-04", limit: 60, limitLeft: 3600, remaining: 0,
            next: ("2026-04-04T20:30Z", .allowed), allowedAgain: "2026-04-04T20:30Z"),
        DecisionCase(
            label: "Havana: limit reached on the evening before the skipped midnight",
            schedule: schedule("America/Havana", bedtime: "off", limit: .minutes(60)), now: "2026-03-08T01:00Z",
            used: 3600, state: .limitReached, date: "2026-03-07", limit: 60, limitLeft: 0, remaining: 0,
            next: ("2026-03-08T05:00Z", .allowed), allowedAgain: "2026-03-08T05:00Z"),
        DecisionCase(
            label: "Santiago: bedtime through the night the clocks go back",
            schedule: schedule("America/Santiago", limit: .minutes(60)), now: "2026-04-05T02:00Z", used: 0,
            state: .bedtime, date: "2026-04-04", limit: 60, limitLeft: 3600, remaining: 0,
            next: ("2026-04-05T11:00Z", .allowed), allowedAgain: "2026-04-05T11:00Z"),
        DecisionCase(
            label: "New York: allowed on the long day, bedtime at 21:00 EST",
            schedule: schedule("America/New_York", limit: .unlimited), now: "2026-11-01T12:00Z", used: 0,
            state: .allowed, date: "2026-11-01", limit: nil, limitLeft: nil, remaining: 14 * 3600,
            next: ("2026-11-02T02:00Z", .bedtime), allowedAgain: "2026-11-01T12:00Z"),
    ]

    @Test("decide", arguments: cases)
    func decide(_ test: DecisionCase) {
        let decision = test.schedule.decide(now: utcInstant(test.now), usedSeconds: test.used)
        #expect(decision == test.expected)
    }

    @Test("reasons in words for the child")
    func reasons() {
        let berlin = schedule("Europe/Berlin", limit: .minutes(90), weekdayLimits: [.sat: .minutes(0)])
        #expect(berlin.decide(now: utcInstant("2026-06-05T08:00Z"), usedSeconds: 0).reason == nil)
        #expect(berlin.decide(now: utcInstant("2026-06-05T21:00Z"), usedSeconds: 0).reason == "it is bedtime")
        #expect(berlin.decide(now: utcInstant("2026-06-05T08:00Z"), usedSeconds: 5400).reason == "today's limit of 1h30m is used up")
        #expect(berlin.decide(now: utcInstant("2026-06-06T08:00Z"), usedSeconds: 0).reason == "no screen time is allowed today")
        let twoHours = schedule("Europe/Berlin", limit: .minutes(120))
        #expect(twoHours.decide(now: utcInstant("2026-06-05T08:00Z"), usedSeconds: 7200).reason == "today's limit of 2h is used up")
    }

    @Test("the answer agrees with state(at:) and periods(on:) over a whole week, every 5 minutes")
    func consistency() {
        for zone in ["Europe/Berlin", "Australia/Lord_Howe", "America/Havana"] {
            let schedule = schedule(zone, limit: .minutes(90), weekdayLimits: [.sat: .minutes(0)])
            // Two weeks that include a DST change in each zone.
            let start: Instant =
                switch zone {
                case "Europe/Berlin": utcInstant("2026-03-23T00:00Z")
                case "Australia/Lord_Howe": utcInstant("2026-03-30T00:00Z")
                default: utcInstant("2026-03-02T00:00Z")
                }
            var now = start
            while now < start + .seconds(14 * 86_400) {
                let decision = schedule.decide(now: now, usedSeconds: 1800)
                #expect(decision.state == schedule.state(at: now, usedSeconds: 1800))
                let inBedtime = schedule.periods(on: decision.date).contains {
                    $0.state == .bedtime && $0.start <= now && now < $0.end
                }
                #expect((decision.state == .bedtime) == inBedtime, "\(zone) \(now)")
                if let change = decision.nextChange { #expect(change.at > now) }
                if decision.state == .allowed {
                    #expect(decision.allowedAgainAt == now)
                    #expect((decision.remainingSeconds ?? 0) > 0)
                } else {
                    #expect(decision.remainingSeconds == 0)
                    #expect(decision.allowedAgainAt.map { $0 > now } ?? true)
                }
                now += .seconds(300)
            }
        }
    }
}
