import SystemPackage
import CurfewCore
import CurfewLinux
import CurfewStore
import CurfewSync
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// The agent: sets up the state directory and database, then runs its loops as services of one
/// `ServiceGroup`, each loop on a thread of its own (they block in poll(2), which must not hold up
/// Swift's cooperative threads).
public final class Agent: Sendable {
    public let configuration: AgentConfiguration
    /// What the agent calls now (the machine's clock unless a test moves it).
    public var clock: AgentClock { configuration.clock }
    public let state: AgentState
    let store: StateStore
    let loader: PolicyLoader
    let catalog: AppCatalog
    let logger: Logger
    /// Users already reported as let in without a policy (the agent fails open).
    let failOpenReported = Mutex<Set<String>>([])
    /// Whether publishing the list of managed users beside the socket last failed (logged once per failure).
    let publishFailed = Mutex<Bool>(false)
    /// Record files already logged as ignored: name -> the reason and the file's identity.
    let ignoredLogged = Mutex<[String: String]>([:])
    /// Accounts of uid 0 whose policy was ignored, so the event is recorded once per run.
    let superuserReported = Mutex<Set<String>>([])
    /// Who this computer is in the shared directory, and where its confirmations go.
    public let machine: MachineIdentity
    let confirmations: ConfirmationStore
    /// Serialises confirming; true once the confirmations believed written were checked on disk.
    let confirmationsChecked = Mutex(false)
    /// Executable identities, shared by the tracker (which reads files) and the exec guard (which
    /// only looks up what was read).
    let identities = FileIdentityCache()
    /// Denies execs of blocked apps before they run; nil when off or unavailable (`execGuardMode`).
    let execGuard: ExecGuard?
    public let execGuardMode: ExecGuardMode

    public init(configuration: AgentConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        let state = AgentState()
        self.state = state
        if configuration.execGuard {
            do {
                execGuard = try ExecGuard(
                    identities: identities, deadlineMilliseconds: configuration.execGuardDeadlineMilliseconds,
                    stallMilliseconds: configuration.execGuardStallMilliseconds, onDenial: { state.trackerWake.signal() })
                execGuardMode = .on
            } catch {
                execGuard = nil
                let why =
                    error.errno == .notPermitted
                    ? "fanotify needs CAP_SYS_ADMIN (and fanotify_init, fanotify_mark past any system call filter)"
                    : "the kernel has no fanotify permission events (FAN_OPEN_EXEC_PERM)"
                execGuardMode = .unavailable(reason: "\(why) (\(error))")
                logger.notice(
                    "running without the exec guard: blocked apps are stopped after they start",
                    metadata: ["reason": "\(why)", "error": "\(error)"])
            }
        } else {
            execGuard = nil
            execGuardMode = .off
            logger.info("exec guard off (--exec-guard off): blocked apps are stopped after they start")
        }
        try Files.makeDirectories(configuration.stateDirectory, mode: 0o700)
        let keyRing = KeyRing(stateDirectory: configuration.stateDirectory)
        let shared = SharedDirectory(path: configuration.sharedDirectory, trust: keyRing)
        try shared.create()
        let now = configuration.clock.wallSecond
        let (store, corruption) = try StateStore.openChecked(path: "\(configuration.stateDirectory)/curfew.db", now: now)
        self.store = store
        if let corruption {
            logger.critical(
                "the database was damaged; moved it aside and started a new one",
                metadata: ["reason": "\(corruption.reason)", "moved.to": "\(corruption.movedTo)"])
            try store.write { db in
                try EventLog.append(
                    AgentEvent(
                        time: now, kind: .databaseCorrupt,
                        message: "the database was damaged (\(corruption.reason)); it was moved to \(corruption.movedTo) and policy re-imported from the shared directory",
                        details: EventDetails.DatabaseMoved(movedTo: corruption.movedTo)), db)
            }
        }
        self.loader = PolicyLoader(shared: shared, keyRing: keyRing, store: store)
        self.machine = try MachineIdentity.load(stateDirectory: configuration.stateDirectory, override: configuration.machineID)
        self.confirmations = ConfirmationStore(shared: shared, machine: machine)
        // Children's usage and the parent's key are root's alone: a directory or file another user can
        // read (made by hand, by an older version, or with a loose umask) is tightened, and said so.
        for change in try StatePermissions.secure(configuration.stateDirectory) {
            logger.warning("tightened a mode in the state directory", metadata: ["path": "\(change.path)", "change": "\(change)"])
        }
        let machineID = machine.id
        try store.write { try AgentStateTable.set(AgentStateKeys.machineID, machineID, $0) }
        self.catalog = try CatalogFiles.load(directories: configuration.catalogDirectories)
        try reloadPolicies()
        summariseOldEvents(now: now)
        // Until logind answers, no session is known to count.
        state.setSessions(usesLogind ? [] : nil)
    }

