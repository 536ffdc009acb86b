import CurfewCore
import CurfewLinux
import Foundation

/// The agent's socket speaks one JSON object per line: `{"command": "status", "user": "kid"}` in,
/// `{"ok": true, "status": {...}}` or `{"ok": false, "error": "not-permitted", "message": "..."}` out.
/// Root may ask about anyone; any other caller only about the account the kernel says they are.
/// `{"command": "request", "minutes": 30, "reason": "..."}` from a managed user records a request
/// for more time: `{"ok": true, "request": {"id": 4, ...}}`.
public enum SocketProtocol {
    public static func answer(request line: String, callerUID: UInt32, agent: Agent) -> JSONValue {
        let request: AgentRequest
        switch AgentRequest.parse(line) {
        case .success(let parsed): request = parsed
        case .failure(let error): return error.reply
        }
        let caller = Accounts.account(uid: callerUID)
        switch request {
        case .status(let asked):
            guard let user = asked ?? caller?.name else {
                return failure(.badRequest, "no user given and the caller has no account name")
            }
            if callerUID != 0 && caller?.name != user {
                return failure(.notPermitted, "you may only see your own status")
            }
            guard let status = agent.status(of: user, now: agent.clock.wallSeconds) else {
                return failure(.unknownUser, "\(user) is not managed on this computer")
            }
            return .object(JSONObject([("ok", .bool(true)), ("status", status.json)]))
        case .checkLogin(let user, let service):
            // PAM's account stack runs as root for logins, sudo and su; a screen locker's runs as the
            // user. Anyone may learn that a user is not managed (they are let in); only root may probe
            // another managed account.
            if callerUID != 0 && caller?.name != user && agent.state.policies[user] != nil {
                return failure(.notPermitted, "only root may check another user's login")
            }
            // A child may ask about themself as often as they like: only root's checks (real logins)
            // leave an event, so asking cannot fill the audit log.
            let verdict = agent.checkLogin(
                user: user, service: service ?? "unknown", now: agent.clock.wallSeconds, recordRefusal: callerUID == 0)
            return .object(
                JSONObject([("ok", .bool(true)), ("allowed", .bool(verdict.allowed)), ("message", .string(verdict.message))]))
        case .request(let minutes, let reason):
            return answerTimeRequest(minutes: minutes, reason: reason, callerUID: callerUID, agent: agent)
        case .extend:
            return answerExtend(callerUID: callerUID, agent: agent)
        }
    }

    /// Sent to a caller turned away at connect: their account (or everyone) has too many connections open.
    static let busy = failure(.busy, "too many connections to the agent are open; try again in a moment")

    static func failure(_ code: AgentRefusal, _ message: String) -> JSONValue { AgentError(code, message).reply }
}
