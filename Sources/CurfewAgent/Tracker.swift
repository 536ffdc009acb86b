import CurfewCore
import CurfewLinux
import CurfewStore
import Foundation
import Logging

/// Counts each managed user's screen and app time, tick by tick, and keeps it in SQLite.
///
/// Owned by one thread: the process sampler and the process connector are not shared. Elapsed time
/// comes from CLOCK_MONOTONIC, which stops during suspend; the wall clock only picks the local day
/// and hour. Each interval is credited to what was observed at its start.
public final class Tracker {
    let state: AgentState
    let store: StateStore
    let catalog: AppCatalog
    let logger: Logger
    public let sampler: ProcessSampler
    let identities: FileIdentityCache
    let connector: ProcessConnector?
    let flushInterval: Int64
    var systemZone: ZoneRules { .system }

    /// Executable identities (content hash, build-id) -> the apps that claimed them, learnt from
    /// literal catalog paths, from processes a catalog app matched by executable path, and from
    /// programs a `--by-name` rule named, so a renamed, copied or modified binary is still that app.
    var claims = IdentityClaims()
    /// The claims' generation last written to the database.
    var persistedClaimsGeneration: UInt64 = 0
    /// The identities of the interpreters and loaders installed on the system (the catalog's globs,
    /// looked up in the usual directories): a renamed copy of one is one too, and never claimed.
    let interpreterIdentities: Set<String>
    let loaderIdentities: Set<String>
    /// Each managed user's app rules, by uid: which of several apps claiming a binary is the strictest.
    var rulesByUID: [UInt32: [String: AppRuleKind]] = [:]
    /// Changes with the claims and the rules: a cached app is only good for the generation it was found in.
    var matchGeneration: UInt64 = 0
    /// The app of each process, as long as the process is the same one with the same facts (an exec
    /// keeps the PID and start time but changes the executable: a launcher becomes the game).
    var appOfProcess: [Int32: (startTime: UInt64, facts: ProcessFacts, generation: UInt64, app: String, counted: String)] = [:]
    /// Managed users' subordinate uid ranges (`/etc/subuid`) and the uid each belongs to: processes in
    /// a child's user namespaces run under them and are the child's. Read again every 30 s.
    var subordinateUIDs: [(range: SubordinateRange, owner: UInt32)] = []
    var subordinatesReadAt: Int64? = nil
    var subordinateFile = "/etc/subuid"
    /// What `followManagedUIDs` last gave the sampler: the managed uids and the subordinate ranges.
    var followedKey: [UInt32] = []
    /// At most this many subordinate uids are followed in all (four children's usual 65,536 each).
    static let maxSubordinateUIDs: UInt32 = 1 << 18
    /// Program file name -> desktop entry id, from the system's desktop entries (read at start).
    let desktopPrograms: [String: String]
    var pending: [UsageKey: Int64] = [:]
    var pendingEvents: [AgentEvent] = []
    var last: ClockReading
    var lastFlush: Int64
    var observations: [String: UserObservation] = [:]
    var live: [String: AgentState.LiveUser] = [:]
    var logindWarned = false
    var accounts = AccountCache()
    var lastFullScan: Int64 = 0
    /// Stops blocked and limited apps (and, without logind, a logged-out user's processes).
    let stopper: ProcessStopper
    /// How often, between ticks, processes are checked for apps to stop when the process connector
    /// is not available: a blocked app dies within this much of its exec, plus the time to parse it.
    let enforcementPollMilliseconds: Int64
    /// Whether, at the last pass, some managed user had app rules or was blocked: only then are
    /// processes checked between ticks.
    var mayStopSomething = false
    var enforcedUIDs = Set<UInt32>()
    /// Milliseconds within which systemd wants to hear from the agent (WatchdogSec), if it does.
    let watchdogInterval: Int64? = SystemdNotify.watchdogInterval().map(\.wholeMilliseconds)
    var watchdog: Bool { watchdogInterval != nil }
    /// Per user: the budget of `app-stopped` events (and log lines) their relaunches may cause, and
    /// the processes stopped past it, per app, not yet recorded.
    var stopRecords: [String: (budget: EventBudget, unrecorded: [String: Int])] = [:]
    /// CPU readings of managed processes, while a session of their user claims to be idle or locked.
    var cpuWindows: [ProcessRef: CPUWindow] = [:]
    /// Sessions whose idle or locked claim was not believed, and the claim ("idle", "locked"): the
    /// event is recorded once per claim.
    var ignoredClaims: [String: String] = [:]
    /// When (monotonic ms, the tracker's clock) startup's pages of the program
    /// are given back; nil once done.
    var releaseProgramPagesAt: Int64? = nil
    /// 60 app-stopped events at once, then one a minute, per user: a child relaunching a blocked app
    /// in a loop adds at most about 120 events the first hour and 60 an hour after, each stop still
    /// counted (in the events' `unrecordedBefore` and in summary events).
    static let stopEventBurst = 60
    static let stopEventRefillMilliseconds: Int64 = 60_000
    /// Apps kept apart in the count of unrecorded stops; more are counted under `otherApps`.
    static let maxUnrecordedApps = 32