    /// Whether sessions come from systemd-logind; without it, time counts while a user has processes.
    var usesLogind: Bool {
        configuration.logindBusAddress != "none" && (configuration.logindBusAddress != nil || LogindClient.isAvailable())
    }

    func recordEvent(_ event: AgentEvent) {
        do {
            try store.write { try EventLog.append(event, $0) }
        } catch {
            logger.error("cannot record an event", metadata: ["kind": "\(event.kind)", "error": "\(error)"])
        }
    }

    /// The services `curfewd` runs.
    public func services() -> [any Service] {
        [
            // ServiceGroup stops services in reverse order: the tracker last, so it flushes last.
            ThreadService(name: "tracker", agent: self) { agent, stop in agent.runTracker(stop) },
            ThreadService(name: "policy-watch", agent: self) { agent, stop in agent.runPolicyWatch(stop) },
            ThreadService(name: "logind", agent: self) { agent, stop in agent.runLogind(stop) },
            ThreadService(name: "socket", agent: self) { agent, stop in agent.runSocket(stop) },
            ThreadService(name: "enforcer", agent: self) { agent, stop in Enforcer(agent: agent).run(until: stop) },
            ThreadService(name: "usage-exchange", agent: self) { agent, stop in UsageExchange(agent: agent).run(until: stop) },
        ] + execGuardServices()
    }

    /// The exec guard's thread, its watchdog and its identifier (which reads the files the guard met
    /// without knowing them, off the guard's thread), when the guard is on.
    func execGuardServices() -> [any Service] {
        guard execGuard != nil else { return [] }
        return [
            ThreadService(name: "exec-guard", agent: self) { agent, stop in agent.runExecGuard(stop) },
            ThreadService(name: "exec-watchdog", agent: self) { agent, stop in
                agent.execGuard?.runWatchdog(until: stop.descriptor, logger: agent.logger)
            },
            ThreadService(name: "exec-identifier", agent: self) { agent, stop in agent.execGuard?.runIdentifier(until: stop.descriptor) },
        ]
    }

    /// Marks every mounted filesystem, then answers execs until the agent stops; the marks go with it.
    func runExecGuard(_ stop: StopFlag) {
        guard let execGuard else { return }
        let (marked, failed) = execGuard.markMounts()
        for (point, error) in failed {
            logger.notice("exec guard: cannot mark a mount; execs from it are stopped after they start", metadata: ["mount": "\(point)", "error": "\(error)"])
        }
        logger.info(
            "exec guard on: execs of blocked apps are denied before they run",
            metadata: ["mounts": "\(marked.count)", "deadline.ms": "\(configuration.execGuardDeadlineMilliseconds)"])
        execGuard.run(until: stop.descriptor, logger: logger)
        logger.info("exec guard stopped: marks removed")
    }

    /// Tells systemd and every loop that the agent is stopping; the tracker then flushes.
    public func beginShutdown() {
        guard !state.isStopping else { return }
        _ = SystemdNotify.send("STOPPING=1")
        logger.info("stopping")
        state.stop()
    }

    /// Today's status of a managed user, from the agent's live figures.
    public func status(of user: String, now: Instant) -> UserStatus? {
        guard let policy = state.policies[user] else { return nil }
        let zone = Schedule.zone(for: policy)
        let live = state.live(of: user)
        return UserStatus.make(
            user: user, policy: policy, zone: zone, now: now, totals: live?.totals ?? [:], running: live?.running ?? [],
            counting: live?.counting ?? false, adjustments: state.adjustments[user] ?? [:],
            otherComputers: live?.otherComputers ?? 0,
            weekMilliseconds: policy.weeklyLimitMinutes == nil ? nil : live.map { $0.weekBeforeToday + ($0.totals[UsageKey.screen] ?? 0) },
            breakClock: live?.breakClock)
    }

    public static let version = "0.1.0"
}
