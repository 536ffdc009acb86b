import CurfewPOSIX

/// Runs `body(worker)` for `workers` workers at once, on threads of its own, and returns when all are
/// done (the calling thread is worker 0).
///
/// Not `DispatchQueue.concurrentPerform`: its workers come from libdispatch's global queues, whose
/// first use arms a timer that wakes the process once a second for as long as it lives (the agent
/// must stay asleep while nothing happens).
enum ParallelWork {
    static func run(workers: Int, _ body: @escaping @Sendable (Int) -> Void) {
        guard workers > 1 else {
            if workers == 1 { body(0) }
            return
        }
        var threads: [POSIXThread] = []
        var inline: [Int] = [0]
        for worker in 1..<workers {
            if let thread = try? POSIXThread.start({ body(worker) }) {
                threads.append(thread)
            } else {
                // No thread (the process is at its limit): this thread does that share too.
                inline.append(worker)
            }
        }
        for worker in inline { body(worker) }
        for thread in threads { thread.join() }
    }
}
