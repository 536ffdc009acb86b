/// A day of the week, keyed in JSON and on the command line by its three-letter English name.
public enum Weekday: String, CaseIterable, Sendable, Comparable, Codable {
    case mon, tue, wed, thu, fri, sat, sun

    public static func < (lhs: Weekday, rhs: Weekday) -> Bool { lhs.index < rhs.index }

    /// 0 for Monday ... 6 for Sunday.
    public var index: Int { Weekday.allCases.firstIndex(of: self)! }

    public var name: String {
        switch self {
        case .mon: "Monday"
        case .tue: "Tuesday"
        case .wed: "Wednesday"
        case .thu: "Thursday"
        case .fri: "Friday"
        case .sat: "Saturday"
        case .sun: "Sunday"
        }
    }

    public static func parse(_ text: String) throws(PolicyError) -> Weekday {
        let key = text.lowercased()
        if let day = Weekday(rawValue: key) { return day }
        if let day = Weekday.allCases.first(where: { $0.name.lowercased() == key }) { return day }
        throw PolicyError("weekday must be one of mon, tue, wed, thu, fri, sat, sun, got \(quoted(text))")
    }
}

/// A daily amount of time: a number of minutes, or no limit at all.
public enum TimeAllowance: Sendable, Equatable, Hashable {
    case unlimited
    case minutes(Int)

    /// Parses `90m`, `1h30m`, `2h`, `0` and `unlimited`.
    public static func parse(_ text: String) throws(PolicyError) -> TimeAllowance {
        let trimmed = text.trimmingSpaces.lowercased()
        if trimmed == "unlimited" { return .unlimited }
        return .minutes(try parseMinutes(text))
    }

    /// Parses a finite duration (`90m`, `1h30m`, `2h`, `0`) into minutes.
    public static func parseMinutes(_ text: String) throws(PolicyError) -> Int {
        let trimmed = text.trimmingSpaces.lowercased()
        let invalid = PolicyError("duration must look like 90m, 1h30m, 2h, 0 or unlimited, got \(quoted(text))")
        if trimmed == "0" { return 0 }
        var minutes = 0
        var number: Int? = nil
        var seenHours = false
        var seenMinutes = false
        for character in trimmed {
            if let digit = character.wholeNumberValue, character.isASCII {
                let (value, overflow) = (number ?? 0).multipliedReportingOverflow(by: 10)
                guard !overflow, value < 1_000_000 else { throw invalid }
                number = value + digit
            } else if character == "h", let hours = number, !seenHours, !seenMinutes {
                minutes += hours * 60
                seenHours = true
                number = nil
            } else if character == "m", let value = number, !seenMinutes {
                minutes += value
                seenMinutes = true
                number = nil
            } else {
                throw invalid
            }
        }
        guard number == nil, seenHours || seenMinutes else { throw invalid }
        return minutes
    }

    /// `unlimited`, `0`, `45m`, `2h`, `1h30m`: the form `parse` reads back.
    public var text: String {
        switch self {
        case .unlimited: "unlimited"
        case .minutes(let minutes): TimeAllowance.format(minutes: minutes)
        }
    }

    public static func format(minutes: Int) -> String {
        if minutes == 0 { return "0" }
        let hours = minutes / 60
        let rest = minutes % 60
        switch (hours, rest) {
        case (0, _): return "\(rest)m"
        case (_, 0): return "\(hours)h"
        default: return "\(hours)h\(rest)m"
        }
    }

    public var minutes: Int? {
        if case .minutes(let value) = self { return value }
        return nil
    }
}

/// A wall-clock time of day with minute precision.
public struct ClockTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let hour: Int
    public let minute: Int

    public init(hour: Int, minute: Int) {
        precondition((0..<24).contains(hour) && (0..<60).contains(minute))
        self.hour = hour
        self.minute = minute
    }

    public var minuteOfDay: Int { hour * 60 + minute }

    public static func < (lhs: ClockTime, rhs: ClockTime) -> Bool { lhs.minuteOfDay < rhs.minuteOfDay }

    /// `21:00`; hours 00..23 and minutes 00..59, one or two hour digits.
    public static func parse(_ text: String, rule: String = "time") throws(PolicyError) -> ClockTime {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, (1...2).contains(parts[0].count), parts[1].count == 2,
            parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            let hour = Int(parts[0]), let minute = Int(parts[1])
        else {
            throw PolicyError("\(rule) must look like HH:MM, got \(quoted(text))")
        }
        guard (0..<24).contains(hour), (0..<60).contains(minute) else {
            throw PolicyError("\(rule) must be between 00:00 and 23:59, got \(quoted(text))")
        }
        return ClockTime(hour: hour, minute: minute)
    }

    public var description: String {
        (hour < 10 ? "0" : "") + "\(hour):" + (minute < 10 ? "0" : "") + "\(minute)"
    }
}