    /// Denies execs of what must not run before it runs; fed `ExecRules` after every decision.
    let execGuard: ExecGuard?
    /// What was last given to the exec guard (the rules but the catalog, which does not change).
    var publishedExecRules: (users: [UInt32: ExecRules.User], subordinates: [UInt32], claims: UInt64)? = nil

    /// The clocks; tests pass their own to move the wall clock.
    let clock: () -> ClockReading

    public init(
        state: AgentState, store: StateStore, catalog: AppCatalog, logger: Logger, useProcessConnector: Bool,
        flushIntervalMilliseconds: Int64 = 2_000, stopGraceMilliseconds: Int64 = 2_000,
        enforcementPollMilliseconds: Int64 = 100, identities: FileIdentityCache = FileIdentityCache(), execGuard: ExecGuard? = nil,
        clock: @escaping () -> ClockReading = ClockReading.now
    ) {
        self.execGuard = execGuard
        self.stopper = ProcessStopper(graceMilliseconds: stopGraceMilliseconds)
        self.enforcementPollMilliseconds = enforcementPollMilliseconds
        self.clock = clock
        self.state = state
        self.store = store
        self.catalog = catalog
        self.logger = logger
        self.identities = identities
        self.sampler = ProcessSampler(identities: identities)
        (interpreterIdentities, loaderIdentities) = Self.installedInterpreters(catalog.interpreters, identities: identities)
        desktopPrograms = DesktopEntries.load()
        var connector: ProcessConnector? = nil
        if useProcessConnector {
            do {
                connector = try ProcessConnector.open()
            } catch {
                logger.notice("process connector unavailable, polling /proc every tick", metadata: ["error": "\(error)"])
            }
        }
        self.connector = connector
        self.flushInterval = flushIntervalMilliseconds
        self.last = clock()
        self.lastFlush = last.monotonic
        let interpreters = catalog.interpreters
        let loaderIdentities = self.loaderIdentities
        sampler.isLoader = { path, identity in
            interpreters.isLoader(path, owner: identity?.owner) || (identity?.all.contains(where: loaderIdentities.contains) ?? false)
        }
        for definition in catalog.definitions {
            for path in definition.executablePaths where !path.contains(where: { "*?[".contains($0) }) {
                guard let identity = identities.identities(ofFile: path),
                    !interpreters.isInterpreter(path, owner: identity.owner), !identity.all.contains(where: interpreterIdentities.contains)
                else { continue }
                learn(identity.all, app: definition.name, scope: identity.owner == 0 ? .everyone : .user(identity.owner))
            }
        }
        // What earlier runs learnt (a renamed --by-name copy stays blocked after a restart).
        if let kept = try? store.read({ try AgentStateTable.get(AgentStateKeys.identityClaims, $0) }) {
            claims.restore(kept)
            matchGeneration &+= 1
        }
        persistedClaimsGeneration = claims.generation
    }

    /// Directories where interpreters and loaders are installed.
    static let interpreterDirectories = [
        "/bin", "/usr/bin", "/usr/local/bin", "/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu", "/usr/lib/i386-linux-gnu",
    ]

    /// The identities of the files in `interpreterDirectories` (and each JVM's `bin`) whose names the
    /// catalog lists as interpreters, and those of its loaders.
    static func installedInterpreters(_ set: InterpreterSet, identities: FileIdentityCache) -> (Set<String>, Set<String>) {
        var interpreters = Set<String>()
        var loaders = Set<String>()
        guard !set.interpreters.isEmpty || !set.loaders.isEmpty else { return ([], []) }
        let files = FileManager.default
        var directories = interpreterDirectories
        for jvm in (try? files.contentsOfDirectory(atPath: "/usr/lib/jvm")) ?? [] { directories.append("/usr/lib/jvm/\(jvm)/bin") }
        for directory in directories {
            for name in (try? files.contentsOfDirectory(atPath: directory)) ?? [] where set.isInterpreter(name) {
                // Root's files only: a user's file in /usr/local/bin is not the system's interpreter.
                guard let identity = identities.identities(ofFile: "\(directory)/\(name)"), identity.owner == 0 else { continue }
                interpreters.formUnion(identity.all)
                if set.isLoader(name) { loaders.formUnion(identity.all) }
            }
        }
        return (interpreters, loaders)
    }

    /// Records that `app` claims `identities`; a second app claiming one is logged once.
    func learn(_ identities: [String], app: String, scope: IdentityClaims.Scope) {
        let before = claims.generation
        for conflict in claims.claim(identities, app: app, scope: scope) {
            logger.notice(
                "several apps claim one executable; the strictest rule applies",
                metadata: ["identity": "\(conflict.identity)", "apps": "\(conflict.apps.joined(separator: ","))"])
        }
        if claims.generation != before { matchGeneration &+= 1 }
    }

    /// Takes each managed user's app rules from `policies`.
    func refreshRules(_ policies: [String: Policy]) {
        var table: [UInt32: [String: AppRuleKind]] = [:]
        for (user, policy) in policies {
            guard let uid = accounts[user]?.uid else { continue }
            var rules: [String: AppRuleKind] = [:]
            for rule in policy.apps where rules[rule.app] == nil { rules[rule.app] = rule.rule }
            table[uid] = rules
        }
        if table != rulesByUID {
            rulesByUID = table
            matchGeneration &+= 1
        }
    }

