import CurfewLinux
import Dispatch
import Foundation
import Logging
import Synchronization

/// Sends children's desktop notifications from one worker thread, one `busctl` at a time, so that
/// nothing a child does (relaunching a blocked app hundreds of times, a session bus that never
/// answers) makes the agent start threads or processes without bound.
///
/// The queue coalesces: at most one notification per (user, kind) waits, and a newer one takes the
/// place of the one waiting (a child needs the latest "time is up", not four hundred of them). Each
/// send is cut off after `timeoutMilliseconds` (busctl is killed and reaped), and a user whose bus
/// did not answer in time (or refused) gets no desktop notification for `quietMilliseconds` (their
/// terminals still get every message), so one child's dead bus delays another child's notification
/// by at most one timeout.
final class DesktopNotifications: Sendable {
    struct Key: Hashable, Sendable {
        var uid: UInt32
        var kind: AgentState.ChildMessage.Kind
    }

    struct Job: Sendable {
        var user: String
        var uid: UInt32
        var gid: UInt32
        var busAddress: String
        var message: AgentState.ChildMessage
    }

    struct Queue: Sendable {
        /// Keys in the order their job was first queued; each key once.
        var order: [Key] = []
        var jobs: [Key: Job] = [:]
        var stopping = false
        /// uid -> monotonic ms until which desktop notifications are not tried (the bus timed out).
        var quietUntil: [UInt32: Int64] = [:]
        /// Sends tried (delivered or not), and notifications replaced or dropped while they waited.
        var tried = 0
        var coalesced = 0
    }

    /// More than any family has users times kinds; a bound in case of a bug, not a working limit.
    static let maxQueued = 64

    let queue = Mutex(Queue())
    let wake = DispatchSemaphore(value: 0)
    let logger: Logger
    let timeoutMilliseconds: Int
    let quietMilliseconds: Int64
    let send: @Sendable (Job, Int) -> Result<Void, LinuxError>

    init(
        logger: Logger, timeoutMilliseconds: Int = 2_000, quietMilliseconds: Int64 = 30_000,
        send: @escaping @Sendable (Job, Int) -> Result<Void, LinuxError> = DesktopNotifications.sendWithBusctl
    ) {
        self.logger = logger
        self.timeoutMilliseconds = timeoutMilliseconds
        self.quietMilliseconds = quietMilliseconds
        self.send = send
        let thread = Thread { [self] in work() }
        thread.name = "notifications"
        thread.start()
    }

    static func sendWithBusctl(_ job: Job, timeoutMilliseconds: Int) -> Result<Void, LinuxError> {
        DesktopNotifier.send(
            summary: job.message.summary, body: job.message.body, urgency: job.message.urgency, uid: job.uid, gid: job.gid,
            busAddress: job.busAddress, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// Queues a notification, in place of a waiting one of the same user and kind; never blocks.
    func enqueue(_ job: Job) {
        let key = Key(uid: job.uid, kind: job.message.kind)
        let queued = queue.withLock { queue -> Bool in
            guard !queue.stopping else { return false }
            if queue.jobs[key] != nil {
                queue.jobs[key] = job
                queue.coalesced += 1
                return false
            }
            if queue.order.count >= Self.maxQueued {
                let oldest = queue.order.removeFirst()
                queue.jobs[oldest] = nil
                queue.coalesced += 1
                queue.order.append(key)
                queue.jobs[key] = job
                return false  // the dropped job's wake-up serves this one
            }
            queue.order.append(key)
            queue.jobs[key] = job
            return true
        }
        if queued { wake.signal() }
    }

    /// Lets the worker finish the send under way, drops what waits, and ends the thread.
    func stop() {
        queue.withLock { $0.stopping = true }
        wake.signal()
    }

    /// Sends tried, notifications coalesced or dropped, and notifications waiting, so far.
    struct Counts {
        var tried: Int
        var coalesced: Int
        var waiting: Int
    }

    var counts: Counts {
        queue.withLock { Counts(tried: $0.tried, coalesced: $0.coalesced, waiting: $0.order.count) }
    }

    private func work() {
        while true {
            wake.wait()
            let now = ClockReading.now().monotonic
            let next = queue.withLock { queue -> (job: Job, quiet: Bool)?? in
                if queue.stopping { return .some(nil) }
                guard !queue.order.isEmpty else { return nil }
                let key = queue.order.removeFirst()
                guard let job = queue.jobs.removeValue(forKey: key) else { return nil }
                return (job, (queue.quietUntil[key.uid] ?? .min) > now)
            }
            guard let next else { continue }
            guard let (job, quiet) = next else { return }
            if quiet { continue }
            let result = send(job, timeoutMilliseconds)
            queue.withLock { $0.tried += 1 }
            if case .failure(let error) = result {
                // A bus that did not answer or refused will not do better at once: one try (and one
                // log line) per user and quiet period, whatever the child triggers meanwhile.
                let until = ClockReading.now().monotonic + quietMilliseconds
                queue.withLock { $0.quietUntil[job.uid] = until }
                logger.info(
                    "desktop notification not delivered; not trying again for a while",
                    metadata: ["user": "\(job.user)", "error": "\(error)", "quiet.ms": "\(quietMilliseconds)"])
            }
        }
    }
}
