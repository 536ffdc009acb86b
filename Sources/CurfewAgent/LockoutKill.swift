import CurfewCore
import CurfewLinux
import Glibc
import Logging

/// How apps and a lockout's leftovers are stopped: which stop has a grace, and the kill of every
/// process of a child at once, as the child, that nothing forking can outrun.
///
/// The grace (`--stop-grace`, SIGTERM then SIGKILL) is only for the work open when a lockout begins:
/// processes stopped within the grace after a child's lockout began get SIGTERM and the rest of it.
/// Everything else is killed at once: a blocked app and an app over its own limit (the child was not
/// allowed to start it, or was warned before its limit), and anything still running or started once
/// the grace after the lockout's beginning is over (a relaunch, a process that ignored SIGTERM).
extension AppEnforcement {
    /// The grace of one stop: none for a blocked app or an app over its limit; for a lockout, what is
    /// left of the grace after the child's lockout began (`lockoutSince`).
    func grace(for reason: StopReason, uid: UInt32, monotonic: Int64) -> Int64 {
        switch reason {
        case .blocked, .appLimit: 0
        case .lockout: max(0, (lockoutSince[uid] ?? monotonic) + stopper.graceMilliseconds - monotonic)
        }
    }

    /// Notes, for each user, when their lockout began (the first pass that found use not allowed);
    /// forgets the users allowed again.
    func noteLockouts(_ lockedOut: Set<UInt32>, monotonic: Int64) {
        for uid in lockedOut where lockoutSince[uid] == nil { lockoutSince[uid] = monotonic }
        lockoutSince = lockoutSince.filter { lockedOut.contains($0.key) }
    }

    /// The least time between two kills of every process of one user: a process that takes a while to
    /// die (in an uninterruptible sleep) must not make each pass start a helper.
    static let userKillMilliseconds: Int64 = 250

    /// A sweep's grace is over: every process of the child but those `spared` (always-allowed apps) is
    /// killed at once. With nothing to spare, one helper running as the child sends SIGKILL to all of
    /// their processes (`UserProcesses.signalEvery`); otherwise the helper freezes them all with
    /// SIGSTOP, the processes of the child are read again (none can fork while stopped), every one that
    /// is not spared gets SIGKILL and the spared ones SIGCONT. Processes of the child's subordinate
    /// uids outside their user namespaces, which the helper cannot reach, are killed through pidfds by
    /// the caller. Whether the helper ran.
    func killEveryProcess(
        of account: Accounts.Account, user: String, sparing spared: (TrackedProcess) -> Bool, mine: [TrackedProcess],
        monotonic: Int64
    ) -> Bool {
        guard monotonic - (lastUserKill[account.uid] ?? .min / 2) >= Self.userKillMilliseconds else { return false }
        lastUserKill[account.uid] = monotonic
        let sampler = watch.sampler
        do {
            guard mine.contains(where: spared) else {
                try UserProcesses.signalEvery(uid: account.uid, gid: account.gid, signal: SIGKILL)
                return true
            }
            do {
                try UserProcesses.signalEvery(uid: account.uid, gid: account.gid, signal: SIGSTOP)
            } catch {
                // The helper may have stopped them nonetheless: what is spared must go on.
                logger.error("cannot freeze every process of a user as the user", metadata: ["user": "\(user)", "error": "\(error)"])
            }
            _ = sampler.sample()
            var kill: [ProcessRef] = []
            var keep: [ProcessRef] = []
            for process in sampler.cached.values where watch.ownerUID(process.uid) == account.uid {
                guard let current = sampler.refreshIfExecutableChanged(pid: process.pid) else { continue }
                if spared(current) { keep.append(ProcessRef(current)) } else { kill.append(ProcessRef(current)) }
            }
            _ = stopper.stop(kill, nowMonotonic: monotonic, grace: 0)
            stopper.send(SIGCONT, to: keep)
            return true
        } catch {
            logger.error("cannot kill every process of a user as the user", metadata: ["user": "\(user)", "error": "\(error)"])
            return false
        }
    }
}