    public var usesProcessConnector: Bool { connector != nil }

    /// Lists /proc (with the connector, reading fully only managed users' processes) and makes the
    /// first observation; `run` follows.
    public func start() {
        followManagedUIDs()
        _ = sampler.sample()
        lastFullScan = clock().monotonic
        observe()
        // What must not run is stopped from the start (a blocked app already running, bedtime after
        // a restart), and this tells the loop whether to watch processes between ticks.
        enforceApps()
        publishExecRules()
    }

    /// Call `start()` first.
    ///
    /// Ticks every `tickMilliseconds` while some managed user is active (counted, or with processes)
    /// or without the process connector. Otherwise nothing can be credited, and it sleeps until
    /// something could change that: a uid change reported by the connector (the only way a process of
    /// a user with none appears; the kernel drops every other event meanwhile, see
    /// `ProcessConnector.passOnlyUIDChanges`), a change of sessions, policies or grants
    /// (`AgentState.trackerWake`), pending usage to flush, a stop to finish, the watchdog, or a
    /// minute at most (the day's figures of a status roll over).
    public func run(tickMilliseconds: Int64, until stop: StopFlag) {
        let wake = state.trackerWake
        releaseProgramPagesAt = clock().monotonic + Self.releaseProgramPagesAfterMilliseconds
        while !stop.isSet {
            let due = nextTick(tickMilliseconds: tickMilliseconds)
            var now = clock().monotonic
            var tickNow = false
            while now < due && !stop.isSet && !tickNow {
                var wait = due - now
                if stopper.pending > 0 { wait = min(wait, 100) }
                if connector == nil && mayStopSomething { wait = min(wait, enforcementPollMilliseconds) }
                // A loader that has not mapped its program yet does so within microseconds: look again soon.
                if !sampler.unresolvedLoaders.isEmpty { wait = min(wait, 2) }
                wait = max(1, wait)
                // Counting only looks at processes at the tick: unless an app may have to be stopped
                // at its exec, or nobody is active (then only uid changes come), the connector's
                // events (anyone's forks on the machine) wait in its socket for the next tick.
                let listening = uidFilterOn || mayStopSomething
                if let connector, listening {
                    do {
                        let events = try connector.next(
                            timeoutMilliseconds: Int32(clamping: wait), orUntilReadable: [stop.descriptor, wake.descriptor])
                        apply(events)
                        if concernsEnforcedUser(events) { enforceApps() }
                        if uidFilterOn && concernsManagedUser(events) { tickNow = true }
                    } catch {
                        logger.warning("process connector failed; polling", metadata: ["error": "\(error)"])
                        stop.wait(milliseconds: wait)
                    }
                } else {
                    _ = Readiness.wait([stop.descriptor, wake.descriptor], timeoutMilliseconds: wait)
                    // Polling: new processes show up in the cheap /proc check, execs in the readlink
                    // of each managed user's processes; only while something may have to be stopped.
                    if connector == nil && mayStopSomething {
                        _ = sampler.sample()
                        enforceApps()
                    }
                }
                if !sampler.unresolvedLoaders.isEmpty && sampler.lookAgainAtLoaders() && mayStopSomething { enforceApps() }
                if wake.drain() { tickNow = true }
                recordDeniedExecs()
                if stopper.pending > 0 { _ = stopper.poll(nowMonotonic: clock().monotonic) }
                now = clock().monotonic
            }
            applyPendingEvents()
            tick()
            followActivity()
            if let at = releaseProgramPagesAt, clock().monotonic >= at {
                releaseProgramPagesAt = nil
                releaseProgramPages()
            }
        }
        tick()
        flush(force: true)
    }

    /// Startup is over this long after the tracker's loop begins (the other loops, the socket and the
    /// first scan of records start within a second or two); then the pages of the program that startup
    /// brought in are given back (`ProgramPages`), at a tick of its own when none comes sooner.
    static let releaseProgramPagesAfterMilliseconds: Int64 = 5_000

    func releaseProgramPages() {
        do {
            let release = try ProgramPages.release()
            logger.info(
                "released the program's startup pages",
                metadata: [
                    "mappings": "\(release.mappings)", "rss.before.kib": "\(release.residentBeforeKiB)",
                    "rss.after.kib": "\(release.residentAfterKiB)",
                ])
        } catch {
            logger.notice("cannot release the program's startup pages", metadata: ["error": "\(error)"])
        }
    }

    /// Whether, at the last observation, a managed user counted or had a process: only then is
    /// there anything to credit, and ticks are needed.
    var anyoneActive: Bool {
        observations.values.contains { $0.sessionCounts || !$0.runningApps.isEmpty }
    }

    /// Whether the connector passes only uid changes (nobody managed is active).
    var uidFilterOn = false

