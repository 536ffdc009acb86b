/// Where Curfew keeps things, as SPEC.md gives the defaults: a flag wins, then the environment
/// variable (when not empty), then the default. The CLI and the agent resolve them the same way.
public enum Locations {
    public static func stateDirectory(_ flag: String?, environment: [String: String]) -> String {
        flag ?? nonEmpty(environment["CURFEW_STATE_DIR"]) ?? "/var/lib/curfew"
    }

    public static func sharedDirectory(_ flag: String?, stateDirectory: String, environment: [String: String]) -> String {
        flag ?? nonEmpty(environment["CURFEW_SHARED_DIR"]) ?? "\(stateDirectory)/shared"
    }

    /// The agent's socket.
    public static func socket(_ flag: String?, environment: [String: String]) -> String {
        flag ?? nonEmpty(environment["CURFEW_SOCKET"]) ?? "/run/curfew/curfewd.sock"
    }

    private static func nonEmpty(_ value: String?) -> String? { value?.isEmpty == false ? value : nil }
}
