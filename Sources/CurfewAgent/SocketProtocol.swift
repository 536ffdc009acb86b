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
        guard let request = try? JSONValue.parse(line), case .object(let object) = request,
            case .string(let command)? = object["command"]
        else { return failure("bad-request", "the request must be a JSON object with a command") }
        let caller = Accounts.account(uid: callerUID)
        switch command {
        case "status":
            var user: String
            if case .string(let asked)? = object["user"] {
                user = asked
            } else if let caller {
                user = caller.name
            } else {
                return failure("bad-request", "no user given and the caller has no account name")
            }
            if callerUID != 0 && caller?.name != user {
                return failure("not-permitted", "you may only see your own status")
            }
            guard let status = agent.status(of: user, now: Int64(Date().timeIntervalSince1970)) else {
                return failure("unknown-user", "\(user) is not managed on this computer")
            }
            return .object(JSONObject([("ok", .bool(true)), ("status", status.json)]))
        case "check-login":
            guard case .string(let user)? = object["user"] else { return failure("bad-request", "check-login needs a user") }
            // PAM's account stack runs as root for logins, sudo and su; a screen locker's runs as the
            // user. Anyone may learn that a user is not managed (they are let in); only root may probe
            // another managed account.
            if callerUID != 0 && caller?.name != user && agent.state.policies[user] != nil {
                return failure("not-permitted", "only root may check another user's login")
            }
            var service = "unknown"
            if case .string(let name)? = object["service"] { service = name }
            // A child may ask about themself as often as they like: only root's checks (real logins)
            // leave an event, so asking cannot fill the audit log.
            let verdict = agent.checkLogin(
                user: user, service: service, now: Int64(Date().timeIntervalSince1970), recordRefusal: callerUID == 0)
            return .object(
                JSONObject([("ok", .bool(true)), ("allowed", .bool(verdict.allowed)), ("message", .string(verdict.message))]))
        case "request":
            return answerTimeRequest(object, callerUID: callerUID, agent: agent)
        default:
            return failure("bad-request", "unknown command \(quoted(command))")
        }
    }

    /// Sent to a caller turned away at connect: their account (or everyone) has too many connections open.
    static let busy = failure("busy", "too many connections to the agent are open; try again in a moment")

    static func failure(_ code: String, _ message: String) -> JSONValue {
        .object(JSONObject([("ok", .bool(false)), ("error", .string(code)), ("message", .string(message))]))
    }
}
