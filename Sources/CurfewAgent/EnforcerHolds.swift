import CurfewCore
import CurfewLinux
import CurfewStore
import Foundation
import Logging

/// What the enforcer keeps for lockouts that hold: linger turned off, the leftovers of a logout, and
/// the belt on each session scope.
struct HoldsState {
    /// The belt of one session scope: whose session it is, and the monotonic deadline (ms) systemd
    /// was last given (nil: none).
    struct Belt {
        var uid: UInt32
        var deadline: Int64?
    }

    /// uid -> when TerminateUser was last asked in the current `logout` lockout (monotonic ms).
    var userTerminatedAt: [UInt32: Int64] = [:]
    /// Users whose linger a lockout turned off, to turn on again when they are allowed again
    /// (also in the store, `AgentStateKeys.lingerRestore`); nil until read from the store.
    var lingerRestore: Set<String>? = nil
    /// Session scope -> its belt.
    var belts: [String: Belt] = [:]
    /// The connection to systemd's manager, and when to try again after a failure.
    var units: SystemdUnits? = nil
    var unitsRetryAt: Int64 = 0
    /// Whether the belt applies: logind and systemd on the system bus (not a test's private bus).
    var beltEnabled: Bool? = nil
    /// Whether the drop-ins of sessions gone before this agent started were removed.
    var dropInsSwept = false
}

extension Enforcer {
    /// How often TerminateUser is asked again while processes of a logged-out child are left.
    static let terminateUserRepeatMilliseconds: Int64 = 5_000

    /// Under a `logout` lockout once the child has no session left: TerminateUser (their service manager
    /// and everything it runs, lingering services included), again every 5 s while apps are left; the
    /// tracker stops whatever remains but always-allowed apps (`AppEnforcement.LockoutSweep`).
    func endLeftovers(user: String, uid: UInt32, live: AgentState.LiveUser?, monotonic: Int64, now: Instant) {
        let last = holds.userTerminatedAt[uid]
        let left = !(live?.running.isEmpty ?? true)
        guard last == nil || (left && monotonic - last! >= Self.terminateUserRepeatMilliseconds) else {
            if left { wake(within: Self.terminateUserRepeatMilliseconds) }
            return
        }
        holds.userTerminatedAt[uid] = monotonic
        call("TerminateUser", user: user) { try $0.terminateUser(uid) }
        if last == nil {
            agent.recordEvent(
                AgentEvent(
                    time: now, user: user, kind: .userKilled,
                    message: "\(user) has no session left; \(user)'s services and remaining processes were ended"))
        }
        if left { wake(within: Self.terminateUserRepeatMilliseconds) }
    }

    /// Linger stays off for a child under a `logout` lockout (it would start their services again
    /// with no session), and is turned on again once they are allowed, if it was on. Only on the
    /// system's logind.
    func holdLinger(user: String, uid: UInt32, lockedOut: Bool, now: Instant) {
        guard agent.configuration.logindBusAddress == nil, agent.state.sessions != nil else { return }
        if holds.lingerRestore == nil {
            let stored = (try? agent.store.read { try AgentStateTable.all(AgentStateKeys.lingerRestore, $0) }) ?? [:]
            // Keyed by the rest of the key: the user's name.
            holds.lingerRestore = Set(stored.keys)
        }
        let restore = holds.lingerRestore ?? []
        if lockedOut {
            guard LogindClient.lingers(userName: user) else { return }
            if !restore.contains(user) {
                do {
                    // Remembered before it is turned off: a crash in between must not forget it was on.
                    try agent.store.write { try AgentStateTable.set(AgentStateKeys.lingerRestore(user), true, $0) }
                    holds.lingerRestore?.insert(user)
                } catch {
                    logger.error("cannot remember that linger was on; leaving it on", metadata: ["user": "\(user)", "error": "\(error)"])
                    return
                }
            }
            call("SetUserLinger", user: user) { try $0.setUserLinger(uid, enabled: false) }
            logger.notice("linger turned off while locked out", metadata: ["user": "\(user)"])
        } else if restore.contains(user) {
            var done = false
            call("SetUserLinger", user: user) {
                try $0.setUserLinger(uid, enabled: true)
                done = true
            }
            guard done else { return }
            holds.lingerRestore?.remove(user)
            try? agent.store.write { try AgentStateTable.remove(AgentStateKeys.lingerRestore(user), $0) }
            logger.notice("linger turned on again", metadata: ["user": "\(user)"])
        }
    }

