import CurfewCore
import CurfewLinux
import CurfewSync
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The CLI's side of the agent's socket: one request, one reply, within `timeout` (connect included).
enum AgentClient {
    /// The reply as sent (for `--json`, which prints the agent's own JSON in its order) and as read,
    /// both from one strict parse of the line; nil when the agent could not be reached in time or sent
    /// something that is not a reply.
    static func exchange(_ request: AgentRequest, socket: String, timeout: Duration = .seconds(3)) -> (
        sent: JSONObject, reply: AgentReply
    )? {
        guard let line = try? PeerSocketClient.request(path: socket, line: request.line, timeout: timeout),
            case .object(let sent)? = try? JSONValue.parse(line),
            let reply = try? JSONValueDecoder().decode(AgentReply.self, from: .object(sent))
        else { return nil }
        return (sent, reply)
    }

    static func ask(_ request: AgentRequest, socket: String, timeout: Duration = .seconds(3)) -> AgentReply? {
        exchange(request, socket: socket, timeout: timeout)?.reply
    }

    /// A refusal as one line for people and the exit status docs/design.md gives it.
    static func error(_ reply: AgentReply) -> CLIError {
        let message = reply.message ?? "the agent refused"
        switch reply.error {
        case .notPermitted?: return CLIError(message, .notPermitted)
        case .unknownUser?, .badRequest?: return CLIError(message, .invalidArguments)
        case .busy?: return CLIError(message, .unavailable)
        default: return CLIError(message, .failure)
        }
    }
}

/// A child's own rules and figures, asked of the agent (the state directory is the parents' alone).
enum ChildView {
    /// The caller's account name.
    static func me() throws -> String {
        guard let name = Accounts.account(uid: getuid())?.name else {
            throw CLIError("name a user: your account has no name", .invalidArguments)
        }
        return name
    }

    /// A child may read their own figures only (the agent checks too, by the caller's credentials).
    static func requireOwn(_ user: String, what: String) throws {
        guard getuid() != 0, let me = Accounts.account(uid: getuid())?.name, me != user else { return }
        throw CLIError("you may only see your own \(what), not \(user)'s", .notPermitted)
    }

    /// The agent's reply to `request`, when it said yes; its refusal as a `CLIError` (77 for another
    /// child's figures), 69 when it cannot be reached.
    static func ask(_ request: AgentRequest, socket: String?) throws -> AgentReply {
        let path = Locations.socket(socket, environment: ProcessInfo.processInfo.environment)
        guard let (_, reply) = AgentClient.exchange(request, socket: path) else {
            throw CLIError("the agent is not running (cannot reach \(path)); only a parent can read the saved figures", .unavailable)
        }
        guard reply.ok else { throw AgentClient.error(reply) }
        return reply
    }

    /// The policy in force for `user` and the extra time granted per day.
    static func rules(of user: String, socket: String?) throws -> (policy: Policy, adjustments: [LocalDate: DayAdjustment]) {
        let reply = try ask(.rules(user: user), socket: socket)
        guard let value = reply.policy, let policy = try? Policy.decode(value) else {
            throw CLIError("the agent sent a policy this curfew cannot read", .failure)
        }
        var adjustments: [LocalDate: DayAdjustment] = [:]
        for day in reply.adjustments ?? [] { adjustments[day.date] = day.adjustment }
        return (policy, adjustments)
    }

    /// The saved usage buckets and events of `user` from `from` through `to`.
    static func usage(of user: String, from: LocalDate, to: LocalDate, socket: String?) throws -> ([UsageRow], [AgentEvent]) {
        guard to.daysSinceEpoch - from.daysSinceEpoch < AgentRequest.maxUsageDays else {
            throw CLIError(
                "a child's own report covers at most \(AgentRequest.maxUsageDays) days, got \(from) to \(to)", .invalidArguments)
        }
        let reply = try ask(.usage(user: user, from: from, to: to), socket: socket)
        let events = (reply.events ?? []).map {
            AgentEvent(time: $0.time, user: user, kind: EventKind(rawValue: $0.kind), message: $0.message, data: $0.data)
        }
        return (reply.rows ?? [], events)
    }
}
