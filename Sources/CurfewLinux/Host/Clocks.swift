#if canImport(Glibc)
    import Glibc
    import CLinux
#endif

/// The three clocks the agent reads each tick, in milliseconds.
public struct ClockReading: Sendable, Equatable {
    /// CLOCK_MONOTONIC: elapsed time, stops while the machine is suspended.
    public var monotonic: Int64
    /// CLOCK_BOOTTIME: like monotonic, but runs on during suspend.
    public var boottime: Int64
    /// CLOCK_REALTIME: the wall clock, which may be set at any time.
    public var wall: Int64

    public init(monotonic: Int64, boottime: Int64, wall: Int64) {
        self.monotonic = monotonic
        self.boottime = boottime
        self.wall = wall
    }

    /// Reads all three (clock_gettime).
    public static func now() -> ClockReading {
        ClockReading(monotonic: read(CLOCK_MONOTONIC), boottime: read(CLOCK_BOOTTIME), wall: read(CLOCK_REALTIME))
    }

    /// Milliseconds of `clock`: the one place the agent reads a clock.
    static func read(_ clock: clockid_t) -> Int64 { microseconds(clock) / 1000 }

    /// Microseconds of `clock` (sd-bus counts its timeouts in them).
    static func microseconds(_ clock: clockid_t) -> Int64 { nanoseconds(clock) / 1000 }

    /// Nanoseconds of `clock` (condition-variable deadlines). clock_gettime fails only for an unknown
    /// clock or a bad pointer, neither possible here.
    static func nanoseconds(_ clock: clockid_t) -> Int64 {
        var spec = timespec()
        let result = clock_gettime(clock, &spec)
        precondition(result == 0, "clock_gettime(\(clock)) failed: errno \(errno)")
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }
}
