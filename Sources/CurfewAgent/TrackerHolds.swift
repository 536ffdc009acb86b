import CurfewCore
import CurfewLinux
import Foundation
import Logging

/// Counting and stopping that hold against what a child controls: idle and locked hints weighed
/// against busy apps, and the lockout sweeps that leave nothing but always-allowed apps running.
extension Tracker {
    /// Whether a session of `uid` that claims to be idle or locked goes on counting because an app
    /// that is not always allowed is busy (`CPUWindow`). logind lets a session's owner set both hints
    /// on their own session (`SetIdleHint`, `SetLockedHint`), so they are claims, not facts. Records
    /// `idle-claim-ignored` once per claim. Returns the session whose claim is not believed (the
    /// enforcer does not take its lock for a lock either), or nil when nothing is claimed or nothing busy.
    func weighClaims(of sessions: [LoginSession], user: String, uid: UInt32, policy: Policy) -> String? {
        guard
            let claim = sessions.first(where: {
                $0.uid == uid && $0.sessionClass == .user && $0.active && ($0.idleHint || $0.lockedHint)
            })
        else { return nil }
        guard let busy = busyApp(uid: uid, policy: policy) else { return nil }
        let kind = claim.lockedHint ? "locked" : "idle"
        if ignoredClaims[claim.id] != kind {
            ignoredClaims[claim.id] = kind
            let app = busy
            logger.notice("idle or locked claim ignored: an app is busy", metadata: ["user": "\(user)", "session": "\(claim.id)", "claim": "\(kind)", "app": "\(app)"])
            pendingEvents.append(
                AgentEvent(
                    time: last.wall, user: user, kind: .idleClaimIgnored,
                    message: "session \(claim.id) of \(user) said it was \(kind) while \(app) was busy; time goes on counting",
                    details: EventDetails.IdleClaimIgnored(session: claim.id, claim: kind, app: app)))
        }
        return claim.id
    }

    /// The first app of `uid` (not session plumbing, not always allowed) that used at least 2 % of a
    /// CPU over the last 5 s, reading the CPU time of each of its processes (one `/proc/PID/stat` each,
    /// only while a claim stands).
    func busyApp(uid: UInt32, policy: Policy) -> String? {
        let monotonic = clock().monotonic
        var found: String? = nil
        for process in watch.sampler.cached.values where watch.ownerUID(process.uid) == uid {
            let names = names(of: process)
            if Accounting.sessionPlumbing.contains(names.app) || Accounting.sessionPlumbing.contains(names.counted)
                || policy.rule(for: names.app) == .allow || policy.rule(for: names.counted) == .allow
            {
                continue
            }
            let ref = ProcessRef(pid: process.pid, startTime: process.startTime)
            guard let cpu = watch.sampler.cpuMilliseconds(of: ref) else {
                cpuWindows[ref] = nil
                continue
            }
            cpuWindows[ref, default: CPUWindow()].add(at: monotonic, cpuMilliseconds: cpu)
            if found == nil && cpuWindows[ref]?.isBusy == true { found = names.counted }
        }
        return found
    }

    /// Forgets the claims that ended (the hints are false again, or the session is gone) and, when
    /// no session claims anything, every CPU reading.
    func forgetSettledClaims(sessions: [LoginSession]?) {
        let claiming = Set((sessions ?? []).filter { $0.idleHint || $0.lockedHint }.map(\.id))
        ignoredClaims = ignoredClaims.filter { claiming.contains($0.key) }
        if claiming.isEmpty {
            if !cpuWindows.isEmpty { cpuWindows = [:] }
        } else if cpuWindows.count > 4096 {
            let cached = watch.sampler.cached
            cpuWindows = cpuWindows.filter { cached[$0.key.pid]?.startTime == $0.key.startTime }
        }
    }
}

extension AppEnforcement {
    /// What a `logout` or `lock` lockout stops besides the plan's apps.
    enum LockoutSweep: Equatable {
        case none
        /// Every process but always-allowed apps: without logind (no session to end or lock), or
        /// under `logout` once the user has no session left (lingering and user services).
        case allButAllowed
        /// While an always-allowed app runs, its session is neither ended nor locked: every other app
        /// stops (the session's plumbing stays), and the lockout completes when the last allowed app exits.
        case allButAllowedAndPlumbing

        func stops(_ app: String, policy: Policy) -> Bool {
            switch self {
            case .none: false
            case .allButAllowed: policy.rule(for: app) != .allow
            case .allButAllowedAndPlumbing: policy.rule(for: app) != .allow && !Accounting.sessionPlumbing.contains(app)
            }
        }
    }

    func lockoutSweep(plan: EnforcementPlan, policy: Policy, uid: UInt32, running: Set<String>) -> LockoutSweep {
        guard plan.sessionAction != .none else { return .none }
        guard let sessions = state.sessions else { return .allButAllowed }
        if plan.sessionAction == .logout && !sessions.contains(where: { $0.uid == uid }) { return .allButAllowed }
        if running.contains(where: { policy.rule(for: $0) == .allow }) { return .allButAllowedAndPlumbing }
        return .none
    }
}