    /// When the next tick is due (monotonic ms).
    func nextTick(tickMilliseconds: Int64) -> Int64 {
        let regular = last.monotonic + tickMilliseconds
        guard connector != nil, !anyoneActive, stopper.pending == 0 else { return regular }
        // Idle: at the latest in a minute, sooner for the flush and the watchdog.
        var due = last.monotonic + 60_000
        if !pending.isEmpty || !pendingEvents.isEmpty { due = min(due, lastFlush + flushInterval) }
        if stopRecords.values.contains(where: { !$0.unrecorded.isEmpty }) { due = min(due, last.monotonic + Self.stopEventRefillMilliseconds) }
        if let watchdogInterval { due = min(due, last.monotonic + watchdogInterval / 2) }
        if let releaseProgramPagesAt { due = min(due, releaseProgramPagesAt) }
        return max(regular, due)
    }

    /// Turns the connector's uid-change filter on when nobody managed is active, off (listing /proc
    /// for what it dropped) when someone is.
    func followActivity() {
        guard let connector else { return }
        let idle = !anyoneActive && stopper.pending == 0
        guard idle != uidFilterOn else { return }
        do {
            try connector.passOnlyUIDChanges(idle)
            uidFilterOn = idle
        } catch {
            logger.warning("cannot filter the process connector's events", metadata: ["error": "\(error)"])
            return
        }
        if !idle {
            // Forks, execs and exits were dropped while the filter was on.
            sampler.requireListing()
            _ = sampler.sample()
            lastFullScan = clock().monotonic
            observe()
            enforceApps()
        }
    }

    /// Whether a batch of connector events names a process of a managed user (by its uid now).
    func concernsManagedUser(_ events: [ProcessEvent]) -> Bool {
        let uids = Set(state.policies.keys.compactMap { accounts[$0]?.uid })
        return !uids.isEmpty && concerns(events, uids: uids)
    }

    /// Whether a batch of connector events started or changed a process of one of `uids` (by its uid
    /// now, a subordinate uid counting as its owner's), or overran so that nobody can tell.
    func concerns(_ events: [ProcessEvent], uids: Set<UInt32>) -> Bool {
        let cached = sampler.cached
        for event in events {
            switch event {
            case .fork(_, let pid), .exec(let pid), .uidChange(let pid):
                if let uid = cached[pid]?.uid, uids.contains(ownerUID(uid)) { return true }
            case .overrun:
                return true
            case .exit:
                continue
            }
        }
        return false
    }

    /// Reads what the process connector queued, without waiting (what `run` does between ticks; the
    /// benchmark calls it to tick as the agent does).
    public func applyPendingEvents() {
        guard let connector else { return }
        // Each call reads at most 256 datagrams; a burst can leave more.
        for _ in 0..<64 {
            guard let events = try? connector.next(timeoutMilliseconds: 0), !events.isEmpty else { return }
            apply(events)
        }
    }

    /// With the process connector, only managed users' processes are read fully (the sampler's
    /// `interestingUIDs`): the forks and execs of everyone else cost no reading at all.
    func followManagedUIDs() {
        guard connector != nil else { return }
        accounts.refresh(for: state.policies.keys, monotonic: clock().monotonic)
        refreshSubordinateUIDs()
        let managed = Set(state.policies.keys.compactMap { accounts[$0]?.uid })
        // Subordinate ranges make the set large (65,536 uids a child): it is rebuilt only when the
        // managed uids or the ranges change, not at every tick.
        let key = managed.sorted() + [UInt32.max] + subordinateUIDs.flatMap { [$0.range.start, $0.range.count] }
        guard key != followedKey else { return }
        followedKey = key
        var uids = managed
        for (range, _) in subordinateUIDs { uids.formUnion(range.start..<(range.start + range.count)) }
        if sampler.interestingUIDs != uids {
            sampler.interestingUIDs = uids
            _ = sampler.sample()
            lastFullScan = clock().monotonic
        }
    }

    /// Reads `/etc/subuid` (at most every 30 s) for the ranges of managed users.
    func refreshSubordinateUIDs() {
        let now = clock().monotonic
        guard subordinatesReadAt.map({ now - $0 > 30_000 }) ?? true else { return }
        subordinatesReadAt = now
        var owners: [String: UInt32] = [:]
        for user in state.policies.keys {
            if let uid = accounts[user]?.uid {
                owners[user] = uid
                owners[String(uid)] = uid
            }
        }
        let text = (try? String(contentsOfFile: subordinateFile, encoding: .utf8)) ?? ""
        var total: UInt32 = 0
        subordinateUIDs = SubordinateRange.parse(text).compactMap { range in
            // `maxSubordinateUIDs` in all: the set the sampler follows stays small.
            guard let owner = owners[range.owner], range.count <= Self.maxSubordinateUIDs - total else { return nil }
            total += range.count
            return (range, owner)
        }
    }

    /// The managed user a uid belongs to: itself, or the owner of the subordinate range holding it.
    func ownerUID(_ uid: UInt32) -> UInt32 {
        guard !subordinateUIDs.isEmpty else { return uid }
        for (range, owner) in subordinateUIDs where range.contains(uid) { return owner }
        return uid
    }

    /// Whether a batch of connector events started or changed a process of a user whose apps may
    /// have to be stopped.
    func concernsEnforcedUser(_ events: [ProcessEvent]) -> Bool {
        mayStopSomething && concerns(events, uids: enforcedUIDs)
    }

    func apply(_ events: [ProcessEvent]) {
        guard !events.isEmpty else { return }
        for event in events {
            if case .exit(let pid) = event { appOfProcess[pid] = nil }
        }
        _ = sampler.apply(events)
    }

