import CurfewCore
import CurfewStore
import CurfewSync
import Foundation
import Logging
import Testing

@testable import CurfewAgent

/// The agent's answers on its socket, from a real Agent over a real state directory.
@Suite struct SocketProtocolTests {
    /// The managed user: an account of the base system (uid 1) that is not root, which is never managed.
    func agent() throws -> (Agent, String) { try makeTestAgent(user: "daemon", prefix: "curfew-agent") }

    func answer(_ agent: Agent, _ request: String, uid: UInt32) -> JSONObject { socketAnswer(agent, request, uid: uid) }

    @Test func rootMayAskAboutAnyManagedUser() throws {
        let (agent, root) = try agent()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let reply = answer(agent, #"{"command":"status","user":"daemon"}"#, uid: 0)
        #expect(reply["ok"] == .bool(true))
        guard case .object(let status)? = reply["status"] else {
            Issue.record("no status in \(reply)")
            return
        }
        #expect(status["user"] == .string("daemon"))
        #expect(status["screenSeconds"] == .int(0))
        #expect(status["limitMinutes"] == .int(120))
        #expect(status["state"] == .string("allowed"))
        #expect(status["apps"] == .array([]))
        let unknown = answer(agent, #"{"command":"status","user":"nobody"}"#, uid: 0)
        #expect(unknown["error"] == .string("unknown-user"))
    }

    @Test func othersMayAskOnlyAboutThemselves() throws {
        let (agent, root) = try agent()
        defer { try? FileManager.default.removeItem(atPath: root) }
        // uid 65534 is nobody on Debian.
        let reply = answer(agent, #"{"command":"status","user":"daemon"}"#, uid: 65534)
        #expect(reply["ok"] == .bool(false))
        #expect(reply["error"] == .string("not-permitted"))
        // Without a user, the caller's own account is meant: nobody is not managed.
        let own = answer(agent, #"{"command":"status"}"#, uid: 65534)
        #expect(own["error"] == .string("unknown-user"))
    }

    /// Logins, sudo and su ask as root; a screen locker asks as the user: a caller learns their own
    /// verdict and that root is let in, and anyone but root asking about another account gets one
    /// refusal, managed or not, so the answer never says who is managed. A child's own checks leave no
    /// event (they could ask in a loop).
    @Test func loginChecksAnswerRootAboutAnyoneAndOthersAboutThemselvesOnly() throws {
        let (agent, root) = try makeTestAgent(user: "daemon", prefix: "curfew-agent") { $0.dailyLimit = .minutes(0) }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let unmanaged = answer(agent, #"{"command":"check-login","user":"nobody"}"#, uid: 1)
        let other = answer(agent, #"{"command":"check-login","user":"daemon"}"#, uid: 65534)
        #expect(other["error"] == .string("not-permitted"), "\(other)")
        #expect(unmanaged == other, "unmanaged: \(unmanaged)\nmanaged: \(other)")
        let rootAsked = answer(agent, #"{"command":"check-login","user":"root"}"#, uid: 1)
        #expect(rootAsked["ok"] == .bool(true) && rootAsked["allowed"] == .bool(true), "\(rootAsked)")
        let nobody = answer(agent, #"{"command":"check-login","user":"nobody"}"#, uid: 65534)
        #expect(nobody["ok"] == .bool(true) && nobody["allowed"] == .bool(true), "\(nobody)")
        let own = answer(agent, #"{"command":"check-login","user":"daemon"}"#, uid: 1)
        #expect(own["ok"] == .bool(true) && own["allowed"] == .bool(false), "\(own)")
        let byRoot = answer(agent, #"{"command":"check-login","user":"daemon","service":"su"}"#, uid: 0)
        #expect(byRoot["allowed"] == .bool(false), "\(byRoot)")
        let refusals = try agent.store.read { try EventLog.list(user: "daemon", since: nil, $0) }.filter { $0.kind == .loginRefused }
        #expect(refusals.count == 1, "only root's check is recorded: \(refusals)")
    }

    @Test(arguments: ["", "not json", "[]", #"{"user":"daemon"}"#, #"{"command":"shutdown"}"#])
    func badRequestsAreAnsweredNotObeyed(request: String) throws {
        let (agent, root) = try agent()
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(answer(agent, request, uid: 0)["error"] == .string("bad-request"))
    }
}
