/// The kind of an audit-log event: a stable word for scripts (`curfew events --json`) and the one
/// place that lists them. Events read from an older database may carry a kind not listed here.
public struct EventKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public var description: String { rawValue }

    /// The agent started.
    public static let agentStarted = EventKind(rawValue: "agent-started")
    /// The agent stopped (SIGTERM).
    public static let agentStopped = EventKind(rawValue: "agent-stopped")
    /// A session said it was idle or locked while an app that is not always allowed was busy: the
    /// claim was not believed and time went on counting (once per claim).
    public static let idleClaimIgnored = EventKind(rawValue: "idle-claim-ignored")
    /// A locked-out user may use the computer again.
    public static let allowedAgain = EventKind(rawValue: "allowed-again")
    /// A blocked or over-limit app was stopped.
    public static let appStopped = EventKind(rawValue: "app-stopped")
    /// The wall clock was set; no time was credited or lost.
    public static let clockJump = EventKind(rawValue: "clock-jump")
    /// The database was damaged, moved aside and started anew.
    public static let databaseCorrupt = EventKind(rawValue: "database-corrupt")
    /// Old events became daily counts.
    public static let eventsSummarised = EventKind(rawValue: "events-summarised")
    /// A grant of extra time came into force (its data names the grant).
    public static let extraTimeGranted = EventKind(rawValue: "extra-time-granted")
    /// A managed user with no policy is held to no screen time.
    public static let failClosed = EventKind(rawValue: "fail-closed")
    /// A managed user with no policy is let be (the agent fails open).
    public static let failOpen = EventKind(rawValue: "fail-open")
    /// Time ran out or bedtime began: the lockout action.
    public static let lockout = EventKind(rawValue: "lockout")
    /// A login was refused.
    public static let loginRefused = EventKind(rawValue: "login-refused")
    /// The `network` lockout cut a user's network traffic (loopback excepted).
    public static let networkOff = EventKind(rawValue: "network-off")
    /// A user's network traffic flows again (the `network` lockout was lifted).
    public static let networkOn = EventKind(rawValue: "network-on")
    /// The `network` lockout could not be put in place or lifted (nftables missing or refusing).
    public static let networkFilterFailed = EventKind(rawValue: "network-filter-failed")
    /// systemd-logind cannot be reached; counting falls back to processes.
    public static let logindUnavailable = EventKind(rawValue: "logind-unavailable")
    /// A policy for an account that is never managed (uid 0) was ignored.
    public static let policyIgnored = EventKind(rawValue: "policy-ignored")
    /// The parent's PIN was tried on a child's screen (`approve-pin`): right or wrong, never the PIN.
    public static let pinTry = EventKind(rawValue: "pin-try")
    /// A parent's PIN answered a child's pending request: which request, what was asked and granted.
    public static let pinApproval = EventKind(rawValue: "pin-approved")
    /// The last good policy stays in force.
    public static let policyKept = EventKind(rawValue: "policy-kept")
    /// A policy version came into force.
    public static let policyLoaded = EventKind(rawValue: "policy-loaded")
    /// The record in force is missing from the shared directory.
    public static let recordMissing = EventKind(rawValue: "record-missing")
    /// A child took extra time under their allowance (`curfew extend`).
    public static let selfExtension = EventKind(rawValue: "self-extension")
    /// A session was ended.
    public static let sessionEnded = EventKind(rawValue: "session-ended")
    /// A session was locked.
    public static let sessionLocked = EventKind(rawValue: "session-locked")
    /// A child asked for more time.
    public static let timeRequested = EventKind(rawValue: "time-requested")
    /// Every process of a user was killed (KillUser).
    public static let userKilled = EventKind(rawValue: "user-killed")
    /// A user is no longer managed.
    public static let userUnmanaged = EventKind(rawValue: "user-unmanaged")
    /// A warning before a limit or bedtime.
    public static let warning = EventKind(rawValue: "warning")
}