    /// Credits the interval since the last tick, then observes the state for the next one.
    public func tick() {
        let now = clock()
        let movement = Accounting.classify(
            wallDelta: (now.wall - last.wall).wholeMilliseconds, monotonicDelta: now.monotonic - last.monotonic,
            boottimeDelta: now.boottime - last.boottime)
        let elapsed = max(0, now.monotonic - last.monotonic)
        if movement.wallJumpMilliseconds != 0 {
            let seconds = movement.wallJumpMilliseconds / 1000
            logger.notice("wall clock jumped; no time credited or lost", metadata: ["seconds": "\(seconds)"])
            pendingEvents.append(
                AgentEvent(
                    time: now.wall, kind: .clockJump,
                    message: "the wall clock was set \(seconds >= 0 ? "forward" : "back") by \(abs(seconds)) s; no time was credited or lost",
                    details: EventDetails.ClockJump(seconds: seconds)))
        }
        // The interval started `elapsed` ago in wall time as it is now (a jump does not move it).
        let intervalStart = now.wall - .milliseconds(elapsed)
        let policies = state.policies
        // A grant that ends a break: the stretch starts again from nothing.
        for user in state.takeBreaksEnded() { live[user]?.breakClock.endBreak() }
        if !state.sleeping {
            for (user, observation) in observations {
                guard let policy = policies[user] else { continue }
                var screen: Int64 = 0
                for (key, milliseconds) in Accounting.slices(
                    user: user, observation: observation, policy: policy, zone: zone(for: policy),
                    intervalStart: intervalStart, elapsedMilliseconds: elapsed)
                {
                    pending[key, default: 0] += milliseconds
                    if live[user]?.day == key.day { live[user]?.totals[key.app, default: 0] += milliseconds }
                    if key.app == UsageKey.screen { screen += milliseconds }
                }
                // Breaks: screen time in this interval continues the stretch; none is a pause.
                live[user]?.breakClock.advance(
                    by: elapsed, counting: screen > 0, breakLength: policy.breaks.map { Int64($0.lengthMinutes) * 60 })
            }
        }
        last = now
        if connector == nil || uidFilterOn || now.monotonic - lastFullScan > 30_000 {
            _ = sampler.sample()
            lastFullScan = now.monotonic
        }
        // A loader that has not mapped its program within its quick looks is looked at every tick.
        if !sampler.slowLoaders.isEmpty { sampler.lookAgainAtSlowLoaders() }
        observe()
        enforceApps()
        publishExecRules()
        if !stopRecords.isEmpty { recordUnrecordedStops(now: now.wall, monotonic: now.monotonic) }
        flush(force: false)
        if watchdog {
            let counting = live.values.filter(\.counting).count
            _ = SystemdNotify.send("WATCHDOG=1\nSTATUS=tracking \(live.count) managed users, \(counting) counting")
        }
    }

    func zone(for policy: Policy) -> ZoneRules { Schedule.zone(for: policy, system: systemZone) }

    /// The apps managed users run, by uid, as of the sampler's `changes` and the managed uids.
    var appsByUID: (changes: UInt64, generation: UInt64, uids: Set<UInt32>, apps: [UInt32: Set<String>])? = nil
    /// Without the process connector, how many managed processes have their executable checked each
    /// tick (one readlink each): all of them up to this many, else in turn, so a launcher's exec among
    /// thousands of processes is seen within a few ticks and a tick stays well under a millisecond.
    public var execChecksPerTick = 128
    var execCheckCursor = 0

    /// Polling: re-reads the processes of `uids` whose executable changed, `execChecksPerTick` of
    /// them, continuing where the last call stopped.
    func checkForExecs(uids: Set<UInt32>) {
        guard !uids.isEmpty else { return }
        let mine = sampler.cached.values.lazy.filter { uids.contains(self.ownerUID($0.uid)) }.map(\.pid).sorted()
        guard !mine.isEmpty else { return }
        let count = min(mine.count, execChecksPerTick)
        if execCheckCursor >= mine.count { execCheckCursor = 0 }
        for step in 0..<count { _ = sampler.refreshIfExecutableChanged(pid: mine[(execCheckCursor + step) % mine.count]) }
        execCheckCursor = (execCheckCursor + count) % mine.count
    }

