import CurfewCore
import CurfewStore
import CurfewSync
import Foundation
import Logging
import Testing

@testable import CurfewAgent

/// The agent's answers on its socket, from a real Agent over a real state directory.
@Suite struct SocketProtocolTests {
    func agent() throws -> (Agent, String) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-agent-\(UUID().uuidString)").path
        let state = "\(root)/state"
        let shared = SharedDirectory(path: "\(state)/shared")
        try shared.create()
        let ring = KeyRing(stateDirectory: state)
        let (key, _) = try ring.createSigningKeyIfMissing()
        try ring.trust(key.publicKey)
        var policy = Policy.defaults(for: "root")
        policy.bedtime = nil
        _ = try shared.publish(
            PolicyRecord(user: "root", version: 1, baseVersion: 0, author: key.id, time: 1_790_000_000, policy: policy),
            signedBy: key)
        let configuration = AgentConfiguration(
            stateDirectory: state, sharedDirectory: shared.path, socketPath: "\(root)/run/curfewd.sock",
            catalogDirectories: [], logindBusAddress: "none", useProcessConnector: false)
        return (try Agent(configuration: configuration, logger: Logger(label: "test")), root)
    }

    func answer(_ agent: Agent, _ request: String, uid: UInt32) -> JSONObject {
        guard case .object(let object) = SocketProtocol.answer(request: request, callerUID: uid, agent: agent) else {
            return JSONObject()
        }
        return object
    }

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
