/// CPU time a process used over the last few seconds: what tells a busy app from one that sleeps, so a
/// session's idle or locked hint (which the child can set themself) is weighed against it.
///
/// Busy means at least 2 % of one CPU over the last 5 s. A game, a video or a video call keeps a CPU
/// far busier than that even when it looks still (decoding, rendering, audio every few milliseconds);
/// an app that waits for input (an editor, a chat client, a browser with a static page) wakes a few
/// times a second and stays well under 1 %. 5 s smooths the bursts of an app that works in fits
/// (a page that loads) and is short enough that a real lock stops the counting within seconds.
public struct CPUWindow: Sendable, Equatable {
    public static let windowMilliseconds: Int64 = 5_000
    /// 2 % of one CPU, in CPU milliseconds per thousand milliseconds.
    public static let busyPerMille: Int64 = 20
    /// A window shorter than this says nothing yet (the CPU clock counts in 10 ms steps).
    public static let shortestMilliseconds: Int64 = 400

    /// (monotonic ms, CPU ms used since the process started), oldest first, within the window.
    var samples: [(at: Int64, cpu: Int64)] = []

    public init() {}

    public static func == (lhs: CPUWindow, rhs: CPUWindow) -> Bool {
        lhs.samples.map(\.at) == rhs.samples.map(\.at) && lhs.samples.map(\.cpu) == rhs.samples.map(\.cpu)
    }

    /// Adds a reading; drops readings older than the window (keeping the newest older one, so the
    /// window always spans up to 5 s).
    public mutating func add(at monotonic: Int64, cpuMilliseconds: Int64) {
        samples.append((monotonic, cpuMilliseconds))
        while samples.count > 2 && monotonic - samples[1].at >= Self.windowMilliseconds { samples.removeFirst() }
        if samples.count > 64 { samples.removeFirst(samples.count - 64) }
    }

    /// Whether the process used at least 2 % of a CPU over the span the readings cover.
    public var isBusy: Bool {
        guard let first = samples.first, let last = samples.last else { return false }
        let span = last.at - first.at
        guard span >= Self.shortestMilliseconds else { return false }
        return (last.cpu - first.cpu) * 1000 >= Self.busyPerMille * span
    }
}

/// The belt: how long systemd lets a child's session run (its scope's `RuntimeMaxSec`), so that the
/// session ends at zero even when the agent is stopped, has crashed or hangs.
public enum SessionBelt {
    /// Added to the time left, so that the agent (which warns, then ends or locks at zero) always acts
    /// first, and a deadline moved later by idle time is not rewritten every second.
    public static let defaultGraceSeconds: Int64 = 60

    /// How far ahead the belt of a session under the `lock` lockout is set while the agent keeps it
    /// locked (`deadline`): between one and two of these, moved on every horizon, so a locked session is
    /// never ended while the agent runs, and ends within two of these (plus the grace) once it does not.
    public static let lockedHorizonSeconds: Int64 = 180

    /// Seconds from now after which systemd is to end the user's sessions, before the grace; nil: no cap.
    /// The first block whose own lockout ends or locks sessions (`EnforcementPlan.sessionEndsIn`): a
    /// `network` bedtime with a `logout` limit caps the session at the limit, not at bedtime.
    /// - Parameters:
    ///   - onlyAllowedApps: the user runs always-allowed apps and nothing else that counts.
    public static func secondsLeft(plan: EnforcementPlan, onlyAllowedApps: Bool) -> Int64? {
        if onlyAllowedApps { return nil }
        return plan.sessionEndsIn.map { max(0, $0) }
    }

    /// The monotonic deadline (ms) for systemd at monotonic `now`; nil: no cap. The time left plus the
    /// grace; for a session the agent keeps locked (no time left under `lock`), the end of the next
    /// horizon after the current one, which moves in steps of a horizon: rewritten once per horizon
    /// (`needsUpdate`), always at least a horizon away while the agent runs.
    public static func deadline(plan: EnforcementPlan, onlyAllowedApps: Bool, now: Int64, graceMilliseconds: Int64) -> Int64? {
        guard let left = secondsLeft(plan: plan, onlyAllowedApps: onlyAllowedApps) else { return nil }
        if left == 0 && plan.blocked && plan.lockout == .lock {
            let horizon = lockedHorizonSeconds * 1000
            return (max(0, now) / horizon + 2) * horizon + graceMilliseconds
        }
        return now + left * 1000 + graceMilliseconds
    }

    /// Whether a cap set at `current` (a monotonic deadline, nil = none) must be rewritten for `wanted`:
    /// any move earlier (a limit lowered, bedtime moved), a cap added or removed, and a move later by
    /// more than the grace (a grant, or time that did not count). Moving later only past the grace keeps
    /// systemd's deadline at or after the true one and the rewrites (a reload on systemd 252) to at
    /// most one per grace period.
    public static func needsUpdate(current: Int64??, wanted: Int64?, graceMilliseconds: Int64) -> Bool {
        guard let current else { return true }  // never set by this agent
        switch (current, wanted) {
        case (nil, nil): return false
        case (nil, _), (_, nil): return true
        case (let set?, let want?): return want < set - 2_000 || want > set + graceMilliseconds
        }
    }
}