    /// Looks at sessions and processes and decides, per managed user, what the next interval counts.
    func observe() {
        let policies = state.policies
        let sessions = state.sessions
        if sessions == nil && !logindWarned {
            logindWarned = true
            logger.notice("systemd-logind is not available: screen time counts while a managed user has processes")
            pendingEvents.append(
                AgentEvent(
                    time: last.wall, kind: .logindUnavailable,
                    message: "systemd-logind is not available; screen time counts while a managed user has processes"))
        }
        accounts.refresh(for: policies.keys, monotonic: last.monotonic)
        refreshSubordinateUIDs()
        refreshRules(policies)
        followManagedUIDs()
        let managedUIDs = Set(policies.keys.compactMap { accounts[$0]?.uid })
        if connector == nil {
            // Polling: catch a launcher that exec'd the game since the last tick (a readlink each, at
            // most `execChecksPerTick` a tick, in turn).
            checkForExecs(uids: managedUIDs)
        }
        // The same processes with the same facts as at the last tick: the same apps, and no pass
        // over the processes at all.
        if appsByUID == nil || appsByUID?.changes != sampler.changes || appsByUID?.uids != managedUIDs
            || appsByUID?.generation != matchGeneration
        {
            let processes = sampler.cached
            // Forget the apps of processes that are gone (without connector events nothing else does).
            if appOfProcess.count > processes.count * 2 + 64 {
                appOfProcess = appOfProcess.filter { processes[$0.key]?.startTime == $0.value.startTime }
            }
            var apps: [UInt32: Set<String>] = [:]
            // Counted under their reported names: catalog apps, desktop apps, programs of the family's
            // own, else `terminal` (what is stopped is decided on the app names, in `enforceApps`).
            for process in processes.values {
                let owner = ownerUID(process.uid)
                guard managedUIDs.contains(owner) else { continue }
                apps[owner, default: []].insert(countedName(of: process))
            }
            appsByUID = (sampler.changes, matchGeneration, managedUIDs, apps)
        }
        let appsOf = appsByUID?.apps ?? [:]
        var newObservations: [String: UserObservation] = [:]
        var newLive: [String: AgentState.LiveUser] = [:]
        for (user, policy) in policies {
            guard let account = accounts[user] else { continue }
            let apps = appsOf[account.uid] ?? []
            var counts: Bool
            var claimIgnored: String? = nil
            if let sessions {
                counts = sessions.contains { $0.uid == account.uid && $0.counts }
                if !counts {
                    claimIgnored = weighClaims(of: sessions, user: user, uid: account.uid, policy: policy)
                    counts = claimIgnored != nil
                }
            } else {
                counts = !apps.isEmpty
            }
            newObservations[user] = UserObservation(sessionCounts: counts, runningApps: apps)
            let day = zone(for: policy).localTime(at: last.wall).date
            var entry = live[user]
            if entry?.day != day {
                let breakClock = entry?.breakClock ?? storedBreakClock(user: user, policy: policy)
                entry = AgentState.LiveUser(day: day, totals: storedTotals(user: user, day: day), running: [], counting: false)
                entry?.breakClock = breakClock
                if policy.weeklyLimitMinutes != nil, day != day.weekStart {
                    entry?.weekBeforeToday =
                        (try? store.read {
                            try UsageTable.screenMilliseconds(user: user, from: day.weekStart, through: day.adding(days: -1), $0)
                        }) ?? 0
                }
            }
            entry?.running = apps.subtracting(Accounting.sessionPlumbing)
            entry?.counting = counts && !state.sleeping
            entry?.claimIgnored = claimIgnored
            entry?.otherComputers = policy.limitScope == .allComputers ? state.otherComputers(of: user, on: day) : 0
            newLive[user] = entry
        }
        observations = newObservations
        live = newLive
        forgetSettledClaims(sessions: sessions)
        state.setLive(newLive)
    }

    /// Stops the running apps the plan says must not run (blocked, over their own limit, or every
    /// tracked app under the `apps` lockout), each with its children, and tells the child why.
    /// Without logind, the `logout` and `lock` lockouts stop all of the user's processes.
    func enforceApps() {
        let policies = state.policies
        let monotonic = clock().monotonic
        var enforced = Set<UInt32>()
        defer {
            enforcedUIDs = enforced
            mayStopSomething = !enforced.isEmpty
        }
        guard !policies.isEmpty else { return }
        // The rules matching uses come from `observe`, which every policy change reaches first (the
        // change wakes the loop for a tick).
        let processes = sampler.cached
        let now = clock().wall
        for user in policies.keys.sorted() {
            guard let account = accounts[user], let schedule = state.schedule(of: user, systemZone: systemZone)
            else { continue }
            // Most passes have nothing to stop: no app rules, and use is allowed.
            let hasAppRules = schedule.policy.apps.contains { $0.rule != .allow }
            if !hasAppRules
                && schedule.state(at: now, usage: live[user]?.scheduleUsage ?? ScheduleUsage(daySeconds: 0)) == .allowed
            {
                continue
            }
            enforced.insert(account.uid)
            var mine: [TrackedProcess] = []
            for process in processes.values where ownerUID(process.uid) == account.uid {
                if connector == nil {
                    if let current = sampler.refreshIfExecutableChanged(pid: process.pid) { mine.append(current) }
                } else {
                    mine.append(process)
                }
            }
            guard !mine.isEmpty else { continue }
            var appOf: [Int32: String] = [:]
            for process in mine { appOf[process.pid] = app(of: process) }
            let running = Set(appOf.values).subtracting(Accounting.sessionPlumbing)
            let plan = Enforcement.plan(
                schedule: schedule, live: live[user], running: running, catalog: catalog, now: now)
            var reasons = plan.stopApps
            let sweep = lockoutSweep(plan: plan, policy: schedule.policy, uid: account.uid, running: running)
            guard !reasons.isEmpty || sweep != .none else { continue }
            for app in Set(appOf.values) where reasons[app] == nil && sweep.stops(app, policy: schedule.policy) {
                reasons[app] = .lockout(plan.decision.state)
            }
            for (app, reason) in reasons.sorted(by: { $0.key < $1.key }) {
                let roots = mine.filter { appOf[$0.pid] == app }.map { ProcessRef(pid: $0.pid, startTime: $0.startTime) }
                let targets = ProcessTree.withDescendants(of: roots, in: sampler.cached).filter {
                    sampler.cached[$0.pid].map { ownerUID($0.uid) } == account.uid
                }
                let signalled = stopper.stop(targets, nowMonotonic: monotonic)
                guard !signalled.isEmpty else { continue }
                stopped(app: app, reason: reason, user: user, processes: signalled, now: now, monotonic: monotonic)
            }
        }
        _ = stopper.poll(nowMonotonic: monotonic)
    }

