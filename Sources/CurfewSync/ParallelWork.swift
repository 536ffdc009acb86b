#if canImport(Glibc)
    import Glibc
#endif

/// Runs `body(worker)` for `workers` workers at once, on threads of its own, and returns when all are
/// done (the calling thread is worker 0).
///
/// Not `DispatchQueue.concurrentPerform`: its workers come from libdispatch's global queues, whose
/// first use arms a timer that wakes the process once a second for as long as it lives (the agent
/// must stay asleep while nothing happens, issue 13).
enum ParallelWork {
    static func run(workers: Int, _ body: @escaping @Sendable (Int) -> Void) {
        guard workers > 1 else {
            if workers == 1 { body(0) }
            return
        }
        final class Work: @unchecked Sendable {
            let body: @Sendable (Int) -> Void
            let worker: Int
            init(body: @escaping @Sendable (Int) -> Void, worker: Int) {
                self.body = body
                self.worker = worker
            }
        }
        var threads: [pthread_t] = []
        var inline: [Int] = [0]
        for worker in 1..<workers {
            let work = Unmanaged.passRetained(Work(body: body, worker: worker))
            var thread = pthread_t()
            let status = pthread_create(&thread, nil, { context in
                let work = Unmanaged<Work>.fromOpaque(context!).takeRetainedValue()
                work.body(work.worker)
                return nil
            }, work.toOpaque())
            if status == 0 {
                threads.append(thread)
            } else {
                // No thread (the process is at its limit): this thread does that share too.
                work.release()
                inline.append(worker)
            }
        }
        for worker in inline { body(worker) }
        for thread in threads { pthread_join(thread, nil) }
    }
}
