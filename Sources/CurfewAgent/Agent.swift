import CurfewCore
import CurfewLinux
import CurfewStore
import CurfewSync
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

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
    /// Between ticks, how often processes are checked for apps to stop when polling.
    public var enforcementPollMilliseconds: Int64 = 100
    /// This computer's id in the shared directory; nil: /etc/machine-id, else one made once in the
    /// state directory. Tests give several agents on one computer ids of their own.
    public var machineID: String? = nil
    /// How often this computer's usage summaries are written to the shared directory while they change.
    public var usageIntervalMilliseconds: Int64 = 30_000
    /// Events older than this many days are replaced by per-day counts (`AuditChain.summarise`).
    public var eventRetentionDays = AgentStateKeys.defaultEventRetentionDays

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

/// The agent: sets up the state directory and database, then runs its loops as services of one
/// `ServiceGroup`, each loop on a thread of its own (they block in poll(2), which must not hold up
/// Swift's cooperative threads).
public final class Agent: Sendable {
    public let configuration: AgentConfiguration
    public let state = AgentState()
    let store: StateStore
    let loader: PolicyLoader
    let catalog: AppCatalog
    let logger: Logger
    /// Users already reported as let in without a policy (the agent fails open).
    let failOpenReported = Mutex<Set<String>>([])
    /// Record files already logged as ignored: name -> the reason and the file's identity.
    let ignoredLogged = Mutex<[String: String]>([:])
    /// Accounts of uid 0 whose policy was ignored, so the event is recorded once per run.
    let superuserReported = Mutex<Set<String>>([])
    /// Who this computer is in the shared directory, and where its confirmations go.
    public let machine: MachineIdentity
    let confirmations: ConfirmationStore
    /// Serialises confirming; true once the confirmations believed written were checked on disk.
    let confirmationsChecked = Mutex(false)