    /// Gives the exec guard, when it changed, what each managed user must not run now: the apps
    /// `Enforcement.plan` would stop were every candidate running, with the claims and rules that name
    /// a file's app as `names(of:)` does.
    func publishExecRules() {
        guard let execGuard else { return }
        let policies = state.policies
        let now = clock().wall
        var users: [UInt32: ExecRules.User] = [:]
        for (user, policy) in policies {
            guard let account = accounts[user], let schedule = state.schedule(of: user, systemZone: systemZone) else { continue }
            let plan = Enforcement.plan(
                schedule: schedule, live: live[user], running: ExecRules.candidates(policy: policy, catalog: catalog),
                catalog: catalog, now: now)
            guard !plan.stopApps.isEmpty else { continue }
            users[account.uid] = ExecRules.User(name: user, rules: rulesByUID[account.uid] ?? [:], denied: plan.stopApps)
        }
        let subordinates = subordinateUIDs.flatMap { [$0.range.start, $0.range.count, $0.owner] }
        if let published = publishedExecRules, published.users == users, published.subordinates == subordinates,
            published.claims == claims.generation
        {
            return
        }
        publishedExecRules = (users, subordinates, claims.generation)
        execGuard.publish(
            ExecRules(
                users: users, subordinates: subordinateUIDs, catalog: catalog, claims: claims,
                interpreterIdentities: interpreterIdentities))
    }

    /// Tells the children whose execs the guard denied, and records it, as for a stop.
    func recordDeniedExecs() {
        guard let execGuard else { return }
        let (denied, dropped) = execGuard.takeDenials()
        guard !denied.isEmpty || dropped > 0 else { return }
        let now = clock()
        for exec in denied {
            stopped(
                app: exec.denial.app, reason: exec.denial.reason, user: exec.denial.user,
                processes: [ProcessRef(pid: exec.pid, startTime: 0)], now: now.wall, monotonic: now.monotonic, execDenied: true)
        }
        if dropped > 0 { logger.notice("exec guard: more execs denied than could be told one by one", metadata: ["count": "\(dropped)"]) }
    }

    /// Tells the child (the notification worker coalesces) and, within the user's budget, records
    /// an `app-stopped` event and a log line; past it the stop is only counted, and recorded later.
    /// `execDenied`: the exec guard denied the program's exec (it never ran); the event says so.
    func stopped(
        app: String, reason: StopReason, user: String, processes: [ProcessRef], now: Instant, monotonic: Int64,
        execDenied: Bool = false
    ) {
        let message = reason.message(app: app)
        state.post(
            AgentState.ChildMessage(user: user, summary: "Curfew", body: ChildMessages.appStopped(app: app, reason: reason), urgency: 2, kind: .appStopped))
        var records =
            stopRecords[user]
            ?? (EventBudget(capacity: Self.stopEventBurst, refillMilliseconds: Self.stopEventRefillMilliseconds, now: monotonic), [:])
        defer { stopRecords[user] = records }
        guard records.budget.take(now: monotonic) else {
            let key = records.unrecorded[app] != nil || records.unrecorded.count < Self.maxUnrecordedApps ? app : UsageSummaryFormat.otherApps
            records.unrecorded[key, default: 0] += processes.count
            return
        }
        logger.notice(
            execDenied ? "denied an app's exec" : "stopped an app",
            metadata: ["user": "\(user)", "app": "\(app)", "reason": "\(reason.word)", "pids": "\(processes.map(\.pid))"])
        // Written with the next flush (within 2 s), never in the way of the next kill.
        pendingEvents.append(
            AgentEvent(
                time: now, user: user, kind: .appStopped, message: message,
                details: EventDetails.AppStopped(app: app, reason: reason.word, pids: processes.map(\.pid), execDenied: execDenied)))
    }

    /// Records, as budgets allow, one event per app for the stops that were only counted: the
    /// audit log says how often, if not each time.
    func recordUnrecordedStops(now: Instant, monotonic: Int64) {
        for (user, var records) in stopRecords where !records.unrecorded.isEmpty {
            for (app, count) in records.unrecorded.sorted(by: { $0.key < $1.key }) {
                guard records.budget.take(now: monotonic) else { break }
                records.unrecorded[app] = nil
                logger.notice("stopped an app again and again", metadata: ["user": "\(user)", "app": "\(app)", "count": "\(count)"])
                pendingEvents.append(
                    AgentEvent(
                        time: now, user: user, kind: .appStopped,
                        message: "\(app) was stopped \(count) more time\(count == 1 ? "" : "s") (not recorded one by one)",
                        details: EventDetails.AppStopsCounted(app: app, count: count)))
            }
            stopRecords[user] = records
        }
        // Users no longer managed, and budgets back to full with nothing to record, are forgotten.
        let policies = state.policies
        stopRecords = stopRecords.filter { user, records in
            var budget = records.budget
            return policies[user] != nil && (!records.unrecorded.isEmpty || !budget.isFull(now: monotonic))
        }
    }

