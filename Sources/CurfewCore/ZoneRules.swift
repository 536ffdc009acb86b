import Synchronization

/// Local wall-clock time in one time zone, converted to and from instants without ambiguity.
///
/// The rules are the system's tz database (TZif, RFC 8536: `ZoneData`), read by a zone source
/// outside the core (`ZoneDatabase`). A wall time in a skipped hour becomes the next valid time
/// (02:30 becomes 03:00, as docs/design.md says), one in a repeated hour its first occurrence.
public struct ZoneRules: Sendable {
    /// The zone's name as given (`Europe/Berlin`, `UTC`).
    public let identifier: String
    public let data: ZoneData

    public init(identifier: String, data: ZoneData) {
        self.identifier = identifier
        self.data = data
    }

    /// UTC, known without any database.
    public static let utc = ZoneRules(identifier: "UTC", data: .fixed(offset: 0, abbreviation: "UTC"))

    /// nil if `identifier` is not a zone name of this computer's tz database.
    public init?(identifier: String) {
        guard let zone = ZoneDatabase.zone(named: identifier) else { return nil }
        self = zone
    }

    /// This computer's own zone, as the installed zone source reads it (`/etc/localtime`, `TZ`).
    public static var system: ZoneRules { ZoneDatabase.system }

    /// A name the tz database could hold: components of letters, digits, `.`, `_`, `+` and `-`, none
    /// starting with `.` or `-`, no absolute path; not the database's own helper files or its
    /// `posix/` and `right/` copies.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 200 else { return false }
        let components = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        for component in components {
            guard let first = component.first, first != UInt8(ascii: "."), first != UInt8(ascii: "-") else { return false }
            for byte in component {
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "+"),
                    UInt8(ascii: "-"):
                    continue
                default: return false
                }
            }
        }
        let head = String(decoding: components[0], as: UTF8.self)
        if components.count > 1, head == "posix" || head == "right" { return false }
        return !["localtime", "posixrules", "Factory"].contains(name)
    }

    /// A valid name that this computer's tz database holds.
    public static func isKnownZone(_ name: String) -> Bool { ZoneDatabase.zone(named: name) != nil }

    /// Seconds east of UTC at `instant`.
    public func offset(at instant: Int64) -> Int64 { data.type(at: instant).offset }

    /// Whether daylight saving time is in force at `instant`.
    public func isDaylightSaving(at instant: Int64) -> Bool { data.type(at: instant).isDaylightSaving }

    /// Every instant in `range` at which the offset or the daylight saving flag changes, with the
    /// offset and flag from then on: the table's transitions, then the footer's.
    public func transitions(in range: Range<Int64>) -> [(instant: Int64, offset: Int64, isDaylightSaving: Bool)] {
        var result: [(instant: Int64, offset: Int64, isDaylightSaving: Bool)] = []
        var candidates = data.transitions.filter { range.contains($0) }
        if let footer = data.footer, let daylight = footer.daylight {
            let after = max(range.lowerBound, data.transitions.last ?? Int64.min)
            let first = civilYear(ofDay: floorDivide(after, 86_400)) - 1
            let last = civilYear(ofDay: floorDivide(range.upperBound, 86_400)) + 1
            if first <= last {
                for year in first...last {
                    let (start, end) = footer.changes(in: year, daylight)
                    candidates += [start, end].filter { $0 > after && range.contains($0) }
                }
            }
        }
        var previous = data.type(at: range.lowerBound - 1)
        for instant in Set(candidates).sorted() {
            let type = data.type(at: instant)
            if type != previous { result.append((instant, type.offset, type.isDaylightSaving)) }
            previous = type
        }
        return result
    }

    /// The local date and the second of that local day at `instant`.
    public func localTime(at instant: Int64) -> (date: LocalDate, secondOfDay: Int) {
        let local = instant + offset(at: instant)
        let days = local >= 0 ? local / 86_400 : (local - 86_399) / 86_400
        return (LocalDate(daysSinceEpoch: Int(days)), Int(local - days * 86_400))
    }

    /// The instant at which the wall clock shows `time` on `date`. In a skipped interval, the first
    /// valid instant after it (the transition itself); in a repeated interval, the first occurrence.
    public func instant(_ date: LocalDate, _ time: ClockTime) -> Instant {
        let wall = Int64(date.daysSinceEpoch) * 86_400 + Int64(time.minuteOfDay) * 60
        let earlierOffset = offset(at: wall - 86_400 * 2)
        let laterOffset = offset(at: wall + 86_400 * 2)
        var candidates: [Int64] = []
        for guess in [earlierOffset, laterOffset] {
            let instant = wall - guess
            if offset(at: instant) == guess { candidates.append(instant) }
        }
        if let first = candidates.min() { return Instant(seconds: first) }
        // Neither offset maps back: the wall time was skipped. The clock jumped forward somewhere in
        // (wall - laterOffset, wall - earlierOffset]; find the first instant on the new offset.
        var low = wall - laterOffset  // still on the earlier offset
        var high = wall - earlierOffset  // already on the later offset
        if low > high { swap(&low, &high) }
        let newOffset = offset(at: high)
        while high - low > 1 {
            let middle = low + (high - low) / 2
            if offset(at: middle) == newOffset { high = middle } else { low = middle }
        }
        return Instant(seconds: high)
    }

    /// The first instant of a local day (00:00, or the first valid time after it).
    public func start(of date: LocalDate) -> Instant { instant(date, ClockTime(hour: 0, minute: 0)) }

    /// ISO 8601 with this zone's offset at that instant: `2026-03-29T03:00:00+02:00`.
    public func iso8601(_ instant: Int64) -> String {
        let offset = offset(at: instant)
        let (date, second) = localTime(at: instant)
        let sign = offset < 0 ? "-" : "+"
        let magnitude = abs(offset) / 60
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let seconds = Int64(second)
        return "\(date)T\(two(seconds / 3600)):\(two(seconds / 60 % 60)):\(two(seconds % 60))"
            + "\(sign)\(two(magnitude / 60)):\(two(magnitude % 60))"
    }
}

