#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif
import SystemPackage

/// The machine's clocks, read through clock_gettime with its result checked in one place.
public enum SystemClock {
    /// Nanoseconds of `clock`. clock_gettime fails only for a clock the kernel does not have (EINVAL)
    /// or a bad pointer, neither possible with the clocks this program names: a failure stops the
    /// program with the errno rather than hand a caller a zero time.
    public static func nanoseconds(_ clock: clockid_t) -> Int64 {
        var spec = timespec()
        do {
            try Errno.check(retryOnInterrupt: false) { clock_gettime(clock, &spec) }
        } catch {
            preconditionFailure("clock_gettime(\(clock)) failed: \(error) (errno \(error.rawValue))")
        }
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }

    /// CLOCK_MONOTONIC in nanoseconds: elapsed time for deadlines and intervals.
    public static func monotonicNanoseconds() -> Int64 { nanoseconds(CLOCK_MONOTONIC) }
}
