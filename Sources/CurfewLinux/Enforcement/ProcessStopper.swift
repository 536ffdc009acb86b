import Glibc
import CLinux
import SystemPackage

/// Stops processes the way docs/design.md's enforcement asks: SIGTERM at once and SIGKILL after a grace
/// if they are still there, or SIGKILL at once when the stop has no grace (a blocked app, an app over
/// its limit), every signal through a pidfd taken when the stop began, so a PID reused in the meantime
/// is never hit.
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
    /// `grace` (`graceMilliseconds` when nil) after `nowMonotonic`. With a grace of 0 or less the
    /// target gets SIGKILL at once, and no SIGTERM; a target already being stopped whose SIGKILL is
    /// not sent yet gets it now. Targets that are gone, are zombies, or whose PID now belongs to a
    /// process with another start time are skipped, as are ones the kernel refuses to signal. Returns
    /// the refs signalled now, in the order given.
    public func stop(_ targets: [ProcessRef], nowMonotonic: Int64, grace: Int64? = nil) -> [ProcessRef] {
        let grace = grace ?? graceMilliseconds
        let signal = grace > 0 ? SIGTERM : SIGKILL
        var signalled: [ProcessRef] = []
        for ref in targets {
            if refs.contains(ref) {
                // Being stopped with a grace: no grace any more.
                guard grace <= 0, let index = stopping.firstIndex(where: { $0.handle.ref == ref }), !stopping[index].killed
                else { continue }
                stopping[index].killed = true
                if (try? stopping[index].handle.signal(SIGKILL)) == true { signalled.append(ref) }
                continue
            }
            guard let handle = try? ProcessHandle.open(ref, procRoot: procRoot), !handle.hasExited,
                (try? handle.signal(signal)) == true
            else { continue }
            stopping.append(Stopping(handle: handle, deadline: nowMonotonic + grace, killed: grace <= 0))
            refs.insert(ref)
            signalled.append(ref)
        }
        return signalled
    }

    /// Sends `signal` through a pidfd to each of `targets` (SIGCONT to a process a freeze stopped, say),
    /// skipping the ones gone or reused; how many were signalled.
    @discardableResult
    public func send(_ signal: Int32, to targets: [ProcessRef]) -> Int {
        var count = 0
        for ref in targets {
            guard let handle = try? ProcessHandle.open(ref, procRoot: procRoot), (try? handle.signal(signal)) == true else { continue }
            count += 1
        }
        return count
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

/// Every process of one user at once, signalled as that user: what ends a fork-hopper, whose
/// generations live shorter than any sample of /proc.
public enum UserProcesses {
    /// Sends `signal` to every process the user `uid` may signal, from a helper process that takes the
    /// user's uid and gid and calls kill(-1, `signal`) (`curfew_signal_every_process_as`): every process
    /// whose real or saved uid is `uid`, setuid programs the user started and every process in the user
    /// namespaces the user owns (their subordinate uids there) included, in one pass of the kernel's
    /// task list that a process forking meanwhile cannot slip out of. Never root's: uid 0 is refused.
    ///
    /// True when some process was signalled, false when the user had none; throws EPERM for uid 0, or
    /// what clone(2) or waitpid(2) say, or EIO when the helper could not take the user's ids.
    @discardableResult
    public static func signalEvery(uid: UInt32, gid: UInt32, signal: Int32) throws(LinuxError) -> Bool {
        guard uid != 0 else { throw LinuxError(operation: "signal every process of uid 0", errno: .notPermitted) }
        let helper = try LinuxError.check("clone a helper to signal uid \(uid)") { curfew_signal_every_process_as(uid, gid, signal) }
        var status: Int32 = 0
        do {
            _ = try LinuxError.check("waitpid \(helper)") { waitpid(helper, &status, 0) }
        } catch where error.errno == .noChildProcess {
            // Reaped by someone else: the signal went out all the same (or the user had nothing left).
            return true
        }
        // WIFEXITED and WEXITSTATUS, which Swift does not import.
        guard status & 0x7F == 0 else {
            throw LinuxError(operation: "signal every process of uid \(uid): helper died of signal \(status & 0x7F)", errno: .ioError)
        }
        switch (status >> 8) & 0xFF {
        case 0: return true
        case 3: return false
        case let code:
            throw LinuxError(operation: "signal every process of uid \(uid): helper exited \(code)", errno: .ioError)
        }
    }
}
