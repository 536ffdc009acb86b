import CurfewCore
import CurfewStore
import CurfewSync
import Foundation
import Logging
import Testing

@testable import CurfewAgent

/// Grants as the agent applies them, and children's requests on its socket, from a real Agent.
@Suite struct RequestProtocolTests {
    /// `nobody` (uid 65534 on Debian) is managed with a 2h limit and no bedtime, in UTC; today it has
    /// two grants, and `daemon` (not managed) has one.
    func agent() throws -> (Agent, String, LocalDate) {
        let today = ZoneRules(identifier: "UTC")!.localTime(at: Int64(Date().timeIntervalSince1970)).date
        let (agent, root) = try makeTestAgent(user: "nobody", prefix: "curfew-requests", adjust: { $0.timezone = "UTC" }) {
            shared, key in
            for (user, extra, nonce) in [("nobody", 30, "a"), ("nobody", 15, "b"), ("daemon", 60, "c")] {
                _ = try shared.publish(
                    GrantRecord(
                        user: user, date: today, extraMinutes: extra, bedtimeDelayMinutes: 0, author: key.id,
                        time: 1_790_000_000, nonce: String(repeating: nonce, count: 32)),
                    signedBy: key)
            }
        }
        return (agent, root, today)
    }

    func answer(_ agent: Agent, _ request: String, uid: UInt32) -> JSONObject { socketAnswer(agent, request, uid: uid) }

    @Test func grantsOfManagedUsersAddUpAndAreAnnouncedOnce() throws {
        let (agent, root, today) = try agent()
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(agent.state.adjustments == ["nobody": [today: DayAdjustment(extraMinutes: 45)]])
        let status = agent.status(of: "nobody", now: Instant(seconds: Int64(Date().timeIntervalSince1970)))
        #expect(status?.decision.limitMinutes == 165)
        #expect(status?.adjustment == DayAdjustment(extraMinutes: 45))
        try agent.reloadPolicies()
        let events = try agent.store.read { try EventLog.list(user: nil, since: nil, $0) }.filter {
            $0.kind == .extraTimeGranted
        }
        #expect(events.count == 2)
        #expect(events.allSatisfy { $0.user == "nobody" })
        #expect(Set(events.map(\.message)) == ["30m extra on \(today)", "15m extra on \(today)"])
    }

