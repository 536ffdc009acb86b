/// A time zone's rules as the tz database compiles them (RFC 8536, "TZif"): the transitions it lists
/// and, for instants after the last one, the POSIX TZ string of its footer. Bytes in, rules out: the
/// core reads no file (a zone provider outside it does, and passes the bytes).
public struct ZoneData: Sendable, Equatable {
    /// One local time type: seconds east of UTC, daylight saving or not, and its abbreviation.
    public struct LocalTimeType: Sendable, Equatable {
        public var offset: Int64
        public var isDaylightSaving: Bool
        public var abbreviation: String

        public init(offset: Int64, isDaylightSaving: Bool, abbreviation: String) {
            self.offset = offset
            self.isDaylightSaving = isDaylightSaving
            self.abbreviation = abbreviation
        }
    }

    /// Transition instants (seconds since 1970 UTC), strictly increasing.
    public var transitions: [Int64]
    /// The local time type in force from each transition on (an index into `types`).
    public var transitionTypes: [UInt8]
    public var types: [LocalTimeType]
    /// The rule for instants after the last transition; nil when the file has none (version 1, or an
    /// empty footer): then the last transition's type lasts for ever.
    public var footer: PosixTimeZone?

    public init(transitions: [Int64], transitionTypes: [UInt8], types: [LocalTimeType], footer: PosixTimeZone?) {
        self.transitions = transitions
        self.transitionTypes = transitionTypes
        self.types = types
        self.footer = footer
    }

    /// The type in force at `instant`, from the table or the footer.
    func type(at instant: Int64) -> (offset: Int64, isDaylightSaving: Bool) {
        if transitions.isEmpty, let footer { return footer.type(at: instant) }
        guard let last = transitions.last, instant >= last else {
            // Before the first transition: type 0 (RFC 8536 3.2). Otherwise the last transition at or
            // before the instant.
            var low = 0
            var high = transitions.count  // transitions[high] > instant
            while low < high {
                let middle = (low + high) / 2
                if transitions[middle] <= instant { low = middle + 1 } else { high = middle }
            }
            let type = low == 0 ? types[0] : types[Int(transitionTypes[low - 1])]
            return (type.offset, type.isDaylightSaving)
        }
        if let footer { return footer.type(at: instant) }
        let type = types[Int(transitionTypes[transitions.count - 1])]
        return (type.offset, type.isDaylightSaving)
    }
}

public struct ZoneDataError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

extension ZoneData {
    /// The zone as a fixed offset with no transitions (UTC, for one).
    public static func fixed(offset: Int64, abbreviation: String) -> ZoneData {
        ZoneData(
            transitions: [], transitionTypes: [],
            types: [LocalTimeType(offset: offset, isDaylightSaving: false, abbreviation: abbreviation)], footer: nil)
    }

    /// Reads a TZif file: for version 2 and later the 64-bit data block and the footer, for
    /// version 1 the 32-bit block. Files with leap-second records ("right/" zones) are refused: their
    /// times are not the civil time scale that the rest of Curfew counts in.
    public static func parse(_ bytes: [UInt8]) throws(ZoneDataError) -> ZoneData {
        var reader = ByteReader(bytes: bytes)
        let first = try reader.header()
        if first.version == 0 {
            return try reader.block(first, timeSize: 4, footer: nil)
        }
        // Skip the version 1 block to the second header.
        try reader.skip(first.size(timeSize: 4))
        let second = try reader.header()
        guard second.version >= 2 else { throw ZoneDataError("the second header of a version 2+ file says version 1") }
        let start = reader.position
        try reader.skip(second.size(timeSize: 8))
        guard try reader.byte() == UInt8(ascii: "\n") else { throw ZoneDataError("the footer does not start with a newline") }
        var text: [UInt8] = []
        while true {
            let byte = try reader.byte()
            if byte == UInt8(ascii: "\n") { break }
            guard text.count < 256 else { throw ZoneDataError("the footer's TZ string is longer than 256 bytes") }
            text.append(byte)
        }
        let footer: PosixTimeZone? =
            if text.isEmpty { nil } else { try PosixTimeZone.parse(String(decoding: text, as: UTF8.self), version: second.version) }
        reader.position = start
        return try reader.block(second, timeSize: 8, footer: footer)
    }
}

private struct TZifHeader {
    var version: Int
    var isUTCCount: Int, isStandardCount: Int, leapCount: Int, timeCount: Int, typeCount: Int, charCount: Int

    func size(timeSize: Int) -> Int {
        timeCount * timeSize + timeCount + typeCount * 6 + charCount + leapCount * (timeSize + 4) + isStandardCount
            + isUTCCount
    }
}

