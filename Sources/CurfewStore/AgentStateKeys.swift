import CurfewCore

/// A value the `agent_state` table keeps: its text in the table, and back (nil for text that is not
/// one, which reads as no value).
public protocol AgentStateValue: Sendable {
    var stateText: String { get }
    init?(stateText: String)
}

/// One fact of `agent_state`: its key and the type its value reads back as, so what the agent writes
/// and what the CLI reads on the same state directory cannot disagree.
public struct AgentStateKey<Value: AgentStateValue>: Sendable {
    public let name: String

    init(_ name: String) { self.name = name }
}

/// A fact kept once per user, under `<prefix><user>`.
public struct AgentStateKeyPerUser<Value: AgentStateValue>: Sendable {
    public let prefix: String

    init(_ prefix: String) { self.prefix = prefix }

    /// The key of `user`'s fact.
    public func callAsFunction(_ user: String) -> AgentStateKey<Value> { AgentStateKey(prefix + user) }
}

/// The facts of the `agent_state` table (`AgentStateTable`): one list, so neither the agent nor the
/// CLI needs the other's code to find them.
public enum AgentStateKeys {
    /// The machine id the agent runs as, so the CLI tells this computer's usage summaries from the
    /// other computers'.
    public static let machineID = AgentStateKey<String>("machine-id")
    /// The event retention period in days, for `curfew events` to show.
    public static let eventRetentionDays = AgentStateKey<Int>("event-retention-days")
    /// Events older than this many days are replaced by per-day counts unless the agent is told
    /// otherwise (`curfewd --event-retention`).
    public static let defaultEventRetentionDays = 365
    /// The last good policy (`LastGoodPolicy`), kept when records vanish or go bad.
    public static let lastGoodPolicy = AgentStateKeyPerUser<LastGoodPolicy>("last-good-policy:")
    /// The newest version this computer has enforced or removed the user at; a removal older than it
    /// does not count.
    public static let newestVersion = AgentStateKeyPerUser<Int>("newest-version:")
    /// The version in force whose record is missing from the shared directory.
    public static let recordMissing = AgentStateKeyPerUser<Int>("record-missing:")
    /// The user's screen time since their last break (`BreakClock.persisted`), so a restart or a
    /// reboot does not end the stretch.
    public static let breakClock = AgentStateKeyPerUser<String>("break-clock:")
    /// The user lingered (systemd) when a `logout` lockout turned it off; it is turned on again when
    /// they are allowed again, after a restart of the agent too.
    public static let lingerRestore = AgentStateKeyPerUser<Bool>("linger-restore:")
    /// The identities the tracker learnt and the apps that claim them (`IdentityClaims.persisted`).
    public static let identityClaims = AgentStateKey<String>("identity-claims")
    /// The wall time of the tracker's last flush, in milliseconds.
    public static let lastFlush = AgentStateKey<Int64>("last-flush")
}

extension String: AgentStateValue {
    public var stateText: String { self }
    public init?(stateText: String) { self = stateText }
}

extension Int: AgentStateValue {
    public var stateText: String { "\(self)" }
    public init?(stateText: String) { self.init(stateText) }
}

extension Int64: AgentStateValue {
    public var stateText: String { "\(self)" }
    public init?(stateText: String) { self.init(stateText) }
}

/// `1` for true; a fact that is false is removed instead of kept.
extension Bool: AgentStateValue {
    public var stateText: String { self ? "1" : "0" }
    public init?(stateText: String) {
        switch stateText {
        case "1": self = true
        case "0": self = false
        default: return nil
        }
    }
}

extension LastGoodPolicy: AgentStateValue {
    public var stateText: String { encoded }
    public init?(stateText: String) {
        guard let policy = LastGoodPolicy.decode(stateText) else { return nil }
        self = policy
    }
}
