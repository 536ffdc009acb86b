import Glibc
import CLinux

/// Stops processes the way docs/design.md's enforcement asks: SIGTERM at once, SIGKILL after a grace if
/// they are still there, every signal through a pidfd taken when the stop began, so a PID reused in
/// the meantime is never hit.
///
/// Owned by one thread (not Sendable); the caller passes the monotonic clock in milliseconds
/// (`ClockReading.monotonic`) and calls `poll` regularly (each tick) to deliver the SIGKILLs.
public final class ProcessStopper {
    public let graceMilliseconds: Int64
    public let procRoot: String

    private struct Stopping {
        let handle: ProcessHandle
        let deadline: Int64
        var killed: Bool
    }

    /// In the order the stops began, so SIGKILLs go out in the order of the SIGTERMs.
    private var stopping: [Stopping] = []
    private var refs: Set<ProcessRef> = []

    public init(graceMilliseconds: Int64 = 2_000, procRoot: String = "/proc") {
        self.graceMilliseconds = graceMilliseconds
        self.procRoot = procRoot
    }

    /// Processes being stopped that have not been seen to exit yet.
    public var pending: Int { stopping.count }

    public func isStopping(_ ref: ProcessRef) -> Bool { refs.contains(ref) }

    /// Opens a pidfd for each target not already being stopped and sends it SIGTERM; its SIGKILL is due
    /// `graceMilliseconds` after `nowMonotonic`. Targets that are gone, are zombies, or whose PID now
    /// belongs to a process with another start time are skipped, as are ones the kernel refuses to
    /// signal. Returns the refs signalled now, in the order given.
    public func stop(_ targets: [ProcessRef], nowMonotonic: Int64) -> [ProcessRef] {
        var signalled: [ProcessRef] = []
        for ref in targets where !refs.contains(ref) {
            guard let handle = try? ProcessHandle.open(ref, procRoot: procRoot), !handle.hasExited,
                (try? handle.signal(SIGTERM)) == true
            else { continue }
            stopping.append(Stopping(handle: handle, deadline: nowMonotonic + graceMilliseconds, killed: false))
            refs.insert(ref)
            signalled.append(ref)
        }
        return signalled
    }

    /// Forgets the processes that have exited and sends SIGKILL to those past their deadline that have
    /// not; returns the refs SIGKILLed now. A process already SIGKILLed stays pending (and is not
    /// signalled again) until the kernel reports it gone, e.g. after an uninterruptible sleep.
    public func poll(nowMonotonic: Int64) -> [ProcessRef] {
        var killed: [ProcessRef] = []
        stopping.removeAll { entry in
            guard entry.handle.hasExited else { return false }
            refs.remove(entry.handle.ref)
            return true
        }
        for index in stopping.indices where !stopping[index].killed && nowMonotonic >= stopping[index].deadline {
            let handle = stopping[index].handle
            stopping[index].killed = true
            if (try? handle.signal(SIGKILL)) == true { killed.append(handle.ref) }
        }
        return killed
    }
}

/// A process and everything it started, from the parent PIDs of a sample.
public enum ProcessTree {
    /// `roots` and all their descendants in `processes` (by `parentPid`), each once, **roots first**,
    /// then breadth first (parents before their children). That is the order in which to stop them: a
    /// launcher that restarts its children gets its signal before it can see any of them die, and the
    /// children, orphaned when it exits, are already in the list (and held by pidfds once stopping).
    ///
    /// A root whose PID belongs to another start time in `processes` is returned without descendants
    /// (the sample is of a later process), and a child that started before its supposed parent is not
    /// followed (a stale parent PID); both only make the list shorter, never name another process.
    /// Processes started after `processes` was sampled are not included: stop again on the next sample.
    public static func withDescendants(of roots: [ProcessRef], in processes: [Int32: TrackedProcess]) -> [ProcessRef] {
        var children: [Int32: [TrackedProcess]] = [:]
        for process in processes.values where process.pid != process.parentPid {
            children[process.parentPid, default: []].append(process)
        }
        for key in children.keys { children[key]?.sort { $0.pid < $1.pid } }

        var result: [ProcessRef] = []
        var seen: Set<ProcessRef> = []
        var queue: [ProcessRef] = []
        for root in roots where seen.insert(root).inserted {
            result.append(root)
            if processes[root.pid]?.startTime == root.startTime { queue.append(root) }
        }
        var next = 0
        while next < queue.count {
            let parent = queue[next]
            next += 1
            for child in children[parent.pid] ?? [] where child.startTime >= parent.startTime {
                let ref = ProcessRef(child)
                guard seen.insert(ref).inserted else { continue }
                result.append(ref)
                queue.append(ref)
            }
        }
        return result
    }
}