private struct ByteReader {
    let bytes: [UInt8]
    var position = 0

    mutating func byte() throws(ZoneDataError) -> UInt8 {
        guard position < bytes.count else { throw ZoneDataError("the file ends early") }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func skip(_ count: Int) throws(ZoneDataError) {
        guard count >= 0, count <= bytes.count - position else { throw ZoneDataError("the file ends early") }
        position += count
    }

    mutating func unsigned32() throws(ZoneDataError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 { value = value << 8 | UInt32(try byte()) }
        return value
    }

    mutating func signed(_ size: Int) throws(ZoneDataError) -> Int64 {
        if size == 4 { return Int64(Int32(bitPattern: try unsigned32())) }
        var value: UInt64 = 0
        for _ in 0..<8 { value = value << 8 | UInt64(try byte()) }
        return Int64(bitPattern: value)
    }

    mutating func header() throws(ZoneDataError) -> TZifHeader {
        guard bytes.count - position >= 44, Array(bytes[position..<position + 4]) == Array("TZif".utf8) else {
            throw ZoneDataError("not a TZif file (no \"TZif\" magic)")
        }
        position += 4
        let versionByte = try byte()
        let version: Int
        switch versionByte {
        case 0: version = 1
        case UInt8(ascii: "2")...UInt8(ascii: "9"): version = Int(versionByte - UInt8(ascii: "0"))
        default: throw ZoneDataError("unknown TZif version byte \(versionByte)")
        }
        try skip(15)
        var counts: [Int] = []
        for _ in 0..<6 {
            let count = try unsigned32()
            // A real zone has a few hundred transitions at most; bound what a file can make us allocate.
            guard count <= 100_000 else { throw ZoneDataError("a TZif count of \(count) is out of range") }
            counts.append(Int(count))
        }
        let header = TZifHeader(
            version: version == 1 ? 0 : version, isUTCCount: counts[0], isStandardCount: counts[1], leapCount: counts[2],
            timeCount: counts[3], typeCount: counts[4], charCount: counts[5])
        guard header.typeCount >= 1, header.typeCount <= 256, header.charCount >= 1 else {
            throw ZoneDataError("a TZif file needs 1 to 256 local time types and an abbreviation")
        }
        guard header.isUTCCount == 0 || header.isUTCCount == header.typeCount,
            header.isStandardCount == 0 || header.isStandardCount == header.typeCount
        else { throw ZoneDataError("the UT/local and standard/wall indicator counts do not match the types") }
        return header
    }

    mutating func block(_ header: TZifHeader, timeSize: Int, footer: PosixTimeZone?) throws(ZoneDataError) -> ZoneData {
        guard header.leapCount == 0 else { throw ZoneDataError("leap-second zones are not civil time") }
        var transitions: [Int64] = []
        transitions.reserveCapacity(header.timeCount)
        for _ in 0..<header.timeCount {
            let time = try signed(timeSize)
            if let last = transitions.last, time <= last { throw ZoneDataError("transition times are not increasing") }
            transitions.append(time)
        }
        var indices: [UInt8] = []
        for _ in 0..<header.timeCount {
            let index = try byte()
            guard Int(index) < header.typeCount else { throw ZoneDataError("a transition names type \(index)") }
            indices.append(index)
        }
        var raw: [(offset: Int64, dst: Bool, index: Int)] = []
        for _ in 0..<header.typeCount {
            let offset = Int64(Int32(bitPattern: try unsigned32()))
            let dst = try byte()
            let index = Int(try byte())
            // RFC 8536 3.2: -2^31 is not a valid offset; real ones are within a day.
            guard offset > -89_400, offset < 93_600, dst <= 1, index < header.charCount else {
                throw ZoneDataError("a local time type is out of range (offset \(offset))")
            }
            raw.append((offset, dst == 1, index))
        }
        let charactersStart = position
        try skip(header.charCount)
        let characters = Array(bytes[charactersStart..<position])
        let types = raw.map { entry in
            let tail = characters[entry.index...]
            let end = tail.firstIndex(of: 0) ?? characters.endIndex
            return ZoneData.LocalTimeType(
                offset: entry.offset, isDaylightSaving: entry.dst,
                abbreviation: String(decoding: characters[entry.index..<end], as: UTF8.self))
        }
        try skip(header.isStandardCount + header.isUTCCount)
        return ZoneData(transitions: transitions, transitionTypes: indices, types: types, footer: footer)
    }
}

/// A POSIX TZ string as TZif footers use it (RFC 8536 3.3): `std offset [dst [offset] [,start[/time],end[/time]]]`,
/// with the extension of 3.3.1 (a rule's time may be negative and up to 167 hours).
public struct PosixTimeZone: Sendable, Equatable {
    /// Seconds east of UTC (the string says west: `CET-1` is +3600).
    public var standardOffset: Int64
    public var standardName: String
    public var daylight: Daylight?

