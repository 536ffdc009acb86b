import CurfewCore
import CurfewLinux
import CurfewSync
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

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

    /// The agent's reply object to `request`, when it said yes; its refusal as a `CLIError` (77 for
    /// another child's figures), 69 when it cannot be reached.
    static func ask(_ request: AgentRequest, socket: String?) throws -> JSONObject {
        let path = Locations.socket(socket, environment: ProcessInfo.processInfo.environment)
        guard let (line, reply) = AgentClient.exchange(request, socket: path) else {
            throw CLIError("the agent is not running (cannot reach \(path)); only a parent can read the saved figures", .unavailable)
        }
        guard reply.ok, case .object(let object)? = try? JSONValue.parse(line) else { throw AgentClient.error(reply) }
        return object
    }

    /// The policy in force for `user` and the extra time granted per day.
    static func rules(of user: String, socket: String?) throws -> (policy: Policy, adjustments: [LocalDate: DayAdjustment]) {
        let object = try ask(.rules(user: user), socket: socket)
        guard let value = object["policy"], let policy = try? Policy.decode(value) else {
            throw CLIError("the agent sent a policy this curfew cannot read", .failure)
        }
        var adjustments: [LocalDate: DayAdjustment] = [:]
        if case .array(let entries)? = object["adjustments"] {
            for case .object(let entry) in entries {
                guard case .string(let text)? = entry["date"], let day = try? LocalDate.parse(text) else { continue }
                var adjustment = DayAdjustment()
                if case .int(let minutes)? = entry["extraMinutes"] { adjustment.extraMinutes = Int(clamping: minutes) }
                if case .int(let minutes)? = entry["bedtimeDelayMinutes"] { adjustment.bedtimeDelayMinutes = Int(clamping: minutes) }
                for (key, field) in [("downtimeDelayMinutes", \DayAdjustment.downtimeDelayMinutes), ("appExtraMinutes", \.appExtraMinutes)] {
                    guard case .object(let named)? = entry[key] else { continue }
                    for name in named.keys { if case .int(let minutes)? = named[name] { adjustment[keyPath: field][name] = Int(clamping: minutes) } }
                }
                adjustments[day] = adjustment
            }
        }
        return (policy, adjustments)
    }

    /// The saved usage buckets and events of `user` from `from` through `to`.
    static func usage(of user: String, from: LocalDate, to: LocalDate, socket: String?) throws -> ([UsageRow], [AgentEvent]) {
        guard to.daysSinceEpoch - from.daysSinceEpoch < AgentRequest.maxUsageDays else {
            throw CLIError(
                "a child's own report covers at most \(AgentRequest.maxUsageDays) days, got \(from) to \(to)", .invalidArguments)
        }
        let object = try ask(.usage(user: user, from: from, to: to), socket: socket)
        var rows: [UsageRow] = []
        if case .array(let entries)? = object["rows"] {
            for case .array(let fields) in entries {
                guard fields.count == 4, case .string(let dayText) = fields[0], let day = try? LocalDate.parse(dayText),
                    case .int(let hour) = fields[1], case .string(let app) = fields[2], case .int(let milliseconds) = fields[3]
                else { continue }
                rows.append(UsageRow(day: day, hour: Int(clamping: hour), app: app, milliseconds: milliseconds))
            }
        }
        var events: [AgentEvent] = []
        if case .array(let entries)? = object["events"] {
            for case .object(let entry) in entries {
                guard case .int(let time)? = entry["time"], case .string(let kind)? = entry["kind"],
                    case .string(let message)? = entry["message"]
                else { continue }
                let data = entry["data"].flatMap { $0 == .null ? nil : $0 }
                events.append(AgentEvent(time: time, user: user, kind: EventKind(rawValue: kind), message: message, data: data))
            }
        }
        return (rows, events)
    }
}
