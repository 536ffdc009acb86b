/// How long editing commands wait for the family's computers by default.
///
/// A sync tool that gathers changes for a while before it sends them (Syncthing's file watcher delay)
/// holds a change up twice: the record on its way to the other computer, and that computer's
/// confirmation on its way back. The default wait covers both, plus a margin for the transfer and the
/// agent; it is never shorter than the 5 s docs/design.md gives.
public enum SyncWait {
    public static let minimumSeconds: Double = 5
    /// For the transfers, the other computer's agent, and the other side's scan of the folder.
    public static let marginSeconds: Double = 3
    /// The longest wait a flag may ask for, and the longest default.
    public static let maximumSeconds: Double = 3600

    /// The default wait when the shared folder is synced by a tool that sends a change
    /// `syncDelaySeconds` after it happened (nil: a local folder or one the tool does not delay).
    public static func defaultSeconds(syncDelaySeconds: Double?) -> Double {
        guard let delay = syncDelaySeconds, delay > 0, delay.isFinite else { return minimumSeconds }
        return min(maximumSeconds, max(minimumSeconds, 2 * delay + marginSeconds))
    }

    /// Whether a wait of `seconds` is too short for a sync delay of `syncDelaySeconds` (sync status warns).
    public static func isTooShort(_ seconds: Double, syncDelaySeconds: Double) -> Bool {
        seconds < 2 * syncDelaySeconds + marginSeconds
    }
}