    public struct Daylight: Sendable, Equatable {
        public var offset: Int64
        public var name: String
        public var start: Rule
        public var end: Rule
    }

    /// When in a year a change happens: the day, and the local time of that day (in the time in
    /// force before the change) in seconds.
    public struct Rule: Sendable, Equatable {
        public enum Day: Sendable, Equatable {
            /// `Jn`: 1...365, February 29 never counted.
            case julianWithoutLeapDay(Int)
            /// `n`: 0...365, February 29 counted.
            case zeroBasedDay(Int)
            /// `Mm.w.d`: month, week 1...5 (5: the last), weekday 0 (Sunday)...6.
            case monthWeekDay(month: Int, week: Int, weekday: Int)
        }
        public var day: Day
        public var time: Int64
    }

    /// Parses a footer's TZ string. `version` 3+ allows the extended rule times of RFC 8536 3.3.1
    /// (so does a version 2 reader in practice; both are accepted).
    public static func parse(_ text: String, version: Int = 3) throws(ZoneDataError) -> PosixTimeZone {
        var parser = PosixParser(bytes: Array(text.utf8))
        let zone = try parser.zone()
        guard parser.atEnd else { throw ZoneDataError("unexpected text in TZ string \"\(text)\"") }
        return zone
    }

    /// The offset and daylight saving flag at `instant`.
    func type(at instant: Int64) -> (offset: Int64, isDaylightSaving: Bool) {
        guard let daylight else { return (standardOffset, false) }
        // The year as the standard-time clock reads it; the changes of the year before and after
        // cover instants near New Year whatever the offsets and rule times.
        let year = civilYear(ofDay: floorDivide(instant + standardOffset, 86_400))
        var best: (instant: Int64, daylight: Bool)?
        for candidate in year - 1...year + 1 {
            let (start, end) = changes(in: candidate, daylight)
            // At equal instants the end of one year's daylight time comes before the next start
            // (DST all year: RFC 8536 3.3.1).
            for change in [(end, false), (start, true)] where change.0 <= instant {
                if best == nil || change.0 >= best!.instant { best = (change.0, change.1) }
            }
        }
        let isDaylight = best?.daylight ?? false
        return isDaylight ? (daylight.offset, true) : (standardOffset, false)
    }

    /// The instants daylight time starts and ends in `year`.
    func changes(in year: Int, _ daylight: Daylight) -> (start: Int64, end: Int64) {
        let start = Int64(day(daylight.start.day, in: year)) * 86_400 + daylight.start.time - standardOffset
        let end = Int64(day(daylight.end.day, in: year)) * 86_400 + daylight.end.time - daylight.offset
        return (start, end)
    }

    /// Days since 1970-01-01 of a rule's day in `year`.
    func day(_ day: Rule.Day, in year: Int) -> Int {
        let january1 = LocalDate.daysFromCivil(year, 1, 1)
        switch day {
        case .julianWithoutLeapDay(let n):
            return january1 + n - 1 + (LocalDate.isLeapYear(year) && n >= 60 ? 1 : 0)
        case .zeroBasedDay(let n):
            return january1 + n
        case .monthWeekDay(let month, let week, let weekday):
            let first = LocalDate.daysFromCivil(year, month, 1)
            let firstWeekday = ((first % 7) + 11) % 7  // 1970-01-01 was a Thursday (4)
            var dayOfMonth = 1 + (weekday - firstWeekday + 7) % 7 + (week - 1) * 7
            let length = LocalDate.daysIn(month: month, year: year)
            while dayOfMonth > length { dayOfMonth -= 7 }
            return first + dayOfMonth - 1
        }
    }
}

private struct PosixParser {
    let bytes: [UInt8]
    var position = 0
    var atEnd: Bool { position == bytes.count }
    var peek: UInt8? { position < bytes.count ? bytes[position] : nil }

    func error(_ what: String) -> ZoneDataError {
        ZoneDataError("TZ string \"\(String(decoding: bytes, as: UTF8.self))\": \(what)")
    }

