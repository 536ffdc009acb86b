import CurfewCore
import CurfewLinux
import CurfewStore
import Foundation
import Logging

/// Children's requests for more time, and the parents' grants as the agent records them.
extension Agent {
    /// Records a managed user's request for more time and the event that says so, in one
    /// transaction, unless `RequestRules.checkRoom` refuses it (a `PolicyError`; nothing is written,
    /// so a child's flood of requests adds at most `RequestRules.maxPerHour` rows and events an hour).
    func fileRequest(
        user: String, minutes: Int, reason: String?, now: Instant, cause: UseBlock? = nil, app: String? = nil
    ) throws -> TimeRequest {
        // The enforcer looks for the parent's answer while a request is outstanding.
        defer { state.noteRequestFiled() }
        return try store.write { db in
            let (pending, recent) = try RequestTable.counts(user: user, since: now - .milliseconds(RequestRules.windowMilliseconds) + .milliseconds(1), db)
            try RequestRules.checkRoom(user: user, pending: pending, recent: recent)
            let request = try RequestTable.add(user: user, minutes: minutes, reason: reason, now: now, cause: cause, app: app, db)
            try EventLog.append(
                AgentEvent(
                    time: now, user: user, kind: .timeRequested,
                    message: "asked for \(TimeAllowance.format(minutes: minutes)) more"
                        + (app.map { " of \($0)" } ?? "") + (cause.map { " (blocked by \($0.words))" } ?? ""),
                    details: EventDetails.Request(request: request.id, minutes: minutes, reason: reason, cause: cause?.code, app: app)), db)
            return request
        }
    }
}

extension SocketProtocol {
    /// `{"command": "request", "minutes": 30, "reason": "..."}` from a managed user (not root).
    static func answerTimeRequest(minutes: Int64, reason: String?, app: String?, callerUID: UInt32, agent: Agent) -> JSONValue {
        guard callerUID != 0 else {
            return failure(.notPermitted, "root cannot ask for more time; grant it with curfew grant")
        }
        guard let caller = Accounts.account(uid: callerUID) else {
            return failure(.notPermitted, "your account has no name, so it cannot be managed")
        }
        guard let policy = agent.state.policies[caller.name] else {
            return failure(.notPermitted, "\(caller.name) is not managed on this computer; there is no limit to extend")
        }
        do { try RequestRules.validate(minutes: minutes, reason: reason) } catch {
            return failure(.badRequest, error.message)
        }
        if let app, agent.catalog.definition(named: app) == nil, policy.rule(for: app) == nil {
            return failure(.badRequest, "unknown app \(quoted(app)): not in the app catalog and \(caller.name)'s policy has no rule for it")
        }
        // What blocks the child now, from the decision the enforcer makes with the same figures.
        let now = agent.clock.wallInstant
        let cause = agent.state.schedule(of: caller.name, systemZone: ZoneRules.system).map { schedule in
            ExtraTime.block(
                schedule: schedule, now: now,
                usage: Enforcement.dayUsage(schedule: schedule, live: agent.state.live(of: caller.name), now: now), app: app)
        } ?? nil
        do {
            let request = try agent.fileRequest(
                user: caller.name, minutes: Int(minutes), reason: reason, now: now, cause: cause, app: app)
            return AgentReply(request: request.record).json
        } catch let refusal as PolicyError {
            // Not logged: a child asking again and again must not fill the journal either.
            return failure(.notPermitted, refusal.message)
        } catch {
            agent.logger.error("cannot record a request", metadata: ["user": "\(caller.name)", "error": "\(error)"])
            return failure(.failed, "the agent could not record the request")
        }
    }
}
