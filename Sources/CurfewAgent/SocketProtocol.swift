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
            guard let status = agent.status(of: user, now: agent.clock.wallSecond) else {
                return failure(.unknownUser, "\(user) is not managed on this computer")
            }
            return AgentReply(status: status.report).json
        case .checkLogin(let user, let service):
            // PAM's account stack runs as root for logins, sudo and su; a screen locker's runs as the
            // user. Anyone else asking about another account is refused alike, managed or not, so the
            // answer never tells a child who is managed; root is never managed, which everyone knows.
            if callerUID != 0 && caller?.name != user && !Accounts.isSuperuser(user) {
                return failure(.notPermitted, LoginVerdict.onlyRootChecksOthers)
            }
            // A child may ask about themself as often as they like: only root's checks (real logins)
            // leave an event, so asking cannot fill the audit log.
            let verdict = agent.checkLogin(
                user: user, service: service ?? "unknown", now: agent.clock.wallSecond, recordRefusal: callerUID == 0)
            return AgentReply(message: verdict.message, allowed: verdict.allowed).json
        case .request(let minutes, let reason, let app):
            return answerTimeRequest(minutes: minutes, reason: reason, app: app, callerUID: callerUID, agent: agent)
        case .extend:
            return answerExtend(callerUID: callerUID, agent: agent)
        case .approvePIN(let pin, let minutes):
            return answerApprovePIN(pin: pin, minutes: minutes, callerUID: callerUID, agent: agent)
        case .watch(let asked):
            // Only `respond` can keep a connection open; here a watch is its first view.
            return answerOwn(asked, callerUID: callerUID, caller: caller, agent: agent) { user in
                watchView(of: user, agent: agent).flatMap { try? JSONValue.parse($0.line) } ?? failure(.unknownUser, "\(user) is not managed on this computer")
            }
        case .rules(let asked):
            return answerOwn(asked, callerUID: callerUID, caller: caller, agent: agent) { answerRules(of: $0, agent: agent) }
        case .usage(let asked, let from, let to):
            return answerOwn(asked, callerUID: callerUID, caller: caller, agent: agent) {
                answerUsage(of: $0, from: from, to: to, agent: agent)
            }
        }
    }

    /// `answer`, where a `watch` keeps the connection open and is followed (`PeerSocketWatch`): the
    /// caller's status is sent again whenever it changes in more than the seconds ticking.
    public static func respond(request line: String, caller: PeerCredentials, agent: Agent) -> PeerSocketAnswer {
        guard case .success(.watch(let asked)) = AgentRequest.parse(line) else {
            return PeerSocketAnswer(line: answer(request: line, callerUID: caller.uid, agent: agent).canonicalString)
        }
        let account = Accounts.account(uid: caller.uid)
        var watched: String? = nil
        let refusal = answerOwn(asked, callerUID: caller.uid, caller: account, agent: agent) { user in
            watched = user
            return .null
        }
        guard let user = watched, let first = watchView(of: user, agent: agent) else {
            let reply = refusal == .null ? failure(.unknownUser, "\(asked ?? account?.name ?? "?") is not managed on this computer") : refusal
            return PeerSocketAnswer(line: reply.canonicalString)
        }
        // One watch per login session (and `watchesPerUID` in all): a session's indicator is one program.
        let group = "\(caller.uid)/" + (LoginSessions.session(ofPID: caller.pid) ?? "no-session")
        return PeerSocketAnswer(
            line: first.line, watch: PeerSocketWatch(group: group, first: first) { watchView(of: user, agent: agent) })
    }

    static let watchRefused = failure(
        .alreadyWatching, "too many watches of your status are open (one per login session); close one and try again")

    /// Runs `body` for the user asked about when the caller may see them: root anyone, anyone else themself.
    static func answerOwn(
        _ asked: String?, callerUID: UInt32, caller: Accounts.Account?, agent: Agent, _ body: (String) -> JSONValue
    ) -> JSONValue {
        guard let user = asked ?? caller?.name else {
            return failure(.badRequest, "no user given and the caller has no account name")
        }
        if callerUID != 0 && caller?.name != user {
            return failure(.notPermitted, "you may only see your own figures, not \(quoted(user))'s")
        }
        guard agent.state.policies[user] != nil else { return failure(.unknownUser, "\(user) is not managed on this computer") }
        return body(user)
    }

    /// Sent to a caller turned away at connect: their account (or everyone) has too many connections open.
    static let busy = failure(.busy, "too many connections to the agent are open; try again in a moment")

    static func failure(_ code: AgentRefusal, _ message: String) -> JSONValue { AgentError(code, message).reply }
}
