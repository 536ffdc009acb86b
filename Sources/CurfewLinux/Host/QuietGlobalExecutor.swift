import CLinux
import CSwiftRuntime
import CurfewPOSIX
import Glibc

/// Swift concurrency's global executor for the agent: a few threads of its own that sleep on a
/// condition variable until a job is enqueued or a delayed job is due, and never otherwise.
///
/// Why: on Linux the default global executor is libdispatch's, whose workqueue arms a timer on its
/// manager thread (`_dispatch_workq_monitor_pools`, once a second, forever) as soon as the first job
/// runs on a global queue. That alone is one wake-up a second of an agent that has nothing to do
/// (docs/performance.md: less than one on average). The hooks this installs (`swift_task_enqueueGlobal_hook` and
/// the two delayed variants) are the Swift runtime's own, the ones SwiftNIO takes over the global
/// executor with; the main actor, actors and `DispatchQueue`s are untouched.
///
/// Jobs run on the generic executor (as libdispatch's global executor runs them), first in first out;
/// delayed jobs (`Task.sleep`) wait in a min-heap by deadline on CLOCK_MONOTONIC. Priorities are not
/// reordered: the agent's tasks are few and short, and its blocking loops have threads of their own.
public final class QuietGlobalExecutor: @unchecked Sendable {
    public static let shared = QuietGlobalExecutor(threads: QuietGlobalExecutor.defaultThreadCount)

    /// As many threads as cores, at least 4: a job that blocks briefly (a SQLite write, a D-Bus call)
    /// does not hold up the others, and a thread that waits costs nothing.
    public static var defaultThreadCount: Int { max(4, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    private struct Delayed {
        var deadline: Int64
        var sequence: UInt64
        var job: UnsafeMutableRawPointer
        func precedes(_ other: Delayed) -> Bool {
            deadline != other.deadline ? deadline < other.deadline : sequence < other.sequence
        }
    }

    private let lock: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var ready: [UnsafeMutableRawPointer] = []
    private var readyHead = 0
    private var delayed: [Delayed] = []
    private var sequence: UInt64 = 0
    private var timerWaiter = false
    private let threadCount: Int
    private var started = false
    private var running = 0

    init(threads: Int) {
        threadCount = threads
        lock = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(lock, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    /// Makes this the global executor of the process. Call it first thing, before any task is created
    /// (a job already handed to libdispatch would start its monitor). Idempotent. Returns false, and
    /// leaves libdispatch's executor in place, when no thread could be started.
    @discardableResult
    public static func install() -> Bool {
        guard shared.startThreads() > 0 else { return false }
        let enqueue: @convention(thin) (UnsafeMutableRawPointer, UnsafeRawPointer?) -> Void = { job, _ in
            QuietGlobalExecutor.shared.enqueue(job)
        }
        let enqueueWithDelay: @convention(thin) (UInt64, UnsafeMutableRawPointer, UnsafeRawPointer?) -> Void = {
            nanoseconds, job, _ in
            QuietGlobalExecutor.shared.enqueue(job, delay: nanoseconds > UInt64(Int64.max) ? Int64.max : Int64(nanoseconds))
        }
        let enqueueWithDeadline:
            @convention(thin) (Int64, Int64, Int64, Int64, Int32, UnsafeMutableRawPointer, UnsafeRawPointer?) -> Void = {
                seconds, nanoseconds, _, _, clock, job, _ in
                // The deadline is on the task's clock (continuous or suspending); the wait is on
                // CLOCK_MONOTONIC: convert through the time left.
                let now = curfew_swift_clock_nanoseconds(clock)
                let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
                let deadline = overflow ? Int64.max : scaled.addingReportingOverflow(nanoseconds).partialValue
                QuietGlobalExecutor.shared.enqueue(job, delay: max(0, deadline &- now))
            }
        curfew_set_global_executor_hooks(
            unsafeBitCast(enqueue, to: UnsafeMutableRawPointer.self),
            unsafeBitCast(enqueueWithDelay, to: UnsafeMutableRawPointer.self),
            unsafeBitCast(enqueueWithDeadline, to: UnsafeMutableRawPointer.self))
        return true
    }

    /// Whether this process's global executor is this one (for the agent's log).
    public static var isInstalled: Bool { curfew_global_executor_hooked() != 0 }

    func enqueue(_ job: UnsafeMutableRawPointer) {
        pthread_mutex_lock(lock)
        ready.append(job)
        pthread_mutex_unlock(lock)
        pthread_cond_signal(condition)
    }

    func enqueue(_ job: UnsafeMutableRawPointer, delay nanoseconds: Int64) {
        if nanoseconds <= 0 { return enqueue(job) }
        let now = Self.monotonicNanoseconds()
        let deadline = now.addingReportingOverflow(nanoseconds).overflow ? Int64.max : now + nanoseconds
        pthread_mutex_lock(lock)
        sequence &+= 1
        let earliest = delayed.first.map { deadline < $0.deadline } ?? true
        push(Delayed(deadline: deadline, sequence: sequence, job: job))
        pthread_mutex_unlock(lock)
        // A new earliest deadline: the thread waiting for the old one (or a sleeping one) re-arms.
        if earliest { pthread_cond_broadcast(condition) }
    }

    /// Starts the threads once; how many run.
    private func startThreads() -> Int {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        guard !started else { return running }
        started = true
        for _ in 0..<threadCount {
            if (try? POSIXThread.detach({ self.work() })) != nil { running += 1 }
        }
        return running
    }

    private func work() -> Never {
        pthread_mutex_lock(lock)
        while true {
            if !delayed.isEmpty {
                let now = Self.monotonicNanoseconds()
                while let first = delayed.first, first.deadline <= now { ready.append(popFirst().job) }
            }
            if readyHead < ready.count {
                let job = ready[readyHead]
                readyHead += 1
                if readyHead == ready.count {
                    ready.removeAll(keepingCapacity: ready.capacity <= 256)
                    readyHead = 0
                } else {
                    pthread_cond_signal(condition)  // more ready: another thread takes the next one
                }
                pthread_mutex_unlock(lock)
                curfew_run_job_on_generic_executor(job)
                pthread_mutex_lock(lock)
            } else if let first = delayed.first, !timerWaiter {
                // One thread waits for the earliest deadline; the others sleep until signalled.
                timerWaiter = true
                var until = timespec(tv_sec: Int(first.deadline / 1_000_000_000), tv_nsec: Int(first.deadline % 1_000_000_000))
                _ = pthread_cond_timedwait(condition, lock, &until)
                timerWaiter = false
            } else {
                pthread_cond_wait(condition, lock)
            }
        }
    }

    // A binary min-heap over `delayed`, under the lock.
    private func push(_ element: Delayed) {
        delayed.append(element)
        var child = delayed.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard delayed[child].precedes(delayed[parent]) else { break }
            delayed.swapAt(child, parent)
            child = parent
        }
    }

    private func popFirst() -> Delayed {
        let first = delayed[0]
        let last = delayed.removeLast()
        guard !delayed.isEmpty else { return first }
        delayed[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < delayed.count, delayed[left].precedes(delayed[smallest]) { smallest = left }
            if right < delayed.count, delayed[right].precedes(delayed[smallest]) { smallest = right }
            if smallest == parent { break }
            delayed.swapAt(parent, smallest)
            parent = smallest
        }
        return first
    }

    private static func monotonicNanoseconds() -> Int64 { ClockReading.nanoseconds(CLOCK_MONOTONIC) }
}