    public init(configuration: AgentConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        try Files.makeDirectories(configuration.stateDirectory, mode: 0o700)
        let keyRing = KeyRing(stateDirectory: configuration.stateDirectory)
        let shared = SharedDirectory(
            path: configuration.sharedDirectory, pins: MachineKeyPins(stateDirectory: configuration.stateDirectory))
        try shared.create()
        let now = Int64(Date().timeIntervalSince1970)
        let (store, corruption) = try StateStore.openChecked(path: "\(configuration.stateDirectory)/curfew.db", now: now)
        self.store = store
        if let corruption {
            logger.critical(
                "the database was damaged; moved it aside and started a new one",
                metadata: ["reason": "\(corruption.reason)", "moved.to": "\(corruption.movedTo)"])
            try store.write { db in
                try EventLog.append(
                    AgentEvent(
                        time: now * 1000, kind: .databaseCorrupt,
                        message: "the database was damaged (\(corruption.reason)); it was moved to \(corruption.movedTo) and policy re-imported from the shared directory",
                        data: .object(JSONObject([("movedTo", .string(corruption.movedTo))]))), db)
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
        summariseOldEvents(now: now * 1000)
        // Until logind answers, no session is known to count.
        state.setSessions(usesLogind ? [] : nil)
    }

    /// Whether sessions come from systemd-logind; without it, time counts while a user has processes.
    var usesLogind: Bool {
        configuration.logindBusAddress != "none" && (configuration.logindBusAddress != nil || LogindClient.isAvailable())
    }

    /// Folds the records again; logs and records each user whose version changed.
    ///
    /// What is enforced never goes backwards: a user whose records can no longer be read, or fold to
    /// an older version (the newest file deleted), keeps the last good policy, which is kept in the
    /// database. A user this computer manages (`<state-dir>/managed-users`) with no policy at all is
    /// locked out (no screen time) unless the agent fails open. Only a valid removal record ends
    /// management.
    func reloadPolicies() throws {
        let previous = state.policies
        let (stored, newestStored, missingStored) = try store.read { db in
            (
                try AgentStateTable.all(prefix: AgentStateKeys.lastGoodPolicyPrefix, db),
                try AgentStateTable.all(prefix: AgentStateKeys.newestVersionPrefix, db).compactMapValues { Int($0) },
                try AgentStateTable.all(prefix: AgentStateKeys.recordMissingPrefix, db).compactMapValues { Int($0) }
            )
        }
        let lastGood = stored.compactMapValues(LastGoodPolicy.decode)
        var newestSeen = newestStored
        for (user, kept) in lastGood { newestSeen[user] = max(newestSeen[user] ?? 0, kept.version) }
        let result = try loader.load(
            previous: previous, newestSeen: newestSeen, logger: logger, now: Int64(Date().timeIntervalSince1970))
        let valid = result.scan?.valid ?? []
        let managed = ManagedUsers.read(stateDirectory: configuration.stateDirectory) ?? []
        // A record in force that changed while it was read keeps the policy (and version) it had.
        let folded = Dictionary(
            uniqueKeysWithValues: result.policies.map { user, policy in
                (user, (policy: policy, version: result.versions[user] ?? state.version(of: user) ?? 0))
            })
        let resolution = PolicyInForce.resolve(
            folded: folded, current: PolicyFold.currentByUser(valid),
            newestOnDisk: Dictionary(valid.map { ($0.user, $0.version) }, uniquingKeysWith: max), lastGood: lastGood,
            newestSeen: newestStored, managed: managed, failOpen: configuration.failOpen)
        var policies = resolution.entries.mapValues(\.policy)
        var versions = resolution.entries.mapValues(\.version)
        var events: [AgentEvent] = []
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for (user, entry) in resolution.entries.sorted(by: { $0.key < $1.key }) {
            switch entry.source {
            case .records:
                continue
            case .kept(let recordsVersion):
                guard state.version(of: user) != entry.version || previous[user] != entry.policy else { continue }
                let why = recordsVersion.map { "the records fold to an older version \($0)" } ?? "no valid policy can be loaded"
                logger.warning("keeping the last good policy", metadata: ["user": "\(user)", "version": "\(entry.version)"])
                events.append(
                    AgentEvent(
                        time: now, user: user, kind: .policyKept,
                        message: "\(why) for \(user); the last good policy (version \(entry.version)) stays in force",
                        data: .object(JSONObject([("version", .int(Int64(entry.version)))]))))
            case .failClosed:
                guard previous[user] != entry.policy else { continue }
                logger.critical("no valid policy for a managed user; failing closed", metadata: ["user": "\(user)"])
                events.append(
                    AgentEvent(
                        time: now, user: user, kind: .failClosed,
                        message: "no valid policy for \(user); no screen time and no logins until one arrives"))
            }
        }
        for user in resolution.failingOpen.sorted() where failOpenReported.withLock({ $0.insert(user).inserted }) {
            events.append(
                AgentEvent(
                    time: now, user: user, kind: .failOpen,
                    message: "no valid policy for \(user); not enforcing anything (the agent fails open)"))
        }
        // Root is never managed: a record for an account of uid 0 under another name (toor) is ignored.
        for user in policies.keys.sorted() where Accounts.isSuperuser(user) {
            policies[user] = nil
            versions[user] = nil
            if superuserReported.withLock({ $0.insert(user).inserted }) {
                logger.error("ignoring a policy for an account of uid 0", metadata: ["user": "\(user)"])
                events.append(
                    AgentEvent(
                        time: now, user: user, kind: .policyIgnored,
                        message: "\(user) is an account of uid 0, which is never managed; its policy is ignored"))
            }
        }
        // A concurrent edit merged into the version in force changes the policy, not the version.
        for (user, version) in versions.sorted(by: { $0.key < $1.key })
        where version > 0 && (state.version(of: user) != version || previous[user] != policies[user]) {
            let merged = result.merges[user].map { $0.mergedRecords.count > 1 } ?? false
            logger.info("policy in force", metadata: ["user": "\(user)", "version": "\(version)"])
            events.append(
                AgentEvent(
                    time: now, user: user, kind: .policyLoaded,
                    message: merged ? "policy version \(version) (merged from concurrent edits) is in force" : "policy version \(version) is in force",
                    data: .object(JSONObject([("version", .int(Int64(version)))]))))
        }
        for user in previous.keys where policies[user] == nil {
            events.append(AgentEvent(time: now, user: user, kind: .userUnmanaged, message: "\(user) is no longer managed"))
        }
        // Each ignored file is logged when first seen or when its verdict changes, not on every scan (a
        // folder of junk must not fill the journal); files gone from the folder are forgotten.
        let recordsPath = loader.shared.recordsPath
        let ignoredNow = Dictionary(
            result.ignored.map { ignored in
                // The verdict and the file's identity (inode, size, times): a rewritten file is news.
                let identity = (try? Files.identity("\(recordsPath)/\(ignored.name)")).map { "\($0.0)" } ?? "gone"
                return (ignored.name, "\(ignored.reason)\n\(identity)")
            }, uniquingKeysWith: { first, _ in first })
        let newlyIgnored = ignoredLogged.withLock { logged in
            defer { logged = ignoredNow }
            return result.ignored.filter { logged[$0.name] != ignoredNow[$0.name] }
        }
        for ignored in newlyIgnored {
            logger.warning("ignored record", metadata: ["record.id": "\(ignored.name)", "reason": "\(ignored.reason)"])
        }
        for grant in result.unannouncedGrants where policies[grant.user] != nil {
            events.append(Agent.grantEvent(grant, now: now))
        }
        // The record in force gone from the shared directory (deleted, or damaged): the version stays,
        // and the parent is told once, here and by `curfew sync status` and `policy show`.
        let missing = resolution.missing.filter { policies[$0.key] != nil }
        let newestOnDisk = Dictionary(valid.map { ($0.user, $0.version) }, uniquingKeysWith: max)
        for (user, version) in missing.sorted(by: { $0.key < $1.key }) where missingStored[user] != version {
            logger.error("the record in force is missing from the shared directory", metadata: ["user": "\(user)", "version": "\(version)"])
            let onDisk = newestOnDisk[user].map { "the newest there is version \($0)" } ?? "there is none of \(user) there"
            events.append(
                AgentEvent(
                    time: now, user: user, kind: .recordMissing,
                    message: "the record of version \(version) of \(user) is missing from the shared directory (\(onDisk)); version \(versions[user] ?? version) stays in force",
                    data: .object(JSONObject([("version", .int(Int64(version)))]))))
        }
        let newestNow = resolution.newestSeen
        state.setPolicies(policies, versions: versions)
        state.setAdjustments(result.adjustments.filter { policies[$0.key] != nil })
        try store.write { db in
            for (user, version) in newestNow where version != newestStored[user] {
                try AgentStateTable.set(AgentStateKeys.newestVersionPrefix + user, String(version), db)
            }
            for (user, version) in missing where missingStored[user] != version {
                try AgentStateTable.set(AgentStateKeys.recordMissingPrefix + user, String(version), db)
            }
            for user in missingStored.keys where missing[user] == nil {
                try AgentStateTable.remove(AgentStateKeys.recordMissingPrefix + user, db)
            }
            for (user, policy) in result.policies {
                let kept = stored[user].flatMap(LastGoodPolicy.decode)
                guard let version = result.versions[user], version > (kept?.version ?? 0) || (version == kept?.version && policy != kept?.policy)
                else { continue }
                try AgentStateTable.set(AgentStateKeys.lastGoodPolicyPrefix + user, LastGoodPolicy(version: version, policy: policy).encoded, db)
            }
            for user in resolution.removed where stored[user] != nil {
                try AgentStateTable.remove(AgentStateKeys.lastGoodPolicyPrefix + user, db)
            }
            for event in events { try EventLog.append(event, db) }
        }
        let enforced = Set(policies.keys).union(configuration.failOpen ? managed.subtracting(resolution.removed) : [])
        if enforced != managed {
            do { try ManagedUsers.write(enforced, stateDirectory: configuration.stateDirectory) } catch {
                logger.error("cannot write the list of managed users", metadata: ["error": "\(error)"])
            }
        }
        // After enforcement: confirmations never hold it up, and their failures never stop it.
        confirm(result, policies: policies, versions: versions)
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
        ]
    }

    func runTracker(_ stop: StopFlag) {
        let started = Int64(Date().timeIntervalSince1970 * 1000)
        recordEvent(AgentEvent(time: started, kind: .agentStarted, message: "curfewd \(Agent.version) started"))
        let tracker = Tracker(
            state: state, store: store, catalog: catalog, logger: logger,
            useProcessConnector: configuration.useProcessConnector,
            stopGraceMilliseconds: configuration.stopGraceMilliseconds,
            enforcementPollMilliseconds: configuration.enforcementPollMilliseconds)
        tracker.start()
        _ = SystemdNotify.send("READY=1\nSTATUS=tracking \(state.policies.count) managed users")
        logger.info(
            "curfewd ready",
            metadata: [
                "users": "\(state.policies.count)", "process.connector": "\(tracker.usesProcessConnector)",
                "state.dir": "\(configuration.stateDirectory)",
            ])
        tracker.run(tickMilliseconds: configuration.tickMilliseconds, until: stop)
        recordEvent(
            AgentEvent(time: Int64(Date().timeIntervalSince1970 * 1000), kind: .agentStopped, message: "curfewd stopped"))
    }

    /// Replaces events older than the retention period by per-day counts, keeping the hash chain; says
    /// so in an event. A broken chain is left as it is (and logged): summarising it would hide the break.
    func summariseOldEvents(now: Int64) {
        let days = configuration.eventRetentionDays
        let before = now - Int64(days) * 86_400_000
        do {
            try store.write { db in
                try AgentStateTable.set(AgentStateKeys.eventRetentionDays, "\(days)", db)
                let count = try AuditChain.summarise(before: before, zone: ZoneRules(TimeZone.current), db)
                guard count > 0 else { return }
                logger.info("summarised old events", metadata: ["count": "\(count)", "retention.days": "\(days)"])
                try EventLog.append(
                    AgentEvent(
                        time: now, kind: .eventsSummarised,
                        message: "\(count) events older than \(days) days were replaced by daily counts",
                        data: .object(JSONObject([("count", .int(Int64(count))), ("retentionDays", .int(Int64(days)))]))), db)
            }
        } catch {
            logger.error("cannot summarise old events", metadata: ["error": "\(error)"])
        }
    }

    func runPolicyWatch(_ stop: StopFlag) {
        let watch = try? DirectoryWatch(path: loader.shared.recordsPath)
        if watch == nil { logger.notice("cannot watch records/; rescanning every \(configuration.rescanMilliseconds / 1000) s") }
        var lastScan = ClockReading.now().monotonic
        var lastSummary = lastScan
        while !stop.isSet {
            if ClockReading.now().monotonic - lastSummary >= 3_600_000 {
                lastSummary = ClockReading.now().monotonic
                summariseOldEvents(now: Int64(Date().timeIntervalSince1970 * 1000))
            }
            // Asleep until records/ changes, the next rescan or summary is due, or the agent stops.
            let wait = max(0, min(lastScan + configuration.rescanMilliseconds, lastSummary + 3_600_000) - ClockReading.now().monotonic)
            var changed = false
            if let watch {
                changed = watch.waitForChange(timeoutMilliseconds: Int32(clamping: wait), orUntilReadable: [stop.descriptor])
            } else {
                stop.wait(milliseconds: wait)
            }
            if stop.isSet { break }
            let now = ClockReading.now().monotonic
            if changed || now - lastScan >= configuration.rescanMilliseconds {
                lastScan = now
                do { try reloadPolicies() } catch {
                    logger.error("cannot read the shared directory; keeping the policies in force", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    func runLogind(_ stop: StopFlag) {
        guard usesLogind else { return }
        var client: LogindClient? = nil
        var lastRefresh: Int64 = 0
        while !stop.isSet {
            do {
                // (Re)connect: a lost bus connection makes nextEvents throw.
                let current = try client ?? LogindClient(busAddress: configuration.logindBusAddress)
                if client == nil {
                    client = current
                    state.setSessions(try current.sessions())
                    lastRefresh = ClockReading.now().monotonic
                }
                // Asleep until logind says something, the next refresh is due, or the agent stops.
                let wait = max(0, lastRefresh + 30_000 - ClockReading.now().monotonic + 1)
                let events = try current.nextEvents(timeoutMilliseconds: Int32(clamping: wait), orUntilReadable: [stop.descriptor])
                var refresh = false
                for event in events {
                    switch event {
                    case .prepareForSleep(let sleeping):
                        state.setSleeping(sleeping)
                        logger.info(sleeping ? "suspending: not counting" : "resumed")
                    case .sessionNew, .sessionRemoved, .propertiesChanged:
                        refresh = true
                    }
                }
                let now = ClockReading.now().monotonic
                if refresh || now - lastRefresh > 30_000 {
                    state.setSessions(try current.sessions())
                    lastRefresh = now
                }
            } catch {
                logger.error("cannot talk to systemd-logind; retrying", metadata: ["error": "\(error)"])
                client = nil
                stop.wait(milliseconds: 1_000)
            }
        }
    }

    func runSocket(_ stop: StopFlag) {
        let server: PeerSocketServer
        do {
            try Files.makeDirectories(Files.parentDirectory(of: configuration.socketPath), mode: 0o755)
            server = try PeerSocketServer(path: configuration.socketPath)
        } catch {
            logger.error("cannot open the agent's socket; children cannot ask for their status", metadata: ["error": "\(error)"])
            return
        }
        defer { server.shutdown() }
        server.serve(
            busyAnswer: SocketProtocol.busy.canonicalString,
            report: { tally in
                // At most once a minute, and only when callers were turned away or cut off: a child's
                // flood must not become a flood of log lines.
                let worst = tally.troubleByUID.max { $0.value < $1.value }
                logger.notice(
                    "socket callers turned away or cut off",
                    metadata: [
                        "accepted": "\(tally.accepted)", "answered": "\(tally.answered)", "refused": "\(tally.refused)",
                        "evicted": "\(tally.evicted)", "expired": "\(tally.expired)", "oversized": "\(tally.oversized)",
                        "uid": "\(worst?.key ?? 0)", "uid.count": "\(worst?.value ?? 0)",
                    ])
            }, until: { stop.isSet }, stopDescriptor: stop.descriptor
        ) { line, caller in
            SocketProtocol.answer(request: line, callerUID: caller.uid, agent: self).canonicalString
        }
    }

    /// Tells systemd and every loop that the agent is stopping; the tracker then flushes.
    public func beginShutdown() {
        guard !state.isStopping else { return }
        _ = SystemdNotify.send("STOPPING=1")
        logger.info("stopping")
        state.stop()
    }

    /// Today's status of a managed user, from the agent's live figures.
    public func status(of user: String, now: Int64) -> UserStatus? {
        guard let policy = state.policies[user] else { return nil }
        let zone = Schedule.zone(for: policy)
        let live = state.live(of: user)
        return UserStatus.make(
            user: user, policy: policy, zone: zone, now: now, totals: live?.totals ?? [:], running: live?.running ?? [],
            counting: live?.counting ?? false, adjustments: state.adjustments[user] ?? [:],
            otherComputers: live?.otherComputers ?? 0)
    }

    public static let version = "0.1.0"
}

/// Runs one blocking loop of the agent on a thread of its own, as a `Service`. Graceful shutdown
/// (SIGTERM) tells every loop to stop; `run` returns when its loop has.
struct ThreadService: Service {
    let name: String
    let agent: Agent
    let stop = StopFlag()
    let body: @Sendable (Agent, StopFlag) -> Void

    init(name: String, agent: Agent, body: @escaping @Sendable (Agent, StopFlag) -> Void) {
        self.name = name
        self.agent = agent
        self.body = body
    }

    func run() async throws {
        await withGracefulShutdownHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let agent = self.agent
                let body = self.body
                let stop = self.stop
                let thread = Thread {
                    body(agent, stop)
                    // A loop with nothing to do (no logind, say) must not end the group early.
                    stop.wait(milliseconds: -1)
                    continuation.resume()
                }
                thread.name = "curfewd-\(name)"
                thread.start()
            }
        } onGracefulShutdown: { [stop, agent] in
            agent.beginShutdown()
            stop.set()
        }
    }
}

/// Tells one loop to finish. Its descriptor becomes readable when it is set and stays so: every
/// loop includes it in the poll(2) it sleeps in, so a stop wakes it at once and nothing polls a flag.
public final class StopFlag: Sendable {
    let flag = Mutex(false)
    let signal = EventSignal()
    public init() {}
    public func set() {
        flag.withLock { $0 = true }
        signal.signal()
    }
    public var isSet: Bool { flag.withLock { $0 } }
    /// Readable once set (never drained).
    public var descriptor: Int32 { signal.descriptor }

    /// Sleeps until set or `milliseconds` pass (negative: until set); true when set.
    @discardableResult
    public func wait(milliseconds: Int64) -> Bool {
        var remaining = milliseconds
        let start = ClockReading.now().monotonic
        while !isSet {
            _ = Readiness.wait([descriptor], timeoutMilliseconds: remaining)
            if milliseconds >= 0 {
                remaining = milliseconds - (ClockReading.now().monotonic - start)
                if remaining <= 0 { break }
            }
        }
        return isSet
    }
}
