/// The last good policy of a user and its version, as the agent keeps it (in `agent_state`) so that
/// records that vanish, stop verifying or fold to an older version never loosen what is enforced.
public struct LastGoodPolicy: Sendable, Equatable {
    public var version: Int
    public var policy: Policy

    public init(version: Int, policy: Policy) {
        self.version = version
        self.policy = policy
    }

    /// What is kept: the version and the policy document.
    private struct Form: Codable {
        var version: Int
        var policy: JSONValue
    }

    /// `{"policy": {...}, "version": N}` in canonical form.
    public var encoded: String { JSONValueEncoder().value(of: Form(version: version, policy: policy.json)).canonicalString }

    /// nil for text that is not such an object or holds an invalid policy.
    public static func decode(_ text: String) -> LastGoodPolicy? {
        guard let form = try? JSONValueDecoder().decode(Form.self, from: text), let policy = try? Policy.decode(form.policy) else { return nil }
        return LastGoodPolicy(version: form.version, policy: policy)
    }
}