/// Formats an instant as UTC ISO 8601 (`2026-11-21T23:55:42Z`), as records carry time.
public func utcTimestamp(_ instant: Int64) -> String {
    let days = instant >= 0 ? instant / 86_400 : (instant - 86_399) / 86_400
    let second = instant - days * 86_400
    func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(LocalDate(daysSinceEpoch: Int(days)))T\(two(second / 3600)):\(two(second / 60 % 60)):\(two(second % 60))Z"
}

/// Reads what `utcTimestamp` writes.
public func parseUTCTimestamp(_ text: String) -> Int64? {
    let bytes = Array(text.utf8)
    guard bytes.count == 20, bytes[10] == UInt8(ascii: "T"), bytes[19] == UInt8(ascii: "Z"),
        bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
        let date = try? LocalDate.parse(String(decoding: bytes[0..<10], as: UTF8.self)),
        let hour = Int(String(decoding: bytes[11..<13], as: UTF8.self)),
        let minute = Int(String(decoding: bytes[14..<16], as: UTF8.self)),
        let second = Int(String(decoding: bytes[17..<19], as: UTF8.self)),
        (0..<24).contains(hour), (0..<60).contains(minute), (0..<60).contains(second)
    else { return nil }
    return Int64(date.daysSinceEpoch) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
}

extension Schedule {
    /// The zone a policy is evaluated in: its own, or this computer's (`system`, read once by callers
    /// that ask often).
    public static func zone(for policy: Policy, system: @autoclosure () -> ZoneRules = ZoneRules.system)
        -> ZoneRules
    {
        if let name = policy.timezone, let zone = ZoneRules(identifier: name) { return zone }
        return system()
    }
}

/// Where zones come from: a source installed once at start-up by each program (the system's tz
/// database, read outside the core). Without one, only UTC is known.
public protocol ZoneSource: Sendable {
    /// The zone of that (already validated) name, or nil if the database has none.
    func zone(named name: String) -> ZoneRules?
    /// This computer's own zone.
    func systemZone() -> ZoneRules
}

public enum ZoneDatabase {
    private static let installed = Mutex<(any ZoneSource)?>(nil)

    public static func install(_ source: any ZoneSource) { installed.withLock { $0 = source } }

    public static var source: (any ZoneSource)? { installed.withLock { $0 } }

    /// The zone of a valid name, or nil.
    public static func zone(named name: String) -> ZoneRules? {
        guard ZoneRules.isValidName(name) else { return nil }
        if let source { return source.zone(named: name) }
        return name == "UTC" || name == "Etc/UTC" ? ZoneRules(identifier: name, data: ZoneRules.utc.data) : nil
    }

    public static var system: ZoneRules { source?.systemZone() ?? .utc }
}
