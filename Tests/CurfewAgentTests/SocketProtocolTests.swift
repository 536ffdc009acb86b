import CurfewCore
import CurfewStore
import CurfewSync
import Foundation
import Logging
import Testing

@testable import CurfewAgent

/// The agent's answers on its socket, from a real Agent over a real state directory.
@Suite struct SocketProtocolTests {
    func agent() throws -> (Agent, String) { try makeTestAgent(user: "root", prefix: "curfew-agent") }

    func answer(_ agent: Agent, _ request: String, uid: UInt32) -> JSONObject { socketAnswer(agent, request, uid: uid) }

    @Test func rootMayAskAboutAnyManagedUser() throws {
        let (agent, root) = try agent()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let reply = answer(agent, #"{"command":"status","user":"root"}"#, uid: 0)
        #expect(reply["ok"] == .bool(true))
        guard case .object(let status)? = reply["status"] else {
            Issue.record("no status in \(reply)")
            return
        }
        #expect(status["user"] == .string("root"))
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
        let reply = answer(agent, #"{"command":"status","user":"root"}"#, uid: 65534)
        #expect(reply["ok"] == .bool(false))
        #expect(reply["error"] == .string("not-permitted"))
        // Without a user, the caller's own account is meant: nobody is not managed.
        let own = answer(agent, #"{"command":"status"}"#, uid: 65534)
        #expect(own["error"] == .string("unknown-user"))
    }

    @Test(arguments: ["", "not json", "[]", #"{"user":"root"}"#, #"{"command":"shutdown"}"#])
    func badRequestsAreAnsweredNotObeyed(request: String) throws {
        let (agent, root) = try agent()
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(answer(agent, request, uid: 0)["error"] == .string("bad-request"))
    }
}
