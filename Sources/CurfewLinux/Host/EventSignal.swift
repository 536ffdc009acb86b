import SystemPackage
import CurfewPOSIX
import CLinux

#if canImport(Glibc)
    import Glibc
#endif

/// A descriptor that becomes readable when another thread signals (eventfd(2)), so a loop blocked
/// in poll(2) on its own descriptors wakes at once for a stop or a change it must look at.
///
/// A counter, not a queue: many signals before the waiter looks are one wake-up. Sendable: any
/// thread may signal; one thread drains.
public final class EventSignal: Sendable {
    /// The eventfd, open for as long as the signal; nil when none could be made (out of descriptors),
    /// in which case waiters cap their waits (`Readiness.degradedWaitMilliseconds`) and look again.
    public let descriptor: FileDescriptor?

    /// eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); the flags are O_CLOEXEC and O_NONBLOCK.
    public init() {
        let made = eventfd(0, CURFEW_EFD_CLOEXEC | CURFEW_EFD_NONBLOCK)
        descriptor = made >= 0 ? FileDescriptor(rawValue: made) : nil
    }

    deinit { try? descriptor?.close() }

    /// Makes the descriptor readable until `drain` (write(2) of 1; a full counter is readable anyway).
    public func signal() {
        guard let descriptor else { return }
        var one: UInt64 = 1
        _ = valueOrErrno { write(descriptor.rawValue, &one, 8) }
    }

    /// Whether it was signalled since the last drain; resets it (read(2)).
    @discardableResult
    public func drain() -> Bool {
        guard let descriptor else { return false }
        var count: UInt64 = 0
        let read = valueOrErrno { Glibc.read(descriptor.rawValue, &count, 8) }
        return (try? read.get()) == 8 && count > 0
    }

    /// Whether it is signalled now, without resetting it.
    public var isSignalled: Bool {
        guard descriptor != nil else { return false }
        return Readiness.wait([descriptor], timeoutMilliseconds: 0).first ?? false
    }
}

/// poll(2) over descriptors: the one way the agent's loops wait.
public enum Readiness {
    /// How long a wait lasts at most when one of its descriptors is missing (an `EventSignal` that
    /// could not be made): the waiter looks again this often instead of never.
    public static let degradedWaitMilliseconds: Int64 = 250

    /// Waits until one of `descriptors` is readable (or has an error or hang-up), or
    /// `timeoutMilliseconds` pass (negative: no timeout). Returns, per descriptor, whether it is
    /// ready; all false on timeout or EINTR. Missing descriptors (nil: an `EventSignal` without one)
    /// are never ready and shorten the wait to `degradedWaitMilliseconds`. The descriptors are borrowed.
    public static func wait(_ descriptors: [FileDescriptor?], timeoutMilliseconds: Int64) -> [Bool] {
        var timeout = timeoutMilliseconds
        if descriptors.contains(nil) {
            timeout = timeout < 0 ? degradedWaitMilliseconds : min(timeout, degradedWaitMilliseconds)
        }
        var pollers = descriptors.map { pollfd(fd: $0?.rawValue ?? -1, events: Int16(POLLIN), revents: 0) }
        let ready = poll(&pollers, nfds_t(pollers.count), timeout < 0 ? -1 : Int32(clamping: timeout))
        guard ready > 0 else { return Array(repeating: false, count: descriptors.count) }
        return pollers.map { $0.revents != 0 }
    }
}
