#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif
import SystemPackage

/// A thread of the process running a Swift closure: the one bridge from pthread_create(3)'s C entry
/// point to Swift. Not Foundation's `Thread` (the indicator and the sync code do without Foundation),
/// and not libdispatch's queues, whose first use arms a timer that wakes the process once a second
/// for as long as it lives (the agent must stay asleep while nothing happens).
public struct POSIXThread: Sendable {
    /// The thread, for `join`.
    public let handle: pthread_t

    /// Starts `body` on a new thread (pthread_create(3)), to be waited for with `join`. Throws the
    /// error number when no thread can be had (EAGAIN: the process is at its limit).
    public static func start(_ body: @escaping @Sendable () -> Void) throws(Errno) -> POSIXThread {
        final class Entry {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        // The new thread takes over the reference; when it cannot be made, it is given back here.
        let entry = Unmanaged.passRetained(Entry(body))
        var thread = pthread_t()
        do {
            try Errno.checkErrorNumber {
                pthread_create(
                    &thread, nil,
                    { context in
                        Unmanaged<Entry>.fromOpaque(context!).takeRetainedValue().body()
                        return nil
                    }, entry.toOpaque())
            }
        } catch {
            entry.release()
            throw error
        }
        return POSIXThread(handle: thread)
    }

    /// Starts `body` on a new thread that nobody waits for: its resources go back when it ends
    /// (pthread_detach(3)). Throws as `start`.
    public static func detach(_ body: @escaping @Sendable () -> Void) throws(Errno) {
        let thread = try start(body)
        pthread_detach(thread.handle)
    }

    /// Waits until the thread has ended (pthread_join(3)); once per thread started with `start`.
    public func join() {
        pthread_join(handle, nil)
    }
}