    /// The app `process` is counted and ruled under (`AppCatalog.resolve`), learning its identity
    /// when that is safe: a catalog app's executable-path match, or a program a `--by-name` rule of
    /// its user names; never an interpreter's or a loader's.
    func app(of process: TrackedProcess) -> String { names(of: process).app }

    /// The app a process counts under in reports and status (`AppCatalog.countedName`).
    func countedName(of process: TrackedProcess) -> String { names(of: process).counted }

    func names(of process: TrackedProcess) -> (app: String, counted: String) {
        if let known = appOfProcess[process.pid], known.startTime == process.startTime, known.facts == process.facts,
            known.generation == matchGeneration
        {
            return (known.app, known.counted)
        }
        let facts = process.facts
        let identities = facts.identities
        let interpreter =
            catalog.interpreters.isInterpreter(facts.executablePath ?? "", owner: facts.executableOwner)
            || identities.contains(where: interpreterIdentities.contains)
        let owner = ownerUID(process.uid)
        let rules = rulesByUID[owner] ?? [:]
        let match = catalog.resolve(
            facts, claimed: interpreter ? [] : claims.apps(claiming: identities, uid: owner), isInterpreter: interpreter
        ) { rules[$0]?.strictness ?? AppRuleKind.noRuleStrictness }
        if !interpreter && !identities.isEmpty {
            if match.byExecutablePath {
                learn(identities, app: match.app, scope: facts.executableOwner == 0 ? .everyone : .user(owner))
            } else if rules[match.app] != nil && catalog.definition(named: match.app) == nil {
                learn(identities, app: match.app, scope: .user(owner))
            }
        }
        let desktopPrograms = self.desktopPrograms
        let counted = catalog.countedName(
            of: match.app, facts: facts, isInterpreter: interpreter, hasRule: rules[match.app] != nil
        ) { desktopPrograms[$0] }
        appOfProcess[process.pid] = (process.startTime, process.facts, matchGeneration, match.app, counted)
        return (match.app, counted)
    }

    /// Today's totals as stored plus what is pending.
    func storedTotals(user: String, day: LocalDate) -> [String: Int64] {
        var totals = (try? store.read { try UsageTable.dayTotals(user: user, day: day, $0) }) ?? [:]
        for (key, milliseconds) in pending where key.user == user && key.day == day {
            totals[key.app, default: 0] += milliseconds
        }
        return totals
    }

    /// The break clock the agent wrote before it stopped (the time since then a pause), for a user it
    /// starts following; a fresh one when there is none.
    func storedBreakClock(user: String, policy: Policy) -> BreakClock {
        guard policy.breaks != nil,
            let text = try? store.read({ try AgentStateTable.get(AgentStateKeys.breakClock(user), $0) }),
            let clock = BreakClock.restored(text, now: last.wall, breakLength: policy.breaks.map { Int64($0.lengthMinutes) * 60 })
        else { return BreakClock() }
        return clock
    }

    /// Writes pending usage and events in one transaction, at most every `flushInterval` unless
    /// forced. On failure everything stays pending and is tried again.
    public func flush(force: Bool) {
        guard force || last.monotonic - lastFlush >= flushInterval else { return }
        let claimsToKeep = claims.generation != persistedClaimsGeneration ? (claims.generation, claims.persisted) : nil
        guard !pending.isEmpty || !pendingEvents.isEmpty || claimsToKeep != nil else {
            lastFlush = last.monotonic
            return
        }
        do {
            let usage = pending
            let events = pendingEvents
            let started = ClockReading.now().monotonic
            defer {
                let took = ClockReading.now().monotonic - started
                if took >= 100 { logger.notice("slow database write", metadata: ["ms": "\(took)", "events": "\(events.count)"]) }
            }
            try store.write { db in
                try UsageTable.add(usage, db)
                for event in events { try EventLog.append(event, db) }
                try AgentStateTable.set(AgentStateKeys.lastFlush, last.wall.milliseconds, db)
                // The break clocks of the users whose time counted (a pause since is the time from
                // the last write, so theirs is all that changes).
                for user in Set(usage.keys.map(\.user)) {
                    guard let clock = live[user]?.breakClock else { continue }
                    try AgentStateTable.set(AgentStateKeys.breakClock(user), clock.persisted(at: last.wall), db)
                }
                if let (_, text) = claimsToKeep { try AgentStateTable.set(AgentStateKeys.identityClaims, text, db) }
            }
            if let (generation, _) = claimsToKeep { persistedClaimsGeneration = generation }
            pending = [:]
            pendingEvents = []
            lastFlush = last.monotonic
        } catch {
            logger.error("cannot write usage to the database; keeping it to try again", metadata: ["error": "\(error)"])
        }
    }

    public func record(_ event: AgentEvent) { pendingEvents.append(event) }
}
