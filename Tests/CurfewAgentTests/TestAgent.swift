import CurfewCore
import CurfewSync
import Foundation
import Logging

@testable import CurfewAgent

/// A real Agent over a fresh state directory whose shared directory holds one policy for `user`
/// (signed by the directory's own, trusted key); `more` may publish further records with that key.
/// Returns the agent and the temporary root to remove.
func makeTestAgent(
    user: String, prefix: String, adjust: (inout Policy) -> Void = { _ in },
    more: (SharedDirectory, SigningKey) throws -> Void = { _, _ in }
) throws -> (Agent, String) {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    let state = "\(root)/state"
    let shared = SharedDirectory(path: "\(state)/shared")
    try shared.create()
    let ring = KeyRing(stateDirectory: state)
    let (key, _) = try ring.createSigningKeyIfMissing()
    try ring.trust(key.publicKey)
    var policy = Policy.defaults(for: user)
    policy.bedtime = nil
    adjust(&policy)
    _ = try shared.publish(
        PolicyRecord(user: user, version: 1, baseVersion: 0, author: key.id, time: 1_790_000_000, policy: policy),
        signedBy: key)
    try more(shared, key)
    let configuration = AgentConfiguration(
        stateDirectory: state, sharedDirectory: shared.path, socketPath: "\(root)/run/curfewd.sock",
        catalogDirectories: [], logindBusAddress: "none", useProcessConnector: false)
    return (try Agent(configuration: configuration, logger: Logger(label: "test")), root)
}

/// The agent's answer to one socket request from `uid`, as an object.
func socketAnswer(_ agent: Agent, _ request: String, uid: UInt32) -> JSONObject {
    guard case .object(let object) = SocketProtocol.answer(request: request, callerUID: uid, agent: agent) else {
        return JSONObject()
    }
    return object
}
