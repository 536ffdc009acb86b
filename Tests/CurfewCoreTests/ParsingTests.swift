import Testing

@testable import CurfewCore

/// The message of the `PolicyError` a closure throws, or nil when it throws nothing.
func policyErrorMessage<T>(_ body: () throws(PolicyError) -> T) -> String? {
    do {
        _ = try body()
        return nil
    } catch {
        return error.message
    }
}

@Suite("Durations")
struct DurationParsingTests {
    @Test(
        "valid durations",
        arguments: [
            ("90m", TimeAllowance.minutes(90)),
            ("1h30m", .minutes(90)),
            ("2h", .minutes(120)),
            ("0", .minutes(0)),
            ("unlimited", .unlimited),
            ("15m", .minutes(15)),
            ("0m", .minutes(0)),
            ("0h", .minutes(0)),
            ("8h", .minutes(480)),
            ("1h0m", .minutes(60)),
            ("45m", .minutes(45)),
            ("10h15m", .minutes(615)),
            ("120m", .minutes(120)),
            (" 30m ", .minutes(30)),
        ])
    func valid(text: String, expected: TimeAllowance) throws {
        #expect(try TimeAllowance.parse(text) == expected)
    }

    @Test(
        "invalid durations name the rule and the value",
        arguments: [
            ("17", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "17""#),
            ("1h30", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "1h30""#),
            ("m", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "m""#),
            ("h", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "h""#),
            ("h2", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "h2""#),
            ("1m30h", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "1m30h""#),
            ("-5m", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "-5m""#),
            ("1.5h", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "1.5h""#),
            ("", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got """#),
            ("２h", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "２h""#),
            ("1h1h", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "1h1h""#),
            ("30m30m", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "30m30m""#),
            ("1h 30m", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "1h 30m""#),
            ("00", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "00""#),
            ("5s", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "5s""#),
            ("never", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "never""#),
            ("99999999999999999999m", #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "99999999999999999999m""#),
        ])
    func invalid(text: String, message: String) {
        #expect(policyErrorMessage { () throws(PolicyError) in try TimeAllowance.parse(text) } == message)
    }

    @Test("a finite duration refuses unlimited")
    func finiteRefusesUnlimited() {
        #expect(
            policyErrorMessage { () throws(PolicyError) in try TimeAllowance.parseMinutes("unlimited") }
                == #"duration must look like 90m, 1h30m, 2h, 0 or unlimited, got "unlimited""#)
    }

    @Test(
        "formatting reads back",
        arguments: [
            (TimeAllowance.minutes(0), "0"),
            (.minutes(15), "15m"),
            (.minutes(45), "45m"),
            (.minutes(60), "1h"),
            (.minutes(90), "1h30m"),
            (.minutes(120), "2h"),
            (.minutes(480), "8h"),
            (.minutes(615), "10h15m"),
            (.unlimited, "unlimited"),
        ])
    func format(value: TimeAllowance, text: String) throws {
        #expect(value.text == text)
        #expect(try TimeAllowance.parse(text) == value)
    }

    @Test("minutes of an allowance")
    func minutesAccessor() {
        #expect(TimeAllowance.minutes(45).minutes == 45)
        #expect(TimeAllowance.unlimited.minutes == nil)
    }
}

@Suite("Clock times and bedtime windows")
struct ClockParsingTests {
    @Test(
        "valid clock times",
        arguments: [
            ("21:00", 21, 0, "21:00"),
            ("07:05", 7, 5, "07:05"),
            ("7:05", 7, 5, "07:05"),
            ("00:00", 0, 0, "00:00"),
            ("0:00", 0, 0, "00:00"),
            ("23:59", 23, 59, "23:59"),
            ("12:30", 12, 30, "12:30"),
        ])
    func valid(text: String, hour: Int, minute: Int, shown: String) throws {
        let time = try ClockTime.parse(text)
        #expect(time.hour == hour)
        #expect(time.minute == minute)
        #expect(time.minuteOfDay == hour * 60 + minute)
        #expect(time.description == shown)
    }

    @Test(
        "invalid clock times",
        arguments: [
            ("24:00", #"time must be between 00:00 and 23:59, got "24:00""#),
            ("12:60", #"time must be between 00:00 and 23:59, got "12:60""#),
            ("99:99", #"time must be between 00:00 and 23:59, got "99:99""#),
            ("12:5", #"time must look like HH:MM, got "12:5""#),
            ("123:00", #"time must look like HH:MM, got "123:00""#),
            (":00", #"time must look like HH:MM, got ":00""#),
            ("12", #"time must look like HH:MM, got "12""#),
            ("12:00:00", #"time must look like HH:MM, got "12:00:00""#),
            ("ab:cd", #"time must look like HH:MM, got "ab:cd""#),
            ("-1:00", #"time must look like HH:MM, got "-1:00""#),
            ("+1:00", #"time must look like HH:MM, got "+1:00""#),
            ("２1:00", #"time must look like HH:MM, got "２1:00""#),
            ("9pm", #"time must look like HH:MM, got "9pm""#),
            ("", #"time must look like HH:MM, got """#),
        ])
    func invalid(text: String, message: String) {
        #expect(policyErrorMessage { () throws(PolicyError) in try ClockTime.parse(text) } == message)
    }

    @Test("the rule name appears in the message")
    func ruleName() {
        #expect(
            policyErrorMessage { () throws(PolicyError) in try ClockTime.parse("25:00", rule: "bedtime start") }
                == #"bedtime start must be between 00:00 and 23:59, got "25:00""#)
    }

    @Test("ordering of clock times")
    func ordering() throws {
        #expect(try ClockTime.parse("07:00") < ClockTime.parse("21:00"))
        #expect(try ClockTime.parse("9:59") < ClockTime.parse("10:00"))
        #expect(try !(ClockTime.parse("10:00") < ClockTime.parse("10:00")))
    }

    @Test(
        "valid bedtime windows",
        arguments: [
            ("21:00-07:00", "21:00", "07:00", true),
            ("7:05-08:00", "07:05", "08:00", false),
            ("20:00-07:00", "20:00", "07:00", true),
            ("00:30-06:00", "00:30", "06:00", false),
            ("23:59-00:00", "23:59", "00:00", true),
            ("00:00-23:59", "00:00", "23:59", false),
            (" 21:30-06:45 ", "21:30", "06:45", true),
        ])
    func bedtime(text: String, start: String, end: String, crosses: Bool) throws {
        let window = try #require(try BedtimeWindow.parse(text))
        #expect(window.start.description == start)
        #expect(window.end.description == end)
        #expect(window.crossesMidnight == crosses)
        #expect(window.description == "\(start)-\(end)")
        #expect(try BedtimeWindow.parse(window.description) == window)
    }

    @Test("off means no bedtime", arguments: ["off", "OFF", "Off", " off "])
    func off(text: String) throws {
        #expect(try BedtimeWindow.parse(text) == nil)
    }

    @Test(
        "invalid bedtime windows",
        arguments: [
            ("21:00-21:00", "bedtime start and end must differ, got 21:00-21:00"),
            ("7:00-07:00", "bedtime start and end must differ, got 07:00-07:00"),
            ("24:00-07:00", #"bedtime start must be between 00:00 and 23:59, got "24:00""#),
            ("21:00-12:60", #"bedtime end must be between 00:00 and 23:59, got "12:60""#),
            ("21:00-7", #"bedtime end must look like HH:MM, got "7""#),
            ("9pm-07:00", #"bedtime start must look like HH:MM, got "9pm""#),
            ("21:00", #"bedtime must look like HH:MM-HH:MM or off, got "21:00""#),
            ("21:00-07:00-08:00", #"bedtime must look like HH:MM-HH:MM or off, got "21:00-07:00-08:00""#),
            ("", #"bedtime must look like HH:MM-HH:MM or off, got """#),
            ("on", #"bedtime must look like HH:MM-HH:MM or off, got "on""#),
            ("21:00–07:00", #"bedtime must look like HH:MM-HH:MM or off, got "21:00–07:00""#),
        ])
    func invalidBedtime(text: String, message: String) {
        #expect(policyErrorMessage { () throws(PolicyError) in try BedtimeWindow.parse(text) } == message)
    }

    @Test("a window built from equal times is refused")
    func equalTimes() {
        let time = ClockTime(hour: 21, minute: 0)
        #expect(
            policyErrorMessage { () throws(PolicyError) in try BedtimeWindow(start: time, end: time) }
                == "bedtime start and end must differ, got 21:00-21:00")
    }
}

@Suite("Dates and weekdays")
struct DateParsingTests {
    @Test(
        "valid dates",
        arguments: [
            ("2028-02-29", 2028, 2, 29),
            ("2000-02-29", 2000, 2, 29),
            ("2026-01-01", 2026, 1, 1),
            ("2026-12-31", 2026, 12, 31),
            ("2026-04-30", 2026, 4, 30),
            ("0001-01-01", 1, 1, 1),
            ("9999-12-31", 9999, 12, 31),
        ])
    func valid(text: String, year: Int, month: Int, day: Int) throws {
        let date = try LocalDate.parse(text)
        #expect(date.year == year)
        #expect(date.month == month)
        #expect(date.day == day)
        #expect(date.description == text)
    }

    @Test(
        "invalid dates",
        arguments: [
            ("2026-02-29", #"date must be a real calendar day, got "2026-02-29""#),
            ("2100-02-29", #"date must be a real calendar day, got "2100-02-29""#),
            ("1900-02-29", #"date must be a real calendar day, got "1900-02-29""#),
            ("2026-04-31", #"date must be a real calendar day, got "2026-04-31""#),
            ("2026-13-01", #"date must be a real calendar day, got "2026-13-01""#),
            ("2026-00-10", #"date must be a real calendar day, got "2026-00-10""#),
            ("2026-01-00", #"date must be a real calendar day, got "2026-01-00""#),
            ("0000-01-01", #"date must be a real calendar day, got "0000-01-01""#),
            ("2026-1-01", #"date must look like YYYY-MM-DD, got "2026-1-01""#),
            ("26-01-01", #"date must look like YYYY-MM-DD, got "26-01-01""#),
            ("2026/01/01", #"date must look like YYYY-MM-DD, got "2026/01/01""#),
            ("2026-01-01T00:00", #"date must look like YYYY-MM-DD, got "2026-01-01T00:00""#),
            ("+026-01-01", #"date must look like YYYY-MM-DD, got "+026-01-01""#),
            ("２026-01-01", #"date must look like YYYY-MM-DD, got "２026-01-01""#),
            ("today", #"date must look like YYYY-MM-DD, got "today""#),
            ("", #"date must look like YYYY-MM-DD, got """#),
        ])
    func invalid(text: String, message: String) {
        #expect(policyErrorMessage { () throws(PolicyError) in try LocalDate.parse(text) } == message)
    }

    @Test(
        "the initialiser refuses impossible days",
        arguments: [(2026, 2, 29), (2026, 2, 0), (2026, 0, 1), (2026, 13, 1), (0, 1, 1), (10000, 1, 1), (2026, 6, 31)])
    func impossible(year: Int, month: Int, day: Int) {
        #expect(LocalDate(year: year, month: month, day: day) == nil)
    }

    @Test(
        "days since the epoch of known dates",
        arguments: [
            ("1970-01-01", 0),
            ("1970-01-02", 1),
            ("1969-12-31", -1),
            ("2000-01-01", 10957),
            ("2000-03-01", 11017),
            ("2026-01-01", 20454),
            ("0001-01-01", -719_162),
            ("9999-12-31", 2_932_896),
        ])
    func knownDays(text: String, days: Int) throws {
        let date = try LocalDate.parse(text)
        #expect(date.daysSinceEpoch == days)
        #expect(LocalDate(daysSinceEpoch: days) == date)
    }

    /// Walks the calendar one day at a time with a counter kept here, from 1600 to 2400, and checks
    /// both directions of the conversion on every day.
    @Test("daysSinceEpoch round trip, day by day")
    func roundTrip() throws {
        func isLeap(_ year: Int) -> Bool { (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 }
        func length(_ month: Int, _ year: Int) -> Int {
            [31, isLeap(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        }
        // 1600-01-01: 370 years before 1970, of which 90 are leap years (1600..1968, minus 1700, 1800, 1900).
        var days = -(370 * 365 + 90)
        var mismatches = 0
        for year in 1600...2400 {
            for month in 1...12 {
                for day in 1...length(month, year) {
                    let date = try #require(LocalDate(year: year, month: month, day: day))
                    let back = LocalDate(daysSinceEpoch: days)
                    if date.daysSinceEpoch != days || back != date { mismatches += 1 }
                    days += 1
                }
            }
        }
        #expect(mismatches == 0)
        #expect(try LocalDate.parse("2401-01-01").daysSinceEpoch == days)
    }

    @Test("round trip at the ends of the supported range", arguments: [-719_162, -719_161, -1, 0, 1, 2_932_895, 2_932_896])
    func extremes(days: Int) {
        #expect(LocalDate(daysSinceEpoch: days).daysSinceEpoch == days)
    }

    @Test(
        "weekdays of known dates",
        arguments: [
            ("1970-01-01", Weekday.thu),
            ("1969-12-31", .wed),
            ("1969-12-28", .sun),
            ("2000-01-01", .sat),
            ("1900-01-01", .mon),
            ("0001-01-01", .mon),
            ("2024-02-29", .thu),
            ("2026-01-01", .thu),
            ("2026-03-29", .sun),
            ("2026-10-25", .sun),
            ("2026-11-01", .sun),
            ("2026-04-03", .fri),
            ("2026-07-04", .sat),
            ("2026-12-25", .fri),
            ("9999-12-31", .fri),
        ])
    func weekday(text: String, weekday: Weekday) throws {
        #expect(try LocalDate.parse(text).weekday == weekday)
    }

    @Test("adding days and ordering")
    func adding() throws {
        let date = try LocalDate.parse("2026-02-28")
        #expect(date.adding(days: 1) == (try LocalDate.parse("2026-03-01")))
        #expect(date.adding(days: -59) == (try LocalDate.parse("2025-12-31")))
        #expect(date.adding(days: 365) == (try LocalDate.parse("2027-02-28")))
        #expect(try LocalDate.parse("2028-02-28").adding(days: 1) == LocalDate.parse("2028-02-29"))
        #expect(date < date.adding(days: 1))
        #expect(try LocalDate.parse("2025-12-31") < LocalDate.parse("2026-01-01"))
    }

    @Test(
        "weekday names",
        arguments: [
            ("mon", Weekday.mon), ("tue", .tue), ("wed", .wed), ("thu", .thu), ("fri", .fri), ("sat", .sat),
            ("sun", .sun), ("Monday", .mon), ("SATURDAY", .sat), ("sunday", .sun), ("Fri", .fri),
            ("wednesday", .wed),
        ])
    func weekdayNames(text: String, weekday: Weekday) throws {
        #expect(try Weekday.parse(text) == weekday)
    }

    @Test("unknown weekday names", arguments: ["mo", "", "montag", "satur", "7", "weekend"])
    func badWeekday(text: String) {
        #expect(
            policyErrorMessage { () throws(PolicyError) in try Weekday.parse(text) }
                == "weekday must be one of mon, tue, wed, thu, fri, sat, sun, got \(quoted(text))")
    }

    @Test("weekday order, index and names")
    func weekdayOrder() {
        #expect(Weekday.allCases.map(\.index) == [0, 1, 2, 3, 4, 5, 6])
        #expect(Weekday.allCases.sorted() == [.mon, .tue, .wed, .thu, .fri, .sat, .sun])
        #expect(Weekday.sat.name == "Saturday")
        #expect(Weekday.mon < Weekday.sun)
    }

    @Test("quoted values in messages")
    func quoting() {
        #expect(quoted("abc") == #""abc""#)
        #expect(quoted("a\"b") == #""a\"b""#)
        #expect(quoted("line\nbreak") == #""line\nbreak""#)
        #expect(quoted(String(repeating: "x", count: 64)) == "\"" + String(repeating: "x", count: 64) + "\"")
        #expect(quoted(String(repeating: "x", count: 65)) == "\"" + String(repeating: "x", count: 64) + "...\"")
    }
}
