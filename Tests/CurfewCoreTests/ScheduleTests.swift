import Testing

@testable import CurfewCore

// MARK: - Helpers shared by the schedule and decision tests

/// Seconds since the epoch of a UTC time written `2026-03-29T01:00Z` or `2026-03-29T01:00:30Z`,
/// counted here year by year rather than through the code under test.
func utc(_ text: String) -> Int64 {
    let fields = text.split(whereSeparator: { "-T:Z".contains($0) }).map { Int($0)! }
    precondition(fields.count >= 5 && fields[0] >= 1970, "bad test time \(text)")
    let (year, month, day, hour, minute) = (fields[0], fields[1], fields[2], fields[3], fields[4])
    let second = fields.count > 5 ? fields[5] : 0
    func isLeap(_ year: Int) -> Bool { (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 }
    var days = 0
    for y in 1970..<year { days += isLeap(y) ? 366 : 365 }
    let lengths = [31, isLeap(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    days += lengths.prefix(month - 1).reduce(0, +) + day - 1
    return Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
}

/// `utc(text)` as an instant.
func utcInstant(_ text: String) -> Instant { Instant(seconds: utc(text)) }

func localDate(_ text: String) -> LocalDate { try! LocalDate.parse(text) }

func clock(_ text: String) -> ClockTime { try! ClockTime.parse(text) }

/// The rules of a zone; an unknown name falls back to UTC, so the expectations about it fail
/// instead of the whole test run stopping.
func zoneRules(_ identifier: String) -> ZoneRules {
    ZoneRules(identifier: identifier) ?? ZoneRules(identifier: "UTC")!
}

/// A policy with the given bedtime (`off` for none) and no limit unless one is given.
func schedulePolicy(
    bedtime: String = "21:00-07:00", limit: TimeAllowance = .unlimited,
    weekdayBedtimes: [Weekday: BedtimeWindow?] = [:], weekdayLimits: [Weekday: TimeAllowance] = [:]
) -> Policy {
    Policy(
        user: "kid", dailyLimit: limit, weekdayLimits: weekdayLimits, bedtime: try! BedtimeWindow.parse(bedtime),
        weekdayBedtimes: weekdayBedtimes)
}

func schedule(
    _ zone: String, bedtime: String = "21:00-07:00", limit: TimeAllowance = .unlimited,
    weekdayBedtimes: [Weekday: BedtimeWindow?] = [:], weekdayLimits: [Weekday: TimeAllowance] = [:],
    adjustments: [String: DayAdjustment] = [:]
) -> Schedule {
    Schedule(
        policy: schedulePolicy(
            bedtime: bedtime, limit: limit, weekdayBedtimes: weekdayBedtimes, weekdayLimits: weekdayLimits),
        zone: zoneRules(zone),
        adjustments: Dictionary(uniqueKeysWithValues: adjustments.map { (localDate($0.key), $0.value) }))
}

// MARK: - Zone rules

struct WallTimeCase: Sendable, CustomTestStringConvertible {
    var zone: String
    var date: String
    var time: String
    /// The instant, in UTC.
    var instant: String
    /// How that instant reads in the zone.
    var iso: String

    init(_ zone: String, _ date: String, _ time: String, _ instant: String, _ iso: String) {
        self.zone = zone
        self.date = date
        self.time = time
        self.instant = instant
        self.iso = iso
    }

    var testDescription: String { "\(zone) \(date) \(time)" }
}

@Suite("Zone rules")
struct ZoneRulesTests {
    static let cases: [WallTimeCase] = [
        // Europe/Berlin: CET +1, CEST +2; 2026-03-29 02:00 -> 03:00, 2026-10-25 03:00 -> 02:00.
        .init("Europe/Berlin", "2026-01-15", "12:00", "2026-01-15T11:00Z", "2026-01-15T12:00:00+01:00"),
        .init("Europe/Berlin", "2026-07-01", "12:00", "2026-07-01T10:00Z", "2026-07-01T12:00:00+02:00"),
        .init("Europe/Berlin", "2026-03-29", "00:00", "2026-03-28T23:00Z", "2026-03-29T00:00:00+01:00"),
        .init("Europe/Berlin", "2026-03-29", "01:59", "2026-03-29T00:59Z", "2026-03-29T01:59:00+01:00"),
        .init("Europe/Berlin", "2026-03-29", "02:00", "2026-03-29T01:00Z", "2026-03-29T03:00:00+02:00"),
        .init("Europe/Berlin", "2026-03-29", "02:30", "2026-03-29T01:00Z", "2026-03-29T03:00:00+02:00"),
        .init("Europe/Berlin", "2026-03-29", "02:59", "2026-03-29T01:00Z", "2026-03-29T03:00:00+02:00"),
        .init("Europe/Berlin", "2026-03-29", "03:00", "2026-03-29T01:00Z", "2026-03-29T03:00:00+02:00"),
        .init("Europe/Berlin", "2026-03-29", "03:01", "2026-03-29T01:01Z", "2026-03-29T03:01:00+02:00"),
        .init("Europe/Berlin", "2026-10-25", "01:59", "2026-10-24T23:59Z", "2026-10-25T01:59:00+02:00"),
        .init("Europe/Berlin", "2026-10-25", "02:00", "2026-10-25T00:00Z", "2026-10-25T02:00:00+02:00"),
        .init("Europe/Berlin", "2026-10-25", "02:30", "2026-10-25T00:30Z", "2026-10-25T02:30:00+02:00"),
        .init("Europe/Berlin", "2026-10-25", "02:59", "2026-10-25T00:59Z", "2026-10-25T02:59:00+02:00"),
        .init("Europe/Berlin", "2026-10-25", "03:00", "2026-10-25T02:00Z", "2026-10-25T03:00:00+01:00"),
        // America/New_York: EST -5, EDT -4; 2026-03-08 02:00 -> 03:00, 2026-11-01 02:00 -> 01:00.
        .init("America/New_York", "2026-03-08", "01:59", "2026-03-08T06:59Z", "2026-03-08T01:59:00-05:00"),
        .init("America/New_York", "2026-03-08", "02:30", "2026-03-08T07:00Z", "2026-03-08T03:00:00-04:00"),
        .init("America/New_York", "2026-03-08", "03:00", "2026-03-08T07:00Z", "2026-03-08T03:00:00-04:00"),
        .init("America/New_York", "2026-11-01", "00:59", "2026-11-01T04:59Z", "2026-11-01T00:59:00-04:00"),
        .init("America/New_York", "2026-11-01", "01:00", "2026-11-01T05:00Z", "2026-11-01T01:00:00-04:00"),
        .init("America/New_York", "2026-11-01", "01:30", "2026-11-01T05:30Z", "2026-11-01T01:30:00-04:00"),
        .init("America/New_York", "2026-11-01", "02:00", "2026-11-01T07:00Z", "2026-11-01T02:00:00-05:00"),
        .init("America/New_York", "2026-12-31", "23:59", "2027-01-01T04:59Z", "2026-12-31T23:59:00-05:00"),
        // Australia/Lord_Howe: +10:30 standard, +11:00 summer, a 30-minute shift at 02:00 local.
        .init("Australia/Lord_Howe", "2026-10-04", "01:59", "2026-10-03T15:29Z", "2026-10-04T01:59:00+10:30"),
        .init("Australia/Lord_Howe", "2026-10-04", "02:00", "2026-10-03T15:30Z", "2026-10-04T02:30:00+11:00"),
        .init("Australia/Lord_Howe", "2026-10-04", "02:15", "2026-10-03T15:30Z", "2026-10-04T02:30:00+11:00"),
        .init("Australia/Lord_Howe", "2026-10-04", "02:29", "2026-10-03T15:30Z", "2026-10-04T02:30:00+11:00"),
        .init("Australia/Lord_Howe", "2026-10-04", "02:30", "2026-10-03T15:30Z", "2026-10-04T02:30:00+11:00"),
        .init("Australia/Lord_Howe", "2026-04-05", "01:29", "2026-04-04T14:29Z", "2026-04-05T01:29:00+11:00"),
        .init("Australia/Lord_Howe", "2026-04-05", "01:30", "2026-04-04T14:30Z", "2026-04-05T01:30:00+11:00"),
        .init("Australia/Lord_Howe", "2026-04-05", "01:45", "2026-04-04T14:45Z", "2026-04-05T01:45:00+11:00"),
        .init("Australia/Lord_Howe", "2026-04-05", "02:00", "2026-04-04T15:30Z", "2026-04-05T02:00:00+10:30"),
        .init("Australia/Lord_Howe", "2026-07-01", "00:00", "2026-06-30T13:30Z", "2026-07-01T00:00:00+10:30"),
        // Australia/Sydney: AEST +10, AEDT +11; 2026-10-04 02:00 -> 03:00, 2026-04-05 03:00 -> 02:00.
        .init("Australia/Sydney", "2026-10-04", "02:30", "2026-10-03T16:00Z", "2026-10-04T03:00:00+11:00"),
        .init("Australia/Sydney", "2026-10-04", "01:59", "2026-10-03T15:59Z", "2026-10-04T01:59:00+10:00"),
        .init("Australia/Sydney", "2026-04-05", "02:30", "2026-04-04T15:30Z", "2026-04-05T02:30:00+11:00"),
        .init("Australia/Sydney", "2026-04-05", "03:00", "2026-04-04T17:00Z", "2026-04-05T03:00:00+10:00"),
        .init("Australia/Sydney", "2026-01-26", "12:00", "2026-01-26T01:00Z", "2026-01-26T12:00:00+11:00"),
        // America/Santiago: -04 standard, -03 summer, both changes at local midnight.
        .init("America/Santiago", "2026-09-05", "23:59", "2026-09-06T03:59Z", "2026-09-05T23:59:00-04:00"),
        .init("America/Santiago", "2026-09-06", "00:00", "2026-09-06T04:00Z", "2026-09-06T01:00:00-03:00"),
        .init("America/Santiago", "2026-09-06", "00:30", "2026-09-06T04:00Z", "2026-09-06T01:00:00-03:00"),
        .init("America/Santiago", "2026-09-06", "01:00", "2026-09-06T04:00Z", "2026-09-06T01:00:00-03:00"),
        .init("America/Santiago", "2026-04-04", "23:30", "2026-04-05T02:30Z", "2026-04-04T23:30:00-03:00"),
        .init("America/Santiago", "2026-04-05", "00:00", "2026-04-05T04:00Z", "2026-04-05T00:00:00-04:00"),
        // Pacific/Auckland: NZST +12, NZDT +13; 2026-09-27 02:00 -> 03:00, 2026-04-05 03:00 -> 02:00.
        .init("Pacific/Auckland", "2026-09-27", "02:30", "2026-09-26T14:00Z", "2026-09-27T03:00:00+13:00"),
        .init("Pacific/Auckland", "2026-04-05", "02:30", "2026-04-04T13:30Z", "2026-04-05T02:30:00+13:00"),
        .init("Pacific/Auckland", "2026-04-05", "03:00", "2026-04-04T15:00Z", "2026-04-05T03:00:00+12:00"),
        // America/Havana: CST -5, CDT -4; summer time starts at 00:00, so 2026-03-08 00:00 never happens.
        .init("America/Havana", "2026-03-07", "23:59", "2026-03-08T04:59Z", "2026-03-07T23:59:00-05:00"),
        .init("America/Havana", "2026-03-08", "00:00", "2026-03-08T05:00Z", "2026-03-08T01:00:00-04:00"),
        .init("America/Havana", "2026-03-08", "00:59", "2026-03-08T05:00Z", "2026-03-08T01:00:00-04:00"),
        .init("America/Havana", "2026-03-08", "01:00", "2026-03-08T05:00Z", "2026-03-08T01:00:00-04:00"),
        .init("America/Havana", "2026-11-01", "00:00", "2026-11-01T04:00Z", "2026-11-01T00:00:00-04:00"),
        .init("America/Havana", "2026-11-01", "00:30", "2026-11-01T04:30Z", "2026-11-01T00:30:00-04:00"),
        .init("America/Havana", "2026-11-01", "01:00", "2026-11-01T06:00Z", "2026-11-01T01:00:00-05:00"),
        // Asia/Beirut: EET +2, EEST +3; 2026-03-29 00:00 -> 01:00, 2026-10-25 00:00 -> 2026-10-24 23:00.
        .init("Asia/Beirut", "2026-03-29", "00:00", "2026-03-28T22:00Z", "2026-03-29T01:00:00+03:00"),
        .init("Asia/Beirut", "2026-03-29", "00:45", "2026-03-28T22:00Z", "2026-03-29T01:00:00+03:00"),
        .init("Asia/Beirut", "2026-10-24", "23:30", "2026-10-24T20:30Z", "2026-10-24T23:30:00+03:00"),
        .init("Asia/Beirut", "2026-10-25", "00:00", "2026-10-24T22:00Z", "2026-10-25T00:00:00+02:00"),
        // Zones without summer time, and odd offsets.
        .init("UTC", "2026-03-29", "02:30", "2026-03-29T02:30Z", "2026-03-29T02:30:00+00:00"),
        .init("Etc/GMT+2", "2026-01-01", "00:00", "2026-01-01T02:00Z", "2026-01-01T00:00:00-02:00"),
        .init("Etc/GMT-14", "2026-01-01", "00:00", "2025-12-31T10:00Z", "2026-01-01T00:00:00+14:00"),
        .init("Asia/Kolkata", "2026-01-01", "00:00", "2025-12-31T18:30Z", "2026-01-01T00:00:00+05:30"),
        .init("Asia/Kathmandu", "2026-01-01", "00:00", "2025-12-31T18:15Z", "2026-01-01T00:00:00+05:45"),
        .init("America/Sao_Paulo", "2026-01-15", "12:00", "2026-01-15T15:00Z", "2026-01-15T12:00:00-03:00"),
        .init("America/St_Johns", "2026-01-15", "12:00", "2026-01-15T15:30Z", "2026-01-15T12:00:00-03:30"),
        .init("Australia/Adelaide", "2026-01-15", "12:00", "2026-01-15T01:30Z", "2026-01-15T12:00:00+10:30"),
        .init("Pacific/Chatham", "2026-01-15", "12:00", "2026-01-14T22:15Z", "2026-01-15T12:00:00+13:45"),
    ]

    @Test("wall times become instants: skipped times move to the next valid time, repeated ones take the first", arguments: cases)
    func instant(_ test: WallTimeCase) {
        let zone = zoneRules(test.zone)
        let instant = zone.instant(localDate(test.date), clock(test.time))
        #expect(instant == utcInstant(test.instant))
        #expect(zone.iso8601(instant) == test.iso)
    }

    @Test(
        "ISO 8601 shows the offset in force at that instant",
        arguments: [
            ("Europe/Berlin", "2026-10-25T00:30Z", "2026-10-25T02:30:00+02:00"),
            ("Europe/Berlin", "2026-10-25T01:30Z", "2026-10-25T02:30:00+01:00"),
            ("Europe/Berlin", "2026-03-29T00:59:59Z", "2026-03-29T01:59:59+01:00"),
            ("Australia/Lord_Howe", "2026-04-04T14:45Z", "2026-04-05T01:45:00+11:00"),
            ("Australia/Lord_Howe", "2026-04-04T15:15Z", "2026-04-05T01:45:00+10:30"),
            ("America/Santiago", "2026-04-05T02:30Z", "2026-04-04T23:30:00-03:00"),
            ("America/Santiago", "2026-04-05T03:30Z", "2026-04-04T23:30:00-04:00"),
            ("America/Havana", "2026-11-01T05:30Z", "2026-11-01T00:30:00-05:00"),
            ("America/New_York", "2026-11-01T06:30Z", "2026-11-01T01:30:00-05:00"),
            ("UTC", "1970-01-01T00:00Z", "1970-01-01T00:00:00+00:00"),
        ])
    func iso(zone: String, instant: String, iso: String) {
        #expect(zoneRules(zone).iso8601(utc(instant)) == iso)
    }

    @Test("local time of an instant, including before 1970")
    func localTime() {
        let berlin = zoneRules("Europe/Berlin")
        let (date, second) = berlin.localTime(at: utc("2026-03-29T01:00Z"))
        #expect(date == localDate("2026-03-29"))
        #expect(second == 3 * 3600)
        let utcZone = zoneRules("UTC")
        #expect(utcZone.localTime(at: -1) == (localDate("1969-12-31"), 86_399))
        #expect(utcZone.localTime(at: 0) == (localDate("1970-01-01"), 0))
        #expect(utcZone.localTime(at: -86_400) == (localDate("1969-12-31"), 0))
        let auckland = zoneRules("Pacific/Auckland")
        #expect(auckland.localTime(at: utc("2026-06-30T12:00Z")) == (localDate("2026-07-01"), 0))
        #expect(auckland.offset(at: utc("2026-06-30T12:00Z")) == 12 * 3600)
        #expect(auckland.offset(at: utc("2026-01-01T00:00Z")) == 13 * 3600)
    }

    @Test(
        "the start of a day is 00:00, or the first valid time after it",
        arguments: [
            ("Europe/Berlin", "2026-03-29", "2026-03-28T23:00Z"),
            ("America/Havana", "2026-03-08", "2026-03-08T05:00Z"),
            ("America/Havana", "2026-11-01", "2026-11-01T04:00Z"),
            ("America/Santiago", "2026-09-06", "2026-09-06T04:00Z"),
            ("America/Santiago", "2026-04-05", "2026-04-05T04:00Z"),
            ("Asia/Beirut", "2026-03-29", "2026-03-28T22:00Z"),
            ("Asia/Beirut", "2026-10-25", "2026-10-24T22:00Z"),
        ])
    func startOfDay(zone: String, date: String, instant: String) {
        #expect(zoneRules(zone).start(of: localDate(date)) == utcInstant(instant))
    }

    @Test("UTC timestamps as records carry them")
    func utcTimestamps() {
        #expect(utcTimestamp(0) == "1970-01-01T00:00:00Z")
        #expect(utcTimestamp(utc("2026-11-21T23:55:42Z")) == "2026-11-21T23:55:42Z")
        #expect(utcTimestamp(-1) == "1969-12-31T23:59:59Z")
        #expect(parseUTCTimestamp("2026-11-21T23:55:42Z") == utc("2026-11-21T23:55:42Z"))
        #expect(parseUTCTimestamp("1970-01-01T00:00:00Z") == 0)
        for bad in [
            "2026-11-21T23:55:42", "2026-11-21 23:55:42Z", "2026-11-21T24:00:00Z", "2026-11-21T23:60:00Z",
            "2026-11-21T23:59:60Z", "2026-02-29T00:00:00Z", "2026-11-21T23:55:42+00:00", "2026-11-21T23:55Z", "",
        ] {
            #expect(parseUTCTimestamp(bad) == nil, "\(bad)")
        }
    }
}

// MARK: - Periods

struct PeriodCase: Sendable, CustomTestStringConvertible {
    var label: String
    var zone: String
    var bedtime: String
    var date: String
    /// Local length of the day in minutes.
    var dayMinutes: Int
    var periods: [(UseState, String, String)]

    init(_ label: String, _ zone: String, _ bedtime: String, _ date: String, hours: Double, _ periods: [(UseState, String, String)]) {
        self.label = label
        self.zone = zone
        self.bedtime = bedtime
        self.date = date
        self.dayMinutes = Int(hours * 60)
        self.periods = periods
    }

    var testDescription: String { "\(zone) \(date) bedtime \(bedtime): \(label)" }
}

func periodList(_ periods: [(UseState, String, String)]) -> [Period] {
    periods.map { Period(start: utcInstant($0.1), end: utcInstant($0.2), state: $0.0) }
}

/// Zones used for whole-year checks.
let scheduleZones = [
    "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Australia/Sydney", "America/Santiago",
    "Pacific/Auckland", "America/Havana", "Asia/Beirut", "UTC", "Asia/Kolkata", "Pacific/Chatham",
]

@Suite("Schedule periods")
struct SchedulePeriodTests {
    static let cases: [PeriodCase] = [
        // Europe/Berlin.
        .init(
            "ordinary day", "Europe/Berlin", "21:00-07:00", "2026-03-10", hours: 24,
            [
                (.bedtime, "2026-03-09T23:00Z", "2026-03-10T06:00Z"), (.allowed, "2026-03-10T06:00Z", "2026-03-10T20:00Z"),
                (.bedtime, "2026-03-10T20:00Z", "2026-03-10T23:00Z"),
            ]),
        .init(
            "spring forward", "Europe/Berlin", "21:00-07:00", "2026-03-29", hours: 23,
            [
                (.bedtime, "2026-03-28T23:00Z", "2026-03-29T05:00Z"), (.allowed, "2026-03-29T05:00Z", "2026-03-29T19:00Z"),
                (.bedtime, "2026-03-29T19:00Z", "2026-03-29T22:00Z"),
            ]),
        .init(
            "fall back", "Europe/Berlin", "21:00-07:00", "2026-10-25", hours: 25,
            [
                (.bedtime, "2026-10-24T22:00Z", "2026-10-25T06:00Z"), (.allowed, "2026-10-25T06:00Z", "2026-10-25T20:00Z"),
                (.bedtime, "2026-10-25T20:00Z", "2026-10-25T23:00Z"),
            ]),
        .init(
            "bedtime end in the skipped hour moves to 03:00", "Europe/Berlin", "23:00-02:30", "2026-03-29", hours: 23,
            [
                (.bedtime, "2026-03-28T23:00Z", "2026-03-29T01:00Z"), (.allowed, "2026-03-29T01:00Z", "2026-03-29T21:00Z"),
                (.bedtime, "2026-03-29T21:00Z", "2026-03-29T22:00Z"),
            ]),
        .init(
            "bedtime start in the skipped hour moves to 03:00", "Europe/Berlin", "02:30-06:00", "2026-03-29", hours: 23,
            [
                (.allowed, "2026-03-28T23:00Z", "2026-03-29T01:00Z"), (.bedtime, "2026-03-29T01:00Z", "2026-03-29T04:00Z"),
                (.allowed, "2026-03-29T04:00Z", "2026-03-29T22:00Z"),
            ]),
        .init(
            "bedtime start in the repeated hour takes the first", "Europe/Berlin", "02:30-06:00", "2026-10-25", hours: 25,
            [
                (.allowed, "2026-10-24T22:00Z", "2026-10-25T00:30Z"), (.bedtime, "2026-10-25T00:30Z", "2026-10-25T05:00Z"),
                (.allowed, "2026-10-25T05:00Z", "2026-10-25T23:00Z"),
            ]),
        .init("bedtime off", "Europe/Berlin", "off", "2026-03-29", hours: 23, [(.allowed, "2026-03-28T23:00Z", "2026-03-29T22:00Z")]),
        .init("bedtime off", "Europe/Berlin", "off", "2026-10-25", hours: 25, [(.allowed, "2026-10-24T22:00Z", "2026-10-25T23:00Z")]),
        .init(
            "a window that starts after midnight", "Europe/Berlin", "00:30-06:00", "2026-06-10", hours: 24,
            [
                (.allowed, "2026-06-09T22:00Z", "2026-06-09T22:30Z"), (.bedtime, "2026-06-09T22:30Z", "2026-06-10T04:00Z"),
                (.allowed, "2026-06-10T04:00Z", "2026-06-10T22:00Z"),
            ]),
        .init(
            "a window that ends at midnight", "Europe/Berlin", "22:00-00:00", "2026-06-10", hours: 24,
            [(.allowed, "2026-06-09T22:00Z", "2026-06-10T20:00Z"), (.bedtime, "2026-06-10T20:00Z", "2026-06-10T22:00Z")]),
        .init(
            "a window that starts at midnight", "Europe/Berlin", "00:00-07:00", "2026-06-10", hours: 24,
            [(.bedtime, "2026-06-09T22:00Z", "2026-06-10T05:00Z"), (.allowed, "2026-06-10T05:00Z", "2026-06-10T22:00Z")]),
        // America/New_York.
        .init(
            "spring forward", "America/New_York", "21:00-07:00", "2026-03-08", hours: 23,
            [
                (.bedtime, "2026-03-08T05:00Z", "2026-03-08T11:00Z"), (.allowed, "2026-03-08T11:00Z", "2026-03-09T01:00Z"),
                (.bedtime, "2026-03-09T01:00Z", "2026-03-09T04:00Z"),
            ]),
        .init(
            "fall back", "America/New_York", "21:00-07:00", "2026-11-01", hours: 25,
            [
                (.bedtime, "2026-11-01T04:00Z", "2026-11-01T12:00Z"), (.allowed, "2026-11-01T12:00Z", "2026-11-02T02:00Z"),
                (.bedtime, "2026-11-02T02:00Z", "2026-11-02T05:00Z"),
            ]),
        .init(
            "bedtime start in the repeated hour", "America/New_York", "01:30-06:00", "2026-11-01", hours: 25,
            [
                (.allowed, "2026-11-01T04:00Z", "2026-11-01T05:30Z"), (.bedtime, "2026-11-01T05:30Z", "2026-11-01T11:00Z"),
                (.allowed, "2026-11-01T11:00Z", "2026-11-02T05:00Z"),
            ]),
        .init(
            "bedtime start in the skipped hour", "America/New_York", "02:30-06:00", "2026-03-08", hours: 23,
            [
                (.allowed, "2026-03-08T05:00Z", "2026-03-08T07:00Z"), (.bedtime, "2026-03-08T07:00Z", "2026-03-08T10:00Z"),
                (.allowed, "2026-03-08T10:00Z", "2026-03-09T04:00Z"),
            ]),
        // Australia/Lord_Howe: half-hour shifts.
        .init(
            "ordinary winter day", "Australia/Lord_Howe", "21:00-07:00", "2026-07-01", hours: 24,
            [
                (.bedtime, "2026-06-30T13:30Z", "2026-06-30T20:30Z"), (.allowed, "2026-06-30T20:30Z", "2026-07-01T10:30Z"),
                (.bedtime, "2026-07-01T10:30Z", "2026-07-01T13:30Z"),
            ]),
        .init(
            "summer time ends: 24.5 hours", "Australia/Lord_Howe", "21:00-07:00", "2026-04-05", hours: 24.5,
            [
                (.bedtime, "2026-04-04T13:00Z", "2026-04-04T20:30Z"), (.allowed, "2026-04-04T20:30Z", "2026-04-05T10:30Z"),
                (.bedtime, "2026-04-05T10:30Z", "2026-04-05T13:30Z"),
            ]),
        .init(
            "summer time starts: 23.5 hours", "Australia/Lord_Howe", "21:00-07:00", "2026-10-04", hours: 23.5,
            [
                (.bedtime, "2026-10-03T13:30Z", "2026-10-03T20:00Z"), (.allowed, "2026-10-03T20:00Z", "2026-10-04T10:00Z"),
                (.bedtime, "2026-10-04T10:00Z", "2026-10-04T13:00Z"),
            ]),
        .init(
            "bedtime start in the skipped half hour", "Australia/Lord_Howe", "02:15-06:00", "2026-10-04", hours: 23.5,
            [
                (.allowed, "2026-10-03T13:30Z", "2026-10-03T15:30Z"), (.bedtime, "2026-10-03T15:30Z", "2026-10-03T19:00Z"),
                (.allowed, "2026-10-03T19:00Z", "2026-10-04T13:00Z"),
            ]),
        .init(
            "bedtime start in the repeated half hour", "Australia/Lord_Howe", "01:45-06:00", "2026-04-05", hours: 24.5,
            [
                (.allowed, "2026-04-04T13:00Z", "2026-04-04T14:45Z"), (.bedtime, "2026-04-04T14:45Z", "2026-04-04T19:30Z"),
                (.allowed, "2026-04-04T19:30Z", "2026-04-05T13:30Z"),
            ]),
        // Australia/Sydney.
        .init(
            "summer time ends", "Australia/Sydney", "21:00-07:00", "2026-04-05", hours: 25,
            [
                (.bedtime, "2026-04-04T13:00Z", "2026-04-04T21:00Z"), (.allowed, "2026-04-04T21:00Z", "2026-04-05T11:00Z"),
                (.bedtime, "2026-04-05T11:00Z", "2026-04-05T14:00Z"),
            ]),
        .init(
            "summer time starts", "Australia/Sydney", "21:00-07:00", "2026-10-04", hours: 23,
            [
                (.bedtime, "2026-10-03T14:00Z", "2026-10-03T20:00Z"), (.allowed, "2026-10-03T20:00Z", "2026-10-04T10:00Z"),
                (.bedtime, "2026-10-04T10:00Z", "2026-10-04T13:00Z"),
            ]),
        // America/Santiago: changes at local midnight.
        .init(
            "summer time ends on Saturday night", "America/Santiago", "21:00-07:00", "2026-04-04", hours: 25,
            [
                (.bedtime, "2026-04-04T03:00Z", "2026-04-04T10:00Z"), (.allowed, "2026-04-04T10:00Z", "2026-04-05T00:00Z"),
                (.bedtime, "2026-04-05T00:00Z", "2026-04-05T04:00Z"),
            ]),
        .init(
            "bedtime start in the repeated hour before midnight", "America/Santiago", "23:30-07:00", "2026-04-04", hours: 25,
            [
                (.bedtime, "2026-04-04T03:00Z", "2026-04-04T10:00Z"), (.allowed, "2026-04-04T10:00Z", "2026-04-05T02:30Z"),
                (.bedtime, "2026-04-05T02:30Z", "2026-04-05T04:00Z"),
            ]),
        .init(
            "summer time starts: the day begins at 01:00", "America/Santiago", "21:00-07:00", "2026-09-06", hours: 23,
            [
                (.bedtime, "2026-09-06T04:00Z", "2026-09-06T10:00Z"), (.allowed, "2026-09-06T10:00Z", "2026-09-07T00:00Z"),
                (.bedtime, "2026-09-07T00:00Z", "2026-09-07T03:00Z"),
            ]),
        // Pacific/Auckland.
        .init(
            "summer time ends", "Pacific/Auckland", "21:00-07:00", "2026-04-05", hours: 25,
            [
                (.bedtime, "2026-04-04T11:00Z", "2026-04-04T19:00Z"), (.allowed, "2026-04-04T19:00Z", "2026-04-05T09:00Z"),
                (.bedtime, "2026-04-05T09:00Z", "2026-04-05T12:00Z"),
            ]),
        .init(
            "summer time starts", "Pacific/Auckland", "21:00-07:00", "2026-09-27", hours: 23,
            [
                (.bedtime, "2026-09-26T12:00Z", "2026-09-26T18:00Z"), (.allowed, "2026-09-26T18:00Z", "2026-09-27T08:00Z"),
                (.bedtime, "2026-09-27T08:00Z", "2026-09-27T11:00Z"),
            ]),
        // America/Havana: 00:00 does not exist on 2026-03-08 and happens twice on 2026-11-01.
        .init(
            "the day begins at 01:00", "America/Havana", "23:00-07:00", "2026-03-08", hours: 23,
            [
                (.bedtime, "2026-03-08T05:00Z", "2026-03-08T11:00Z"), (.allowed, "2026-03-08T11:00Z", "2026-03-09T03:00Z"),
                (.bedtime, "2026-03-09T03:00Z", "2026-03-09T04:00Z"),
            ]),
        .init(
            "the day before is a whole day", "America/Havana", "23:00-07:00", "2026-03-07", hours: 24,
            [
                (.bedtime, "2026-03-07T05:00Z", "2026-03-07T12:00Z"), (.allowed, "2026-03-07T12:00Z", "2026-03-08T04:00Z"),
                (.bedtime, "2026-03-08T04:00Z", "2026-03-08T05:00Z"),
            ]),
        .init(
            "a bedtime from 00:00 starts at 01:00", "America/Havana", "00:00-06:00", "2026-03-08", hours: 23,
            [(.bedtime, "2026-03-08T05:00Z", "2026-03-08T10:00Z"), (.allowed, "2026-03-08T10:00Z", "2026-03-09T04:00Z")]),
        .init(
            "midnight twice", "America/Havana", "00:30-06:00", "2026-11-01", hours: 25,
            [
                (.allowed, "2026-11-01T04:00Z", "2026-11-01T04:30Z"), (.bedtime, "2026-11-01T04:30Z", "2026-11-01T11:00Z"),
                (.allowed, "2026-11-01T11:00Z", "2026-11-02T05:00Z"),
            ]),
        // Asia/Beirut: changes at local midnight.
        .init(
            "the day begins at 01:00", "Asia/Beirut", "21:00-07:00", "2026-03-29", hours: 23,
            [
                (.bedtime, "2026-03-28T22:00Z", "2026-03-29T04:00Z"), (.allowed, "2026-03-29T04:00Z", "2026-03-29T18:00Z"),
                (.bedtime, "2026-03-29T18:00Z", "2026-03-29T21:00Z"),
            ]),
        .init(
            "23:00 to midnight twice", "Asia/Beirut", "21:00-07:00", "2026-10-24", hours: 25,
            [
                (.bedtime, "2026-10-23T21:00Z", "2026-10-24T04:00Z"), (.allowed, "2026-10-24T04:00Z", "2026-10-24T18:00Z"),
                (.bedtime, "2026-10-24T18:00Z", "2026-10-24T22:00Z"),
            ]),
    ]

    @Test("periods of a day", arguments: cases)
    func periods(_ test: PeriodCase) {
        let periods = schedule(test.zone, bedtime: test.bedtime).periods(on: localDate(test.date))
        #expect(periods == periodList(test.periods))
        #expect(periods.map(\.seconds).reduce(0, +) == Int64(test.dayMinutes) * 60)
    }

    @Test("every day of 2026 is covered without gaps from 00:00 to the next 00:00", arguments: scheduleZones)
    func wholeYear(zone: String) {
        let rules = zoneRules(zone)
        for bedtime in ["21:00-07:00", "02:30-06:00", "off", "23:30-00:30"] {
            let schedule = schedule(zone, bedtime: bedtime)
            var day = localDate("2026-01-01")
            var lengths: [Int64: Int] = [:]
            while day.year == 2026 {
                let periods = schedule.periods(on: day)
                let start = rules.start(of: day)
                let end = rules.start(of: day.adding(days: 1))
                #expect(periods.first?.start == start, "\(zone) \(day) \(bedtime)")
                #expect(periods.last?.end == end, "\(zone) \(day) \(bedtime)")
                #expect(periods.allSatisfy { $0.start < $0.end }, "\(zone) \(day) \(bedtime)")
                #expect(zip(periods, periods.dropFirst()).allSatisfy { $0.end == $1.start && $0.state != $1.state })
                #expect(periods.allSatisfy { $0.state != .limitReached })
                lengths[(end - start).wholeSeconds, default: 0] += 1
                day = day.adding(days: 1)
            }
            // Every day is 24 hours, or 23/25 around a one-hour change, or 23.5/24.5 on Lord Howe Island.
            let expected: [Int64: Int]
            switch zone {
            case "UTC", "Asia/Kolkata": expected = [86_400: 365]
            case "Australia/Lord_Howe": expected = [86_400: 363, 84_600: 1, 88_200: 1]
            default: expected = [86_400: 363, 82_800: 1, 90_000: 1]
            }
            #expect(lengths == expected, "\(zone) \(bedtime)")
        }
    }

    @Test("weekday bedtimes are keyed by the day the window starts")
    func weekdayBedtimes() {
        // 2026-06-04 is a Thursday; Berlin is on +02:00 all week.
        let late = schedule("Europe/Berlin", weekdayBedtimes: [.fri: bedtimeWindow("23:00-09:00")])
        #expect(
            late.periods(on: localDate("2026-06-04"))
                == periodList([
                    (.bedtime, "2026-06-03T22:00Z", "2026-06-04T05:00Z"), (.allowed, "2026-06-04T05:00Z", "2026-06-04T19:00Z"),
                    (.bedtime, "2026-06-04T19:00Z", "2026-06-04T22:00Z"),
                ]))
        // Friday morning still ends Thursday's window at 07:00; Friday night starts at 23:00.
        #expect(
            late.periods(on: localDate("2026-06-05"))
                == periodList([
                    (.bedtime, "2026-06-04T22:00Z", "2026-06-05T05:00Z"), (.allowed, "2026-06-05T05:00Z", "2026-06-05T21:00Z"),
                    (.bedtime, "2026-06-05T21:00Z", "2026-06-05T22:00Z"),
                ]))
        // Saturday morning belongs to Friday's window and ends at 09:00; Saturday night is the default.
        #expect(
            late.periods(on: localDate("2026-06-06"))
                == periodList([
                    (.bedtime, "2026-06-05T22:00Z", "2026-06-06T07:00Z"), (.allowed, "2026-06-06T07:00Z", "2026-06-06T19:00Z"),
                    (.bedtime, "2026-06-06T19:00Z", "2026-06-06T22:00Z"),
                ]))
        #expect(late.isBedtime(at: utcInstant("2026-06-06T06:59Z")))
        #expect(!late.isBedtime(at: utcInstant("2026-06-06T07:00Z")))
        #expect(!late.isBedtime(at: utcInstant("2026-06-05T20:59Z")))
        #expect(late.isBedtime(at: utcInstant("2026-06-05T21:00Z")))

        // No bedtime on Friday night: Friday morning is unchanged, Saturday morning is free.
        let free = schedule("Europe/Berlin", weekdayBedtimes: [.fri: noBedtime])
        #expect(
            free.periods(on: localDate("2026-06-05"))
                == periodList([(.bedtime, "2026-06-04T22:00Z", "2026-06-05T05:00Z"), (.allowed, "2026-06-05T05:00Z", "2026-06-05T22:00Z")]))
        #expect(
            free.periods(on: localDate("2026-06-06"))
                == periodList([(.allowed, "2026-06-05T22:00Z", "2026-06-06T19:00Z"), (.bedtime, "2026-06-06T19:00Z", "2026-06-06T22:00Z")]))

        // No default, only a Saturday window.
        let saturday = schedule("Europe/Berlin", bedtime: "off", weekdayBedtimes: [.sat: bedtimeWindow("22:00-10:00")])
        #expect(saturday.periods(on: localDate("2026-06-05")) == periodList([(.allowed, "2026-06-04T22:00Z", "2026-06-05T22:00Z")]))
        #expect(
            saturday.periods(on: localDate("2026-06-06"))
                == periodList([(.allowed, "2026-06-05T22:00Z", "2026-06-06T20:00Z"), (.bedtime, "2026-06-06T20:00Z", "2026-06-06T22:00Z")]))
        #expect(
            saturday.periods(on: localDate("2026-06-07"))
                == periodList([(.bedtime, "2026-06-06T22:00Z", "2026-06-07T08:00Z"), (.allowed, "2026-06-07T08:00Z", "2026-06-07T22:00Z")]))
    }

    @Test("an early Sunday window and a late Saturday window overlap and merge")
    func overlapMerges() {
        // Saturday 22:00 to Sunday 08:00, and Sunday's own window 01:00-06:00 inside it.
        let overlapping = schedule(
            "Europe/Berlin", bedtime: "off",
            weekdayBedtimes: [.sat: bedtimeWindow("22:00-08:00"), .sun: bedtimeWindow("01:00-06:00")])
        #expect(
            overlapping.periods(on: localDate("2026-06-07"))
                == periodList([(.bedtime, "2026-06-06T22:00Z", "2026-06-07T06:00Z"), (.allowed, "2026-06-07T06:00Z", "2026-06-07T22:00Z")]))
    }

    @Test("a bedtime delay moves the start of that night's window only")
    func delays() {
        func delayed(_ minutes: Int) -> Schedule {
            schedule("Europe/Berlin", adjustments: ["2026-06-05": DayAdjustment(bedtimeDelayMinutes: minutes)])
        }
        // 30 minutes: Friday night starts 21:30; Friday morning and Saturday are unchanged.
        #expect(
            delayed(30).periods(on: localDate("2026-06-05"))
                == periodList([
                    (.bedtime, "2026-06-04T22:00Z", "2026-06-05T05:00Z"), (.allowed, "2026-06-05T05:00Z", "2026-06-05T19:30Z"),
                    (.bedtime, "2026-06-05T19:30Z", "2026-06-05T22:00Z"),
                ]))
        #expect(
            delayed(30).periods(on: localDate("2026-06-06"))
                == periodList([
                    (.bedtime, "2026-06-05T22:00Z", "2026-06-06T05:00Z"), (.allowed, "2026-06-06T05:00Z", "2026-06-06T19:00Z"),
                    (.bedtime, "2026-06-06T19:00Z", "2026-06-06T22:00Z"),
                ]))
        // 4 hours: the window starts at 01:00 on Saturday.
        #expect(
            delayed(240).periods(on: localDate("2026-06-05"))
                == periodList([(.bedtime, "2026-06-04T22:00Z", "2026-06-05T05:00Z"), (.allowed, "2026-06-05T05:00Z", "2026-06-05T22:00Z")]))
        #expect(
            delayed(240).periods(on: localDate("2026-06-06"))
                == periodList([
                    (.allowed, "2026-06-05T22:00Z", "2026-06-05T23:00Z"), (.bedtime, "2026-06-05T23:00Z", "2026-06-06T05:00Z"),
                    (.allowed, "2026-06-06T05:00Z", "2026-06-06T19:00Z"), (.bedtime, "2026-06-06T19:00Z", "2026-06-06T22:00Z"),
                ]))
        // Delayed past its end: no bedtime that night at all.
        #expect(delayed(600).bedtimeInterval(startingOn: localDate("2026-06-05")) == nil)
        #expect(
            delayed(600).periods(on: localDate("2026-06-06"))
                == periodList([(.allowed, "2026-06-05T22:00Z", "2026-06-06T19:00Z"), (.bedtime, "2026-06-06T19:00Z", "2026-06-06T22:00Z")]))
        // A delay on a spring-forward night counts real minutes: 21:00 CET is 20:00Z, plus 30 minutes.
        let spring = schedule("Europe/Berlin", adjustments: ["2026-03-28": DayAdjustment(bedtimeDelayMinutes: 30)])
        let interval = spring.bedtimeInterval(startingOn: localDate("2026-03-28"))
        #expect(interval?.start == utcInstant("2026-03-28T20:30Z"))
        #expect(interval?.end == utcInstant("2026-03-29T05:00Z"))
    }

    @Test("extra minutes raise that day's limit only")
    func extraMinutes() {
        let plain = schedule("Europe/Berlin", limit: .minutes(60), weekdayLimits: [.sat: .minutes(120), .sun: .unlimited])
        let granted = schedule(
            "Europe/Berlin", limit: .minutes(60), weekdayLimits: [.sat: .minutes(120), .sun: .unlimited],
            adjustments: [
                "2026-06-05": DayAdjustment(extraMinutes: 30), "2026-06-06": DayAdjustment(extraMinutes: 45),
                "2026-06-07": DayAdjustment(extraMinutes: 15),
            ])
        #expect(plain.limitMinutes(on: localDate("2026-06-05")) == 60)
        #expect(granted.limitMinutes(on: localDate("2026-06-04")) == 60)
        #expect(granted.limitMinutes(on: localDate("2026-06-05")) == 90)
        #expect(granted.limitMinutes(on: localDate("2026-06-06")) == 165)
        #expect(granted.limitMinutes(on: localDate("2026-06-07")) == nil)
    }

    @Test("state at an instant")
    func state() {
        let schedule = schedule("Europe/Berlin", limit: .minutes(60))
        #expect(schedule.state(at: utcInstant("2026-06-05T10:00Z"), usedSeconds: 0) == .allowed)
        #expect(schedule.state(at: utcInstant("2026-06-05T10:00Z"), usedSeconds: 3599) == .allowed)
        #expect(schedule.state(at: utcInstant("2026-06-05T10:00Z"), usedSeconds: 3600) == .limitReached)
        #expect(schedule.state(at: utcInstant("2026-06-05T19:00Z"), usedSeconds: 0) == .bedtime)
        #expect(schedule.state(at: utcInstant("2026-06-05T19:00Z"), usedSeconds: 7200) == .bedtime)
        #expect(schedule.state(at: utcInstant("2026-06-05T02:00Z"), usedSeconds: 0) == .bedtime)
        #expect(schedule.state(at: utcInstant("2026-06-05T18:59:59Z"), usedSeconds: 0) == .allowed)
    }
}
