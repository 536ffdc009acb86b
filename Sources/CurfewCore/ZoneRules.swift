import Foundation

/// Local wall-clock time in one time zone, converted to and from instants without ambiguity.
///
/// Foundation's calendar resolves a wall time in a skipped hour by moving it forward by the size of
/// the gap (02:30 becomes 03:30); SPEC.md wants the next valid time instead (03:00), and the first of
/// two occurrences in a repeated hour. This type implements exactly that from the zone's offsets.
public struct ZoneRules: Sendable {
    public let timeZone: TimeZone
    /// The zone's name as given (Foundation calls `UTC` "GMT").
    public let identifier: String

    public init(_ timeZone: TimeZone) {
        self.timeZone = timeZone
        self.identifier = timeZone.identifier
    }

    /// nil if `identifier` is not an IANA zone name known to this computer.
    public init?(identifier: String) {
        guard ZoneRules.isKnownZone(identifier), let zone = TimeZone(identifier: identifier) else { return nil }
        self.timeZone = zone
        self.identifier = identifier
    }

    private static let knownZones = Set(TimeZone.knownTimeZoneIdentifiers)

    /// The areas of IANA's geographic zone names (`Area/Location`).
    private static let ianaAreas: Set<Substring> = [
        "Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific",
    ]

    /// IANA names only: `Europe/Berlin`, `UTC`, `Etc/GMT+2`; not abbreviations or `GMT+2`.
    public static func isKnownZone(_ name: String) -> Bool {
        if knownZones.contains(name) { return true }
        if name == "UTC" { return TimeZone(identifier: name) != nil }
        // Foundation's list holds ICU's names and misses current IANA ones that ICU keeps under an
        // older name (Asia/Kolkata, listed only as Asia/Calcutta). Accept an `Etc/` or geographic
        // name that the zone database resolves to itself; custom ids like GMT+2 resolve to GMT+0200.
        let parts = name.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0] == "Etc" || ianaAreas.contains(parts[0]) else { return false }
        return TimeZone(identifier: name)?.identifier == name
    }

    /// Seconds east of UTC at `instant`.
    public func offset(at instant: Int64) -> Int64 {
        Int64(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(instant))))
    }

    /// The local date and the second of that local day at `instant`.
    public func localTime(at instant: Int64) -> (date: LocalDate, secondOfDay: Int) {
        let local = instant + offset(at: instant)
        let days = local >= 0 ? local / 86_400 : (local - 86_399) / 86_400
        return (LocalDate(daysSinceEpoch: Int(days)), Int(local - days * 86_400))
    }

    /// The instant at which the wall clock shows `time` on `date`. In a skipped interval, the first
    /// valid instant after it (the transition itself); in a repeated interval, the first occurrence.
    public func instant(_ date: LocalDate, _ time: ClockTime) -> Int64 {
        let wall = Int64(date.daysSinceEpoch) * 86_400 + Int64(time.minuteOfDay) * 60
        let earlierOffset = offset(at: wall - 86_400 * 2)
        let laterOffset = offset(at: wall + 86_400 * 2)
        var candidates: [Int64] = []
        for guess in [earlierOffset, laterOffset] {
            let instant = wall - guess
            if offset(at: instant) == guess { candidates.append(instant) }
        }
        if let first = candidates.min() { return first }
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
        return high
    }

    /// The first instant of a local day (00:00, or the first valid time after it).
    public func startOfDay(_ date: LocalDate) -> Int64 { instant(date, ClockTime(hour: 0, minute: 0)) }

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
    public static func zone(for policy: Policy, system: @autoclosure () -> ZoneRules = ZoneRules(TimeZone.current))
        -> ZoneRules
    {
        if let name = policy.timezone, let zone = ZoneRules(identifier: name) { return zone }
        return system()
    }
}
