import CurfewCore
import CurfewLinux
import Synchronization

/// What the agent's threads share: the policies in force, the sessions logind reported, and each
/// managed user's figures for today. Every access goes through one lock; nothing blocks inside it.
public final class AgentState: Sendable {
    public struct LiveUser: Sendable, Equatable {
        public var day: LocalDate
        /// Milliseconds used today by app, `""` = screen time (stored plus not yet flushed).
        public var totals: [String: Int64]
        public var running: Set<String>
        public var counting: Bool
    }

    struct Contents: Sendable {
        var policies: [String: Policy] = [:]
        var versions: [String: Int] = [:]
        var adjustments: [String: [LocalDate: DayAdjustment]] = [:]
        /// nil while logind is not available.
        var sessions: [LoginSession]? = nil
        var sessionsChanged = true
        var sleeping = false
        var live: [String: LiveUser] = [:]
        var stopping = false
    }

    let contents = Mutex(Contents())

    public init() {}

    public var policies: [String: Policy] { contents.withLock { $0.policies } }

    public func setPolicies(_ policies: [String: Policy], versions: [String: Int]) {
        contents.withLock {
            $0.policies = policies
            $0.versions = versions
        }
    }

    /// Extra time per managed user and local day, from the parents' grants.
    public var adjustments: [String: [LocalDate: DayAdjustment]] { contents.withLock { $0.adjustments } }

    public func setAdjustments(_ adjustments: [String: [LocalDate: DayAdjustment]]) {
        contents.withLock { $0.adjustments = adjustments }
    }

    public func version(of user: String) -> Int? { contents.withLock { $0.versions[user] } }

    public func setSessions(_ sessions: [LoginSession]?) {
        contents.withLock {
            $0.sessions = sessions
            $0.sessionsChanged = true
        }
    }

    public var sessions: [LoginSession]? { contents.withLock { $0.sessions } }

    public func setSleeping(_ sleeping: Bool) { contents.withLock { $0.sleeping = sleeping } }
    public var sleeping: Bool { contents.withLock { $0.sleeping } }

    public func setLive(_ live: [String: LiveUser]) { contents.withLock { $0.live = live } }
    public func live(of user: String) -> LiveUser? { contents.withLock { $0.live[user] } }

    /// Set once on shutdown; every thread loop checks it.
    public func stop() { contents.withLock { $0.stopping = true } }
    public var isStopping: Bool { contents.withLock { $0.stopping } }
}
