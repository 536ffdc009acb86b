import CurfewCore
import CurfewPOSIX

#if canImport(Glibc)
    import Glibc
    import CLinux
#endif

/// The three clocks the agent reads each tick, to the millisecond.
public struct ClockReading: Sendable, Equatable {
    /// CLOCK_MONOTONIC: elapsed time, stops while the machine is suspended.
    public var monotonic: Int64
    /// CLOCK_BOOTTIME: like monotonic, but runs on during suspend.
    public var boottime: Int64
    /// CLOCK_REALTIME: the wall clock, which may be set at any time.
    public var wall: Instant

    public init(monotonic: Int64, boottime: Int64, wall: Instant) {
        self.monotonic = monotonic
        self.boottime = boottime
        self.wall = wall
    }

    /// Reads all three (clock_gettime).
    public static func now() -> ClockReading {
        ClockReading(monotonic: read(CLOCK_MONOTONIC), boottime: read(CLOCK_BOOTTIME), wall: Instant(milliseconds: read(CLOCK_REALTIME)))
    }

    /// Milliseconds of `clock`: the one place the agent reads a clock.
    static func read(_ clock: clockid_t) -> Int64 { microseconds(clock) / 1000 }

    /// Microseconds of `clock` (sd-bus counts its timeouts in them).
    static func microseconds(_ clock: clockid_t) -> Int64 { nanoseconds(clock) / 1000 }

    /// Nanoseconds of `clock` (condition-variable deadlines).
    static func nanoseconds(_ clock: clockid_t) -> Int64 { SystemClock.nanoseconds(clock) }
}

/// The agent's one clock: what it calls now (usage, decisions, events, records), read in one place.
/// It is the machine's; a test may move it forward (`curfewd --clock-offset-file`, hidden) to live
/// through a 15-minute break in a second. Waiting (poll timeouts, the executor) stays on the machine's
/// own clocks, so a moved clock changes what the agent decides, never how long it sleeps.
public struct AgentClock: Sendable {
    private let offsetPath: String?

    /// The machine's clocks.
    public static let machine = AgentClock(offsetPath: nil)

    /// The machine's clocks, all three moved forward by the milliseconds written in `path` (a decimal
    /// number; a missing or unreadable file moves nothing).
    public static func offset(byMillisecondsIn path: String) -> AgentClock { AgentClock(offsetPath: path) }

    public var isMachine: Bool { offsetPath == nil }

    public func now() -> ClockReading {
        var reading = ClockReading.now()
        if let offsetPath, let offset = Self.readOffset(offsetPath) {
            reading.monotonic += offset
            reading.boottime += offset
            reading.wall += .milliseconds(offset)
        }
        return reading
    }

    /// Whole seconds since the epoch.
    public var wallSeconds: Int64 { now().wall.seconds }
    /// Now, to the millisecond.
    public var wallInstant: Instant { now().wall }
    /// The start of the current second: now as the parts of the agent that count in whole seconds
    /// see it (and record it, in events and rows).
    public var wallSecond: Instant { Instant(seconds: wallSeconds) }

    private static func readOffset(_ path: String) -> Int64? {
        guard let bytes = SmallFile.read(path, limit: 32) else { return nil }
        let text = String(decoding: bytes.filter { $0 != UInt8(ascii: "\n") && $0 != UInt8(ascii: " ") }, as: UTF8.self)
        guard let offset = Int64(text), offset >= 0 else { return nil }
        return offset
    }
}
