import CurfewCore
import CurfewLinux
import CurfewStore
import Foundation

/// What a child may read about themself through the socket: their status as it changes (`watch`),
/// their rules (`rules`, for `curfew schedule`) and their saved usage (`usage`, for `curfew report`).
extension SocketProtocol {
    /// The status line a watcher is sent, the key that says whether it changed (the figures in whole
    /// minutes: a counting child's seconds do not make a new line every second), and when to look
    /// again without a wake: the next change of state or the next local day.
    static func watchView(of user: String, agent: Agent) -> PeerSocketWatch.View? {
        let now = agent.clock.wallSecond
        guard let status = agent.status(of: user, now: now) else { return nil }
        let report = status.report
        let json = report.json
        let line = AgentReply(status: report).json.canonicalString
        let midnight = status.zone.start(of: status.date.adding(days: 1))
        let next = min(midnight, status.decision.nextChange?.at ?? midnight)
        // Half a second past the moment, so the decision then has moved on.
        return PeerSocketWatch.View(key: watchKey(json).canonicalString, line: line, lookAgainInMilliseconds: max(.zero, next - now).wholeMilliseconds + 500)
    }

    /// What decides whether a watcher is sent a status again: the figures in whole minutes, without
    /// the moments that move with the clock while nothing happens (time up "now + time left" when the
    /// child is not counting; allowed again "now" while allowed): the time left says as much.
    static func watchKey(_ status: JSONValue) -> JSONValue {
        guard case .object(var object) = minutes(status) else { return status }
        if case .object(let change)? = object["nextChange"], case .string(let state)? = change["state"],
            state == UseState.limitReached.rawValue || state == UseState.weekLimitReached.rawValue
        {
            object["nextChange"] = .string(state)
        }
        if case .string(UseState.allowed.rawValue)? = object["state"] { object["allowedAgainAt"] = nil }
        return .object(object)
    }

    /// `value` with every seconds figure in whole minutes.
    static func minutes(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let object):
            var result = JSONObject()
            for (key, field) in object.entries {
                if case .int(let seconds) = field, key.hasSuffix("Seconds") || key == "seconds" {
                    result[key] = .int(floorDivide(seconds, 60))
                } else {
                    result[key] = minutes(field)
                }
            }
            return .object(result)
        case .array(let elements): return .array(elements.map(minutes))
        default: return value
        }
    }

    /// The policy in force and every day's extra time: `{"ok": true, "policy": {...}, "adjustments": [...]}`.
    static func answerRules(of user: String, agent: Agent) -> JSONValue {
        guard let policy = agent.state.policies[user] else { return failure(.unknownUser, "\(user) is not managed on this computer") }
        let adjustments = (agent.state.adjustments[user] ?? [:]).sorted { $0.key < $1.key }.map {
            AgentReply.DayExtra(date: $0.key, adjustment: $0.value)
        }
        return AgentReply(policy: policy.json, adjustments: adjustments).json
    }

    /// The saved usage buckets and events of the days asked (at most `AgentRequest.maxUsageDays`):
    /// `{"ok": true, "rows": [[day, hour, app, ms], ...], "events": [{"time", "kind", "message", "data"}]}`.
    static func answerUsage(of user: String, from: LocalDate, to: LocalDate, agent: Agent) -> JSONValue {
        guard let policy = agent.state.policies[user] else { return failure(.unknownUser, "\(user) is not managed on this computer") }
        let zone = Schedule.zone(for: policy)
        do {
            let (rows, events) = try agent.store.read { db in
                (
                    try UsageTable.rows(user: user, from: from, through: to, db),
                    try EventLog.events(
                        of: user, from: zone.start(of: from), before: zone.start(of: to.adding(days: 1)), db)
                )
            }
            let saved = events.map {
                AgentReply.SavedEvent(time: $0.time, kind: $0.kind.rawValue, message: $0.message, data: $0.data)
            }
            return AgentReply(rows: rows, events: saved).json
        } catch {
            return failure(.failed, "cannot read the saved usage: \(error)")
        }
    }
}