    mutating func zone() throws(ZoneDataError) -> PosixTimeZone {
        let standardName = try name()
        let standardOffset = -(try offset(maxHours: 24))
        guard !atEnd, peek != UInt8(ascii: ",") else {
            guard atEnd else { throw error("a rule without a daylight saving time name") }
            return PosixTimeZone(standardOffset: standardOffset, standardName: standardName, daylight: nil)
        }
        let daylightName = try name()
        var daylightOffset = standardOffset + 3600
        if let next = peek, next != UInt8(ascii: ",") { daylightOffset = -(try offset(maxHours: 24)) }
        let start: PosixTimeZone.Rule
        let end: PosixTimeZone.Rule
        if atEnd {
            // No rule: POSIX leaves it to the implementation; tzcode and glibc use the US rules.
            start = .init(day: .monthWeekDay(month: 3, week: 2, weekday: 0), time: 7200)
            end = .init(day: .monthWeekDay(month: 11, week: 1, weekday: 0), time: 7200)
        } else {
            try expect(UInt8(ascii: ","))
            start = try rule()
            try expect(UInt8(ascii: ","))
            end = try rule()
        }
        return PosixTimeZone(
            standardOffset: standardOffset, standardName: standardName,
            daylight: .init(offset: daylightOffset, name: daylightName, start: start, end: end))
    }

    mutating func expect(_ byte: UInt8) throws(ZoneDataError) {
        guard peek == byte else { throw error("expected '\(Character(Unicode.Scalar(byte)))' at \(position)") }
        position += 1
    }

    /// `<...>` (letters, digits, + and -) or letters. POSIX wants three or more; zic writes shorter
    /// abbreviations as they are (`TL-2TLS`), and they are read.
    mutating func name() throws(ZoneDataError) -> String {
        let start = position
        if peek == UInt8(ascii: "<") {
            position += 1
            while let byte = peek, byte != UInt8(ascii: ">") {
                guard isLetter(byte) || isDigit(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") else {
                    throw error("a quoted name holds '\(Character(Unicode.Scalar(byte)))'")
                }
                position += 1
            }
            try expect(UInt8(ascii: ">"))
            guard position - start >= 3 else { throw error("an empty name") }
            return String(decoding: bytes[start + 1..<position - 1], as: UTF8.self)
        }
        while let byte = peek, isLetter(byte) { position += 1 }
        guard position > start else { throw error("expected a name at \(position)") }
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }

    mutating func number() throws(ZoneDataError) -> Int {
        var value = 0
        var digits = 0
        while let byte = peek, isDigit(byte) {
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            digits += 1
            position += 1
            guard digits <= 3 else { throw error("a number with more than three digits") }
        }
        guard digits > 0 else { throw error("expected a number at \(position)") }
        return value
    }

    /// `[+-]hh[:mm[:ss]]` in seconds, as written (positive west of Greenwich for offsets).
    mutating func offset(maxHours: Int) throws(ZoneDataError) -> Int64 {
        var sign: Int64 = 1
        if peek == UInt8(ascii: "+") {
            position += 1
        } else if peek == UInt8(ascii: "-") {
            sign = -1
            position += 1
        }
        let hours = try number()
        guard hours <= maxHours else { throw error("\(hours) hours is more than \(maxHours)") }
        var seconds = Int64(hours) * 3600
        if peek == UInt8(ascii: ":") {
            position += 1
            let minutes = try number()
            guard minutes < 60 else { throw error("\(minutes) minutes") }
            seconds += Int64(minutes) * 60
            if peek == UInt8(ascii: ":") {
                position += 1
                let secs = try number()
                guard secs < 60 else { throw error("\(secs) seconds") }
                seconds += Int64(secs)
            }
        }
        return sign * seconds
    }

    mutating func rule() throws(ZoneDataError) -> PosixTimeZone.Rule {
        let day: PosixTimeZone.Rule.Day
        if peek == UInt8(ascii: "J") {
            position += 1
            let n = try number()
            guard (1...365).contains(n) else { throw error("J\(n) is not 1 to 365") }
            day = .julianWithoutLeapDay(n)
        } else if peek == UInt8(ascii: "M") {
            position += 1
            let month = try number()
            try expect(UInt8(ascii: "."))
            let week = try number()
            try expect(UInt8(ascii: "."))
            let weekday = try number()
            guard (1...12).contains(month), (1...5).contains(week), (0...6).contains(weekday) else {
                throw error("M\(month).\(week).\(weekday) is out of range")
            }
            day = .monthWeekDay(month: month, week: week, weekday: weekday)
        } else {
            let n = try number()
            guard (0...365).contains(n) else { throw error("day \(n) is not 0 to 365") }
            day = .zeroBasedDay(n)
        }
        var time: Int64 = 7200
        if peek == UInt8(ascii: "/") {
            position += 1
            // RFC 8536 3.3.1: hours from -167 to 167.
            time = try offset(maxHours: 167)
        }
        return .init(day: day, time: time)
    }
}

private func isLetter(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
}

private func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

func civilYear(ofDay days: Int64) -> Int { LocalDate(daysSinceEpoch: Int(days)).year }
