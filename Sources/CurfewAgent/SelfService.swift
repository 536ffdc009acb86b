import CurfewCore
import CurfewLinux
import CurfewStore
import Foundation
import Logging

/// Extra time a child takes without asking (`curfew extend`), bounded per week by the policy's
/// `selfExtension`. Each use is a request approved by the allowance as it is made (so parents see it
/// in `curfew requests --all`) and an event; the minutes count as extra time that day.
extension Agent {
    /// The minutes `user` took under their allowance per local day of the current week, from the
    /// database, into the state the schedules read.
    func loadSelfService(of user: String, policy: Policy, now: Instant) throws {
        let zone = Schedule.zone(for: policy)
        let monday = zone.start(of: zone.localTime(at: now).date.weekStart)
        let uses = try store.read { try RequestTable.selfService(user: user, since: monday, $0) }
        var minutes: [LocalDate: Int] = [:]
        for use in uses {
            minutes[zone.localTime(at: use.created).date, default: 0] += use.grantedMinutes ?? use.minutes
        }
        state.setSelfService(of: user, minutes)
    }

    /// The self-service extensions of every managed user this week (at start, and after a reload).
    public func loadSelfService(now: Instant) {
        for (user, policy) in state.policies where policy.selfExtension != nil {
            do { try loadSelfService(of: user, policy: policy, now: now) } catch {
                logger.error("cannot read self-service extra time", metadata: ["user": "\(user)", "error": "\(error)"])
            }
        }
    }

    /// Takes one self-service extension for `user` now, or says why not (a `PolicyError`; nothing is
    /// written). The week's count and the new row are one transaction.
    func takeSelfService(user: String, policy: Policy, now: Instant) throws -> SelfExtensionUse {
        guard let allowance = policy.selfExtension else {
            throw PolicyError("\(user) has no extra time to take without asking; ask a parent with curfew request")
        }
        let zone = Schedule.zone(for: policy)
        let today = zone.localTime(at: now).date
        let monday = zone.start(of: today.weekStart)
        let used = try store.write { db in
            let used = try RequestTable.selfService(user: user, since: monday, db).count
            try allowance.checkRoom(usedThisWeek: used)
            let row = try RequestTable.addSelfService(user: user, minutes: allowance.minutes, now: now, db)
            try EventLog.append(
                AgentEvent(
                    time: now, user: user, kind: .selfExtension,
                    message: "took \(TimeAllowance.format(minutes: allowance.minutes)) more without asking (\(used + 1) of \(allowance.perWeek) this week)",
                    details: EventDetails.SelfExtension(
                        request: row.id, minutes: allowance.minutes, date: "\(today)", used: used + 1, perWeek: allowance.perWeek)), db)
            return used + 1
        }
        try loadSelfService(of: user, policy: policy, now: now)
        let limit = state.schedule(of: user, systemZone: ZoneRules.system)?.limitMinutes(on: today)
        return SelfExtensionUse(minutes: allowance.minutes, date: "\(today)", used: used, perWeek: allowance.perWeek, limitMinutes: limit)
    }
}

extension SocketProtocol {
    /// `{"command": "extend"}` from a managed user (not root).
    static func answerExtend(callerUID: UInt32, agent: Agent) -> JSONValue {
        guard callerUID != 0 else {
            return failure(.notPermitted, "root cannot take extra time; grant it with curfew grant")
        }
        guard let caller = Accounts.account(uid: callerUID) else {
            return failure(.notPermitted, "your account has no name, so it cannot be managed")
        }
        guard let policy = agent.state.policies[caller.name] else {
            return failure(.notPermitted, "\(caller.name) is not managed on this computer; there is no limit to extend")
        }
        do {
            let use = try agent.takeSelfService(user: caller.name, policy: policy, now: agent.clock.wallSecond)
            return AgentReply(message: use.message, extended: use).json
        } catch let refusal as PolicyError {
            return failure(.notPermitted, refusal.message)
        } catch {
            agent.logger.error("cannot record self-service extra time", metadata: ["user": "\(caller.name)", "error": "\(error)"])
            return failure(.failed, "the agent could not record the extra time")
        }
    }
}