    @Test func aManagedUserMayAskForMoreTime() throws {
        let (agent, root, _) = try agent()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let reply = answer(agent, #"{"command":"request","minutes":30,"reason":"homework"}"#, uid: 65534)
        #expect(reply["ok"] == .bool(true), "\(reply)")
        guard case .object(let request)? = reply["request"] else {
            Issue.record("no request in \(reply)")
            return
        }
        #expect(request["id"] == .int(1))
        #expect(request["user"] == .string("nobody"))
        #expect(request["minutes"] == .int(30))
        #expect(request["status"] == .string("pending"))
        let stored = try agent.store.read { try RequestTable.pending($0) }
        #expect(stored.map(\.reason) == ["homework"])
        let events = try agent.store.read { try EventLog.list(user: "nobody", since: nil, $0) }
        #expect(events.contains { $0.kind == .timeRequested && $0.message == "asked for 30m more" })
    }

    @Test(arguments: [
        (#"{"command":"request","minutes":30}"#, UInt32(0), "not-permitted", "root cannot ask for more time; grant it with curfew grant"),
        (#"{"command":"request","minutes":30}"#, UInt32(1), "not-permitted", "daemon is not managed on this computer; there is no limit to extend"),
        (#"{"command":"request","minutes":500}"#, UInt32(65534), "bad-request", "requested time must be between 1 and 480 minutes, got 500"),
        (#"{"command":"request","minutes":0}"#, UInt32(65534), "bad-request", "requested time must be between 1 and 480 minutes, got 0"),
        (#"{"command":"request","minutes":"30m"}"#, UInt32(65534), "bad-request", "\"minutes\" must be a whole number"),
        (#"{"command":"request","minutes":30,"reason":7}"#, UInt32(65534), "bad-request", "\"reason\" must be a string"),
        (
            #"{"command":"request","minutes":30,"reason":"\u001b[2J\n7 kid"}"#, UInt32(65534), "bad-request",
            #"reason must be plain text without control characters, got \x1b in "\u001b[2J\n7 kid""#
        ),
    ])
    func refusedRequestsRecordNothing(request: String, uid: UInt32, error: String, message: String) throws {
        let (agent, root, _) = try agent()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let reply = answer(agent, request, uid: uid)
        #expect(reply["error"] == .string(error))
        #expect(reply["message"] == .string(message))
        #expect(try agent.store.read { try RequestTable.all($0) }.isEmpty)
    }

    /// A child who asks again and again: 5 wait at most, and 10 an hour are recorded whatever
    /// the parent answers; each refusal names the rule and records nothing.
    @Test func requestsAreCappedWhileWaitingAndPerHour() throws {
        let (agent, root, _) = try agent()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let ask = #"{"command":"request","minutes":30}"#
        for _ in 0..<5 { #expect(answer(agent, ask, uid: 65534)["ok"] == .bool(true)) }
        let sixth = answer(agent, ask, uid: 65534)
        #expect(sixth["error"] == .string("not-permitted"))
        #expect(
            sixth["message"] == .string("at most 5 requests may wait for an answer, nobody has 5; wait until a parent answers them"))
        // A parent answers them all: five more may be asked, then the hour is full.
        let now = Instant(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))
        try agent.store.write { db in
            for request in try RequestTable.pending(db) {
                try RequestTable.answer(id: request.id, status: .denied, minutes: nil, by: "parent", now: now, db)
            }
        }
        for _ in 0..<5 { #expect(answer(agent, ask, uid: 65534)["ok"] == .bool(true)) }
        try agent.store.write { db in
            for request in try RequestTable.pending(db) {
                try RequestTable.answer(id: request.id, status: .denied, minutes: nil, by: "parent", now: now, db)
            }
        }
        let eleventh = answer(agent, ask, uid: 65534)
        #expect(eleventh["error"] == .string("not-permitted"))
        #expect(eleventh["message"] == .string("at most 10 requests an hour are recorded, nobody made 10 in the last hour"))
        #expect(try agent.store.read { try RequestTable.all($0) }.count == 10)
        let events = try agent.store.read { try EventLog.list(user: "nobody", since: nil, $0) }
        #expect(events.filter { $0.kind == .timeRequested }.count == 10)
        // An hour later none of them counts any more.
        let later = try agent.store.read { try RequestTable.counts(user: "nobody", since: now + .seconds(3_600), $0) }
        #expect(later.pending == 0 && later.recent == 0)
        let counted = try agent.store.read { try RequestTable.counts(user: "nobody", since: now - .seconds(3_600), $0) }
        #expect(counted.pending == 0 && counted.recent == 10)
    }

    @Test func aLongReasonIsRefused() throws {
        let (agent, root, _) = try agent()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let reason = String(repeating: "x", count: 201)
        let reply = answer(agent, #"{"command":"request","minutes":30,"reason":"\#(reason)"}"#, uid: 65534)
        #expect(reply["message"] == .string("reason must be at most 200 characters, got 201"))
    }
}

/// A request records what blocks the child and the app they name; a grant that lifts an
/// app's limit or a break applies, and the child is told what they got, once.
@Suite struct ExtraTimeAgentTests {
    func agent(grants: [(Int, GrantLift, String)]) throws -> (Agent, String, LocalDate) {
        let today = ZoneRules(identifier: "UTC")!.localTime(at: Int64(Date().timeIntervalSince1970)).date
        let (agent, root) = try makeTestAgent(
            user: "nobody", prefix: "curfew-extra",
            adjust: {
                $0.timezone = "UTC"
                $0.dailyLimit = .minutes(0)
                $0.apps = [AppRule(app: "minecraft", rule: .limit(minutes: 60))]
                $0.breaks = Breaks(afterMinutes: 45, lengthMinutes: 10)
            }
        ) { shared, key in
            for (extra, lift, nonce) in grants {
                _ = try shared.publish(
                    GrantRecord(
                        user: "nobody", date: today, extraMinutes: extra, bedtimeDelayMinutes: 0, author: key.id,
                        time: 1_790_000_000, nonce: String(repeating: nonce, count: 32), lift: lift),
                    signedBy: key)
            }
        }
        return (agent, root, today)
    }

    @Test func aRequestRecordsItsCauseAndApp() throws {
        let (agent, root, _) = try agent(grants: [])
        defer { try? FileManager.default.removeItem(atPath: root) }
        // A daily limit of 0: the enforcer's decision is "limit reached".
        let reply = socketAnswer(agent, #"{"command":"request","minutes":30,"app":"minecraft"}"#, uid: 65534)
        guard case .object(let request)? = reply["request"] else {
            Issue.record("no request in \(reply)")
            return
        }
        #expect(request["cause"] == .string("daily-limit") && request["app"] == .string("minecraft"), "\(request)")
        let stored = try agent.store.read { try RequestTable.pending($0) }
        #expect(stored.map(\.cause) == [.dailyLimit] && stored.map(\.app) == ["minecraft"])
        let events = try agent.store.read { try EventLog.list(user: "nobody", since: nil, $0) }
        #expect(events.contains { $0.kind == .timeRequested && $0.message == "asked for 30m more of minecraft (blocked by daily limit)" })

        let unknown = socketAnswer(agent, #"{"command":"request","minutes":30,"app":"tetris"}"#, uid: 65534)
        #expect(unknown["error"] == .string("bad-request"), "\(unknown)")
        #expect(
            unknown["message"] == .string(#"unknown app "tetris": not in the app catalog and nobody's policy has no rule for it"#))
        let invalid = socketAnswer(agent, #"{"command":"request","minutes":30,"app":"Tetris!"}"#, uid: 65534)
        #expect(invalid["error"] == .string("bad-request"), "\(invalid)")
        #expect(try agent.store.read { try RequestTable.pending($0) }.count == 1)
    }

    @Test func grantsForAnAppAndABreakApplyAndTheChildIsToldOnce() throws {
        let (agent, root, today) = try agent(grants: [
            (0, GrantLift(app: .init(app: "minecraft", minutes: 30)), "a"), (0, GrantLift(endsBreak: true), "b"),
        ])
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(agent.state.adjustments["nobody"]?[today]?.appExtraMinutes == ["minecraft": 30])
        #expect(agent.state.takeBreaksEnded() == ["nobody"])
        let status = agent.status(of: "nobody", now: Instant(seconds: Int64(Date().timeIntervalSince1970)))
        #expect(status?.rules.first?.limitMinutes == 90 && status?.rules.first?.extraMinutes == 30)
        let messages = agent.state.takeMessages().filter { $0.user == "nobody" }.map(\.body).sorted()
        #expect(messages == ["a parent ended your break", "a parent gave you 30m more of minecraft today"], "\(messages)")
        try agent.reloadPolicies()
        #expect(agent.state.takeMessages().isEmpty)
        #expect(agent.state.takeBreaksEnded().isEmpty)
    }
}
