/// A moment on the wall clock: whole milliseconds since 1970-01-01 00:00 UTC. The unit is in the
/// type, so a value read in seconds (`init(seconds:)`, `seconds`) cannot be mistaken for one in
/// milliseconds; the distance between two instants is a `Duration`.
///
/// Only wall-clock time: monotonic readings (`CLOCK_MONOTONIC`, what deadlines and token buckets
/// count in) have no epoch and stay plain milliseconds.
public struct Instant: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Milliseconds since the epoch (negative before it).
    public let milliseconds: Int64

    public init(milliseconds: Int64) {
        self.milliseconds = milliseconds
    }

    /// The start of that second.
    public init(seconds: Int64) {
        milliseconds = seconds * 1000
    }

    /// 1970-01-01 00:00:00 UTC.
    public static let epoch = Instant(milliseconds: 0)

    /// The whole second the instant falls in, rounded toward minus infinity: -1 ms is in second -1.
    public var seconds: Int64 { floorDivide(milliseconds, 1000) }

    public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.milliseconds < rhs.milliseconds }

    /// `duration` later, to the millisecond (what is finer is dropped, toward zero).
    public static func + (instant: Instant, duration: Duration) -> Instant {
        Instant(milliseconds: instant.milliseconds + duration.wholeMilliseconds)
    }

    /// `duration` earlier, to the millisecond.
    public static func - (instant: Instant, duration: Duration) -> Instant {
        Instant(milliseconds: instant.milliseconds - duration.wholeMilliseconds)
    }

    /// How long from `earlier` to `later` (negative when `later` comes first).
    public static func - (later: Instant, earlier: Instant) -> Duration {
        .milliseconds(later.milliseconds - earlier.milliseconds)
    }

    public static func += (instant: inout Instant, duration: Duration) { instant = instant + duration }

    public static func -= (instant: inout Instant, duration: Duration) { instant = instant - duration }

    /// `2026-11-21T23:55:42.250Z`: UTC, to the millisecond (test failures and logs).
    public var description: String {
        let millisecond = milliseconds - seconds * 1000
        let digits = String(millisecond)
        let stamp = utcTimestamp(seconds)
        return stamp.dropLast() + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }
}

extension Duration {
    /// The duration in whole milliseconds, rounded toward zero.
    public var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// The duration in whole seconds, rounded toward minus infinity (as `Instant.seconds`).
    public var wholeSeconds: Int64 { floorDivide(wholeMilliseconds, 1000) }
}

extension ZoneRules {
    /// The local date and the second of that local day at `instant` (its whole second).
    public func localTime(at instant: Instant) -> (date: LocalDate, secondOfDay: Int) { localTime(at: instant.seconds) }

    /// ISO 8601 with this zone's offset at the instant (its whole second): `2026-03-29T03:00:00+02:00`.
    public func iso8601(_ instant: Instant) -> String { iso8601(instant.seconds) }
}
