import CurfewCore
import CurfewLinux
import Foundation

/// The CLI's side of the agent's socket: one request, one reply, within `timeout` (connect included).
enum AgentClient {
    /// The reply as sent (for `--json`, which prints the agent's own JSON) and as read; nil when the
    /// agent could not be reached in time or sent something that is not a reply.
    static func exchange(_ request: AgentRequest, socket: String, timeout: Duration = .seconds(3)) -> (
        line: String, reply: AgentReply
    )? {
        guard let line = try? PeerSocketClient.request(path: socket, line: request.line, timeout: timeout),
            let reply = try? JSONDecoder().decode(AgentReply.self, from: Data(line.utf8))
        else { return nil }
        return (line, reply)
    }

    static func ask(_ request: AgentRequest, socket: String, timeout: Duration = .seconds(3)) -> AgentReply? {
        exchange(request, socket: socket, timeout: timeout)?.reply
    }

    /// A refusal as one line for people and the exit status SPEC.md gives it.
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
