/// The last good policy of a user and its version, as the agent keeps it (in `agent_state`) so that
/// records that vanish, stop verifying or fold to an older version never loosen what is enforced.
public struct LastGoodPolicy: Sendable, Equatable {
    public var version: Int
    public var policy: Policy

    public init(version: Int, policy: Policy) {
        self.version = version
        self.policy = policy
    }

    /// `{"policy": {...}, "version": N}` in canonical form.
    public var encoded: String {
        JSONValue.object(JSONObject([("version", .int(Int64(version))), ("policy", policy.json)])).canonicalString
    }

    /// nil for text that is not such an object or holds an invalid policy.
    public static func decode(_ text: String) -> LastGoodPolicy? {
        guard case .object(let object)? = try? JSONValue.parse(text), case .int(let version)? = object["version"],
            let value = object["policy"], let policy = try? Policy.decode(value)
        else { return nil }
        return LastGoodPolicy(version: Int(version), policy: policy)
    }
}
