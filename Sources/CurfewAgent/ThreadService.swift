import CurfewLinux
import CurfewPOSIX
import ServiceLifecycle
import Synchronization
import SystemPackage

/// Runs one blocking loop of the agent on a thread of its own, as a `Service`. Graceful shutdown
/// (SIGTERM) tells every loop to stop; `run` returns when its loop has.
struct ThreadService: Service {
    let name: String
    let agent: Agent
    let stop = StopFlag()
    let body: @Sendable (Agent, StopFlag) -> Void

    init(name: String, agent: Agent, body: @escaping @Sendable (Agent, StopFlag) -> Void) {
        self.name = name
        self.agent = agent
        self.body = body
    }

    func run() async throws {
        try await withGracefulShutdownHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let agent = self.agent
                let body = self.body
                let stop = self.stop
                let threadName = "curfewd-\(name)"
                let loop: @Sendable () -> Void = {
                    // `curfewd-tracker`, `curfewd-exec-gu`, ... in top -H and /proc/PID/task/TID/comm.
                    ThreadName.set(threadName)
                    body(agent, stop)
                    // A loop with nothing to do (no logind, say) must not end the group early.
                    stop.wait(milliseconds: -1)
                    continuation.resume()
                }
                do {
                    try POSIXThread.detach(loop)
                } catch {
                    // No thread to be had (the process is at its limit): the group stops with the error.
                    continuation.resume(throwing: error)
                }
            }
        } onGracefulShutdown: { [stop, agent] in
            agent.beginShutdown()
            stop.set()
        }
    }
}

/// Tells one loop to finish. Its descriptor becomes readable when it is set and stays so: every
/// loop includes it in the poll(2) it sleeps in, so a stop wakes it at once and nothing polls a flag.
public final class StopFlag: Sendable {
    let flag = Mutex(false)
    let signal = EventSignal()
    public init() {}
    public func set() {
        flag.withLock { $0 = true }
        signal.signal()
    }
    public var isSet: Bool { flag.withLock { $0 } }
    /// Readable once set (never drained); borrowed from the flag, which closes it. Nil when no
    /// eventfd could be made: waiters then look at `isSet` every `Readiness.degradedWaitMilliseconds`.
    public var descriptor: FileDescriptor? { signal.descriptor }

    /// Sleeps until set or `milliseconds` pass (negative: until set); true when set.
    @discardableResult
    public func wait(milliseconds: Int64) -> Bool {
        var remaining = milliseconds
        let start = ClockReading.now().monotonic
        while !isSet {
            _ = Readiness.wait([descriptor], timeoutMilliseconds: remaining)
            if milliseconds >= 0 {
                remaining = milliseconds - (ClockReading.now().monotonic - start)
                if remaining <= 0 { break }
            }
        }
        return isSet
    }
}