/// A nightly window during which the computer may not be used. `end < start` crosses midnight;
/// `start == end` is refused because it is ambiguous (never, or always).
public struct BedtimeWindow: Sendable, Hashable, CustomStringConvertible {
    public let start: ClockTime
    public let end: ClockTime

    public init(start: ClockTime, end: ClockTime) throws(PolicyError) {
        guard start != end else {
            throw PolicyError("bedtime start and end must differ, got \(start)-\(end)")
        }
        self.start = start
        self.end = end
    }

    public var crossesMidnight: Bool { end < start }

    public var description: String { "\(start)-\(end)" }

    /// Parses `21:00-07:00`, or `off` (nil).
    public static func parse(_ text: String) throws(PolicyError) -> BedtimeWindow? {
        let trimmed = text.trimmingSpaces
        if trimmed.lowercased() == "off" { return nil }
        let parts = trimmed.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw PolicyError("bedtime must look like HH:MM-HH:MM or off, got \(quoted(text))")
        }
        return try BedtimeWindow(
            start: ClockTime.parse(String(parts[0]), rule: "bedtime start"),
            end: ClockTime.parse(String(parts[1]), rule: "bedtime end"))
    }
}

/// A calendar date without a time zone (the proleptic Gregorian calendar).
public struct LocalDate: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let year: Int
    public let month: Int
    public let day: Int

    public init?(year: Int, month: Int, day: Int) {
        guard (1...9999).contains(year), (1...12).contains(month),
            (1...LocalDate.daysIn(month: month, year: year)).contains(day)
        else { return nil }
        self.year = year
        self.month = month
        self.day = day
    }

    /// Days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
    public var daysSinceEpoch: Int { LocalDate.daysFromCivil(year, month, day) }

    /// Days since 1970-01-01 of any proleptic Gregorian date, in or out of LocalDate's years (the TZif
    /// footer's rules name years past 9999 too).
    static func daysFromCivil(_ year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    public init(daysSinceEpoch days: Int) {
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        self.year = yoe + era * 400 + (m <= 2 ? 1 : 0)
        self.month = m
        self.day = d
    }

    public func adding(days: Int) -> LocalDate { LocalDate(daysSinceEpoch: daysSinceEpoch + days) }

    public var weekday: Weekday {
        // 1970-01-01 was a Thursday.
        let index = ((daysSinceEpoch % 7) + 7 + 3) % 7
        return Weekday.allCases[index]
    }

    public static func < (lhs: LocalDate, rhs: LocalDate) -> Bool { lhs.daysSinceEpoch < rhs.daysSinceEpoch }

    public var description: String {
        let y = String(year)
        let m = month < 10 ? "0\(month)" : "\(month)"
        let d = day < 10 ? "0\(day)" : "\(day)"
        return "\(String(repeating: "0", count: max(0, 4 - y.count)))\(y)-\(m)-\(d)"
    }

    /// `YYYY-MM-DD`.
    public static func parse(_ text: String) throws(PolicyError) -> LocalDate {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2])
        else {
            throw PolicyError("date must look like YYYY-MM-DD, got \(quoted(text))")
        }
        guard let date = LocalDate(year: year, month: month, day: day) else {
            throw PolicyError("date must be a real calendar day, got \(quoted(text))")
        }
        return date
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    static func isLeapYear(_ year: Int) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }
}

/// A policy rule that a value broke, in words for people: "daily limit must be ..., got 17".
public struct PolicyError: Error, Equatable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A value as it appears in an error message: quoted, with control characters escaped, shortened.
public func quoted(_ text: String) -> String {
    var shown = JSONValue.string(String(text.prefix(64))).canonicalString
    if text.count > 64 { shown.insert(contentsOf: "...", at: shown.index(before: shown.endIndex)) }
    return shown
}

extension String {
    var trimmingSpaces: String {
        var slice = Substring(self)
        while slice.first?.isWhitespace == true { slice.removeFirst() }
        while slice.last?.isWhitespace == true { slice.removeLast() }
        return String(slice)
    }
}

/// Lowercase hex digits of `bytes`: key ids, record names, file identities.
public func hexString<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0xF)])
    }
    return String(decoding: out, as: UTF8.self)
}

/// Division that rounds toward minus infinity (seconds of an instant before 1970 stay in their second).
public func floorDivide(_ value: Int64, _ divisor: Int64) -> Int64 {
    value >= 0 ? value / divisor : -((-value + divisor - 1) / divisor)
}
