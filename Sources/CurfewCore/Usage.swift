/// Where a slice of used time is filed: a user's local day and hour, and an app (`""` is screen time).
public struct UsageKey: Sendable, Hashable, Comparable {
    public static let screen = ""

    public var user: String
    public var day: LocalDate
    /// The local hour 0...23 the slice started in (on a day with a repeated hour, both go to one bucket).
    public var hour: Int
    public var app: String

    public init(user: String, day: LocalDate, hour: Int, app: String) {
        self.user = user
        self.day = day
        self.hour = hour
        self.app = app
    }

    public static func < (lhs: UsageKey, rhs: UsageKey) -> Bool {
        (lhs.user, lhs.day.daysSinceEpoch, lhs.hour, lhs.app) < (rhs.user, rhs.day.daysSinceEpoch, rhs.hour, rhs.app)
    }
}

/// What the agent saw of one managed user during one tick.
public struct UserObservation: Sendable, Equatable {
    /// A session of theirs is active, unlocked and not idle (or, without logind, they have processes).
    public var sessionCounts: Bool
    /// The apps their processes belong to (catalog names, else executable basenames).
    public var runningApps: Set<String>

    public init(sessionCounts: Bool, runningApps: Set<String>) {
        self.sessionCounts = sessionCounts
        self.runningApps = runningApps
    }
}

/// The accounting rules (docs/design.md, "Counting"), applied to one elapsed interval. No clock of its own: the agent passes
/// the elapsed time (from the monotonic clock) and the instant the interval started.
public enum Accounting {
    /// Programs that are part of every login rather than something a child chose to run: their time is
    /// not reported as an app, and they never make always-allowed apps "not alone".
    public static let sessionPlumbing: Set<String> = [
        "systemd", "(sd-pam)", "sd-pam", "dbus-daemon", "dbus-broker", "dbus-broker-launch", "dbus-launch",
        "pipewire", "pipewire-pulse", "wireplumber", "pulseaudio", "gvfsd", "gvfsd-fuse", "gvfs-udisks2-volume-monitor",
        "at-spi-bus-launcher", "at-spi2-registryd", "xdg-desktop-portal", "xdg-document-portal",
        "xdg-permission-store", "gnome-keyring-daemon", "ssh-agent", "gpg-agent", "login", "su", "sudo", "runuser",
        "setpriv", "sshd", "agetty", "bash", "sh", "dash", "zsh", "fish", "tmux", "screen", "curfew",
    ]

    /// Shells: session plumbing for whether always-allowed apps are alone (every console or ssh login
    /// has one, and a child's reading app must not count as screen time because of it), but their time
    /// is the app `terminal`'s, like the system's other command-line tools (docs/design.md, "Apps").
    public static let shells: Set<String> = ["bash", "sh", "dash", "zsh", "fish"]

    /// The apps an interval's time is filed under: the running apps but session plumbing, and
    /// `terminal` while a shell runs.
    public static func countedApps(_ running: Set<String>) -> Set<String> {
        var apps = running.subtracting(sessionPlumbing)
        if !running.isDisjoint(with: shells) { apps.insert(AppCatalog.terminalApp) }
        return apps
    }

    /// The slices of time to add for one user and one interval.
    ///
    /// Screen time counts while a session counts, unless every app running is always allowed (and at
    /// least one is): time of always-allowed apps alone does not count. Each app's time counts while it
    /// runs during counted session time, always-allowed apps included (reports show them), a shell's
    /// as `terminal`.
    public static func slices(
        user: String, observation: UserObservation, policy: Policy, zone: ZoneRules, intervalStart: Instant,
        elapsedMilliseconds: Int64
    ) -> [(UsageKey, Int64)] {
        guard observation.sessionCounts, elapsedMilliseconds > 0 else { return [] }
        let (day, second) = zone.localTime(at: intervalStart)
        let hour = second / 3600
        let apps = observation.runningApps.subtracting(sessionPlumbing)
        var slices: [(UsageKey, Int64)] = []
        let allowed = apps.filter { policy.rule(for: $0) == .allow }
        let onlyAllowed = !allowed.isEmpty && allowed.count == apps.count
        if !onlyAllowed {
            slices.append((UsageKey(user: user, day: day, hour: hour, app: UsageKey.screen), elapsedMilliseconds))
        }
        for app in countedApps(observation.runningApps).sorted() {
            slices.append((UsageKey(user: user, day: day, hour: hour, app: app), elapsedMilliseconds))
        }
        return slices
    }

    /// How the wall clock moved against the monotonic and boot clocks over one tick (all in ms).
    /// A suspend advances the boot clock but not the monotonic one; a clock change moves only the wall.
    public static func classify(wallDelta: Int64, monotonicDelta: Int64, boottimeDelta: Int64, tolerance: Int64 = 2_000)
        -> ClockMovement
    {
        let suspended = boottimeDelta - monotonicDelta
        let jump = wallDelta - boottimeDelta
        return ClockMovement(
            suspendedMilliseconds: suspended > tolerance ? suspended : 0,
            wallJumpMilliseconds: abs(jump) > tolerance ? jump : 0)
    }
}

public struct ClockMovement: Sendable, Equatable {
    /// Time the machine slept; never counted.
    public var suspendedMilliseconds: Int64
    /// How far the wall clock was set forward (positive) or back (negative); never credited or debited.
    public var wallJumpMilliseconds: Int64
}

/// One stored bucket of usage: milliseconds of one app (`""` = screen time) in one local hour of a day.
public struct UsageRow: Sendable, Equatable {
    public var day: LocalDate
    public var hour: Int
    public var app: String
    public var milliseconds: Int64

    public init(day: LocalDate, hour: Int, app: String, milliseconds: Int64) {
        self.day = day
        self.hour = hour
        self.app = app
        self.milliseconds = milliseconds
    }
}

/// On the agent's socket a bucket is a list, `["2026-11-25", 14, "minecraft", 600000]`.
extension UsageRow: Codable {
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode("\(day)")
        try container.encode(hour)
        try container.encode(app)
        try container.encode(milliseconds)
    }

    public init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        let text = try container.decode(String.self)
        guard let day = try? LocalDate.parse(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a date: \(text)")
        }
        self.init(day: day, hour: try container.decode(Int.self), app: try container.decode(String.self), milliseconds: try container.decode(Int64.self))
        guard container.isAtEnd else { throw DecodingError.dataCorruptedError(in: container, debugDescription: "a bucket has 4 fields") }
    }
}