    /// The belt: each session scope of the child gets `RuntimeMaxSec` = its age + the time left + the
    /// grace (`SessionBelt`), so systemd ends it at zero even if the agent is stopped, crashed or hangs;
    /// rewritten when the deadline moves (a grant, a policy, a new day, time that did not count).
    func holdBelt(
        user: String, uid: UInt32, sessions: [LoginSession], plan: EnforcementPlan, onlyAllowedApps: Bool, monotonic: Int64
    ) {
        guard beltEnabled, !sessions.isEmpty else { return }
        let grace = agent.configuration.beltGraceMilliseconds
        let wanted = SessionBelt.deadline(plan: plan, onlyAllowedApps: onlyAllowedApps, now: monotonic, graceMilliseconds: grace)
        for session in sessions {
            guard let unit = SystemdUnits.sessionScope(sessionID: session.id) else { continue }
            var current: Int64?? = holds.belts[unit].map { $0.deadline }
            // A scope never capped (systemd's default is no cap) needs no call to stay uncapped.
            if current == nil && wanted == nil && !SystemdUnits.hasDropIn(unit: unit) { current = .some(nil) }
            guard SessionBelt.needsUpdate(current: current, wanted: wanted, graceMilliseconds: grace) else { continue }
            if setBelt(unit: unit, deadline: wanted, user: user) { holds.belts[unit] = HoldsState.Belt(uid: uid, deadline: wanted) }
        }
    }

    /// Scopes of sessions that ended are forgotten (with their drop-ins); those of a child no longer
    /// managed lose their cap.
    func forgetBelts(sessions: [LoginSession]?, managedUIDs: Set<UInt32>) {
        guard beltEnabled, let sessions else { return }
        let live = Set(sessions.compactMap { SystemdUnits.sessionScope(sessionID: $0.id) })
        var ended = !holds.dropInsSwept
        for (unit, belt) in holds.belts {
            if !live.contains(unit) {
                holds.belts[unit] = nil
                ended = true
            } else if !managedUIDs.contains(belt.uid) && belt.deadline != nil {
                if setBelt(unit: unit, deadline: nil, user: String(belt.uid)) { holds.belts[unit] = nil }
            }
        }
        // The drop-ins of sessions that ended (and, once, those a previous agent left) go.
        if ended, let units = holds.units, units.usesDropIns {
            units.removeDropIns(exceptFor: live)
            holds.dropInsSwept = true
        }
    }

    var beltEnabled: Bool {
        if let enabled = holds.beltEnabled { return enabled }
        let enabled = agent.configuration.logindBusAddress == nil && agent.state.sessions != nil && LogindClient.isAvailable()
        holds.beltEnabled = enabled
        return enabled
    }

    /// Gives systemd the deadline (monotonic ms; nil: none) for `unit`; false when that failed.
    func setBelt(unit: String, deadline: Int64?, user: String) -> Bool {
        let now = ClockReading.now().monotonic
        do {
            if holds.units == nil {
                guard now >= holds.unitsRetryAt else { return false }
                holds.units = try SystemdUnits()
            }
            guard let units = holds.units else { return false }
            var runtimeMax: UInt64? = nil
            if let deadline {
                guard let since = try units.activeSinceMonotonicMicroseconds(unit: unit) else { return false }
                runtimeMax = UInt64(max(1_000_000, deadline * 1000 - Int64(since)))
            }
            try units.setRuntimeMax(unit: unit, microseconds: runtimeMax)
            logger.info(
                "session belt", metadata: ["user": "\(user)", "unit": "\(unit)", "runtimeMax.s": "\(runtimeMax.map { "\($0 / 1_000_000)" } ?? "infinity")"])
            return true
        } catch {
            logger.error("cannot set the session's RuntimeMaxSec", metadata: ["unit": "\(unit)", "user": "\(user)", "error": "\(error)"])
            holds.units = nil
            holds.unitsRetryAt = now + 30_000
            return false
        }
    }
}
