/// The keys of the `agent_state` table (`AgentStateTable`) that the agent writes and the CLI reads on the
/// same state directory: one list, so neither needs the other's code to find them.
public enum AgentStateKeys {
    /// The machine id the agent runs as, so the CLI tells this computer's usage summaries from the
    /// other computers'.
    public static let machineID = "machine-id"
    /// The event retention period in days, for `curfew events` to show.
    public static let eventRetentionDays = "event-retention-days"
    /// Events older than this many days are replaced by per-day counts unless the agent is told
    /// otherwise (`curfewd --event-retention`).
    public static let defaultEventRetentionDays = 365
    /// `<prefix><user>`: the last good policy (`LastGoodPolicy`), kept when records vanish or go bad.
    public static let lastGoodPolicyPrefix = "last-good-policy:"
    /// `<prefix><user>`: the newest version this computer has enforced or removed the user at; a
    /// removal older than it does not count.
    public static let newestVersionPrefix = "newest-version:"
    /// `<prefix><user>`: the version in force whose record is missing from the shared directory.
    public static let recordMissingPrefix = "record-missing:"
    /// `<prefix><user>`: the user's screen time since their last break (`BreakClock.persisted`), so a
    /// restart or a reboot does not end the stretch.
    public static let breakClockPrefix = "break-clock:"
    /// `<prefix><user>`: the user lingered (systemd) when a `logout` lockout turned it off; it is turned
    /// on again when they are allowed again, after a restart of the agent too.
    public static let lingerRestorePrefix = "linger-restore:"
    /// The identities the tracker learnt and the apps that claim them (`IdentityClaims.persisted`).
    public static let identityClaims = "identity-claims"
}
