import CurfewCore
import CurfewLinux
import CurfewStore
import Foundation

/// How `curfewd` was started.
public struct AgentConfiguration: Sendable {
    public var stateDirectory: String
    public var sharedDirectory: String
    public var socketPath: String
    public var tickMilliseconds: Int64
    public var catalogDirectories: [String]
    /// nil: the system bus; "none": do not use logind.
    public var logindBusAddress: String?
    public var useProcessConnector: Bool
    /// How often records/ is rescanned even without inotify events.
    public var rescanMilliseconds: Int64
    /// Where children's terminals are (`/dev`) and their runtime directories with the session bus
    /// (`/run/user`); tests point these elsewhere.
    public var devRoot = "/dev"
    public var userRuntimeRoot = "/run/user"
    /// With no valid policy at all for a user this computer manages: false (the default) locks
    /// them out, true lets them in unrestricted.
    public var failOpen = false
    /// SIGTERM to SIGKILL when stopping an app.
    public var stopGraceMilliseconds: Int64 = 2_000
    /// How long past a child's zero systemd ends their sessions on its own (`RuntimeMaxSec` of their
    /// session scopes), should the agent not have.
    public var beltGraceMilliseconds: Int64 = SessionBelt.defaultGraceSeconds * 1000
    /// Between ticks, how often processes are checked for apps to stop when polling.
    public var enforcementPollMilliseconds: Int64 = 100
    /// This computer's id in the shared directory; nil: /etc/machine-id, else one made once in the
    /// state directory. Tests give several agents on one computer ids of their own.
    public var machineID: String? = nil
    /// How often this computer's usage summaries are written to the shared directory while they change.
    public var usageIntervalMilliseconds: Int64 = 30_000
    /// Events older than this many days are replaced by per-day counts (`AuditChain.summarise`).
    public var eventRetentionDays = AgentStateKeys.defaultEventRetentionDays
    /// What the agent calls now: the machine's clock unless a test moves it (`AgentClock`).
    public var clock = AgentClock.machine
    /// Whether execs of blocked apps are denied before they run (fanotify, `ExecGuard`) where the
    /// kernel and the agent's capabilities allow it; apps are stopped after they start either way.
    public var execGuard = true
    /// How long the exec guard may take to answer before its watchdog allows the exec.
    public var execGuardDeadlineMilliseconds: Int64 = 100
    /// A test's hook: the exec guard sleeps this long before deciding a managed user's exec.
    public var execGuardStallMilliseconds: Int64 = 0

    public init(
        stateDirectory: String, sharedDirectory: String, socketPath: String, tickMilliseconds: Int64 = 1_000,
        catalogDirectories: [String], logindBusAddress: String? = nil, useProcessConnector: Bool = true,
        rescanMilliseconds: Int64 = 30_000
    ) {
        self.stateDirectory = stateDirectory
        self.sharedDirectory = sharedDirectory
        self.socketPath = socketPath
        self.tickMilliseconds = tickMilliseconds
        self.catalogDirectories = catalogDirectories
        self.logindBusAddress = logindBusAddress
        self.useProcessConnector = useProcessConnector
        self.rescanMilliseconds = rescanMilliseconds
    }
}
