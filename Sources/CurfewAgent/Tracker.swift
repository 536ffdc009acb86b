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
    let logger: Logger
    /// The processes: the sampler, the process connector, the subordinate uids followed.
    public let watch: ProcessWatch
    /// Which app each process is.
    let identity: AppIdentity
    /// Stopping what must not run, and what the exec guard is given.
    let enforcement: AppEnforcement
    let flushInterval: Int64
    var systemZone: ZoneRules { .system }

    var pending: [UsageKey: Int64] = [:]
    var pendingEvents: [AgentEvent] = []
    var last: ClockReading
    var lastFlush: Int64
    var observations: [String: UserObservation] = [:]
    var live: [String: AgentState.LiveUser] = [:]
    var logindWarned = false
    var accounts = AccountCache()
    /// Milliseconds within which systemd wants to hear from the agent (WatchdogSec), if it does.
    let watchdogInterval: Int64? = SystemdNotify.watchdogInterval().map(\.wholeMilliseconds)
    var watchdog: Bool { watchdogInterval != nil }
    /// CPU readings of managed processes, while a session of their user claims to be idle or locked.
    var cpuWindows: [ProcessRef: CPUWindow] = [:]
    /// Sessions whose idle or locked claim was not believed, and the claim ("idle", "locked"): the
    /// event is recorded once per claim.
    var ignoredClaims: [String: String] = [:]
    /// When (monotonic ms, the tracker's clock) startup's pages of the program
    /// are given back; nil once done.
    var releaseProgramPagesAt: Int64? = nil

    /// The apps managed users run, by uid, and what they were found from: the sampler's `changes`,
    /// the match generation and the managed uids.
    struct RunningApps {
        var changes: UInt64
        var generation: UInt64
        var uids: Set<UInt32>
        var apps: [UInt32: Set<String>]

        func isCurrent(changes: UInt64, generation: UInt64, uids: Set<UInt32>) -> Bool {
            self.changes == changes && self.generation == generation && self.uids == uids
        }
    }

    /// The apps managed users run, as of the sampler's `changes` and the managed uids.
    var appsByUID: RunningApps? = nil

    /// The clocks; tests pass their own to move the wall clock.
    let clock: () -> ClockReading

    public init(
        state: AgentState, store: StateStore, catalog: AppCatalog, logger: Logger, useProcessConnector: Bool,
        flushIntervalMilliseconds: Int64 = 2_000, stopGraceMilliseconds: Int64 = 2_000,
        enforcementPollMilliseconds: Int64 = 100, identities: FileIdentityCache = FileIdentityCache(), execGuard: ExecGuard? = nil,
        clock: @escaping () -> ClockReading = ClockReading.now
    ) {
        self.clock = clock
        self.state = state
        self.store = store
        self.logger = logger
        let watch = ProcessWatch(identities: identities, useProcessConnector: useProcessConnector, logger: logger, clock: clock)
        let identity = AppIdentity(catalog: catalog, logger: logger, identities: identities)
        self.watch = watch
        self.identity = identity
        self.enforcement = AppEnforcement(
            state: state, catalog: catalog, logger: logger, clock: clock, watch: watch, identity: identity,
            stopGraceMilliseconds: stopGraceMilliseconds, enforcementPollMilliseconds: enforcementPollMilliseconds,
            execGuard: execGuard)
        self.flushInterval = flushIntervalMilliseconds
        self.last = clock()
        self.lastFlush = last.monotonic
        watch.sampler.isLoader = identity.loaderTest()
        identity.learnCatalogPaths(identities: identities)
        // What earlier runs learnt (a renamed --by-name copy stays blocked after a restart).
        identity.restoreClaims(try? store.read({ try AgentStateTable.get(AgentStateKeys.identityClaims, $0) }))
    }

    /// Lists /proc (with the connector, reading fully only managed users' processes) and makes the
    /// first observation; `run` follows.
    public func start() {
        followManagedUIDs()
        watch.fullScan()
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
                if enforcement.stopper.pending > 0 { wait = min(wait, 100) }
                if watch.connector == nil && enforcement.mayStopSomething { wait = min(wait, enforcement.enforcementPollMilliseconds) }
                // A loader that has not mapped its program yet does so within microseconds: look again soon.
                if !watch.sampler.unresolvedLoaders.isEmpty { wait = min(wait, 2) }
                wait = max(1, wait)
                // Counting only looks at processes at the tick: unless an app may have to be stopped
                // at its exec, or nobody is active (then only uid changes come), the connector's
                // events (anyone's forks on the machine) wait in its socket for the next tick.
                let listening = watch.uidFilterOn || enforcement.mayStopSomething
                if let connector = watch.connector, listening {
                    do {
                        let events = try connector.next(
                            timeoutMilliseconds: Int32(clamping: wait), orUntilReadable: [stop.descriptor, wake.descriptor])
                        apply(events)
                        if enforcement.concernsEnforcedUser(events) { enforceApps() }
                        if watch.uidFilterOn && concernsManagedUser(events) { tickNow = true }
                    } catch {
                        logger.warning("process connector failed; polling", metadata: ["error": "\(error)"])
                        stop.wait(milliseconds: wait)
                    }
                } else {
                    _ = Readiness.wait([stop.descriptor, wake.descriptor], timeoutMilliseconds: wait)
                    // Polling: new processes show up in the cheap /proc check, execs in the readlink
                    // of each managed user's processes; only while something may have to be stopped.
                    if watch.connector == nil && enforcement.mayStopSomething {
                        _ = watch.sampler.sample()
                        enforceApps()
                    }
                }
                if !watch.sampler.unresolvedLoaders.isEmpty && watch.sampler.lookAgainAtLoaders() && enforcement.mayStopSomething {
                    enforceApps()
                }
                if wake.drain() { tickNow = true }
                enforcement.recordDeniedExecs(events: &pendingEvents)
                if enforcement.stopper.pending > 0 { _ = enforcement.stopper.poll(nowMonotonic: clock().monotonic) }
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

    /// When the next tick is due (monotonic ms).
    func nextTick(tickMilliseconds: Int64) -> Int64 {
        let regular = last.monotonic + tickMilliseconds
        guard watch.connector != nil, !anyoneActive, enforcement.stopper.pending == 0 else { return regular }
        // Idle: at the latest in a minute, sooner for the flush and the watchdog.
        var due = last.monotonic + 60_000
        if !pending.isEmpty || !pendingEvents.isEmpty { due = min(due, lastFlush + flushInterval) }
        if enforcement.hasUnrecordedStops { due = min(due, last.monotonic + AppEnforcement.stopEventRefillMilliseconds) }
        if let watchdogInterval { due = min(due, last.monotonic + watchdogInterval / 2) }
        if let releaseProgramPagesAt { due = min(due, releaseProgramPagesAt) }
        return max(regular, due)
    }

    /// Turns the connector's uid-change filter on when nobody managed is active, off (listing /proc
    /// for what it dropped) when someone is.
    func followActivity() {
        guard watch.connector != nil else { return }
        let idle = !anyoneActive && enforcement.stopper.pending == 0
        if watch.passOnlyUIDChanges(idle) && !idle {
            observe()
            enforceApps()
        }
    }

    /// Whether a batch of connector events names a process of a managed user (by its uid now).
    func concernsManagedUser(_ events: [ProcessEvent]) -> Bool {
        let managed = Set(uids(of: state.policies.keys).values)
        return !managed.isEmpty && watch.concerns(events, uids: managed)
    }

    /// The uids of `users` that have an account (as of the last refresh of `accounts`), by name.
    func uids(of users: some Sequence<String>) -> [String: UInt32] {
        var uids: [String: UInt32] = [:]
        for user in users {
            if let uid = accounts[user]?.uid { uids[user] = uid }
        }
        return uids
    }

    /// Reads what the process connector queued, without waiting (what `run` does between ticks; the
    /// benchmark calls it to tick as the agent does).
    public func applyPendingEvents() {
        guard let connector = watch.connector else { return }
        // Each call reads at most 256 datagrams; a burst can leave more.
        for _ in 0..<64 {
            guard let events = try? connector.next(timeoutMilliseconds: 0), !events.isEmpty else { return }
            apply(events)
        }
    }

    /// With the process connector, only managed users' processes are read fully (`ProcessWatch.follow`).
    func followManagedUIDs() {
        guard watch.connector != nil else { return }
        let users = state.policies.keys
        accounts.refresh(for: users, monotonic: clock().monotonic)
        watch.follow(uids(of: users))
    }

    func apply(_ events: [ProcessEvent]) {
        guard !events.isEmpty else { return }
        for event in events {
            if case .exit(let pid) = event { identity.forget(pid: pid) }
        }
        _ = watch.sampler.apply(events)
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
        watch.scanIfDue(now: now.monotonic)
        // A loader that has not mapped its program within its quick looks is looked at every tick.
        if !watch.sampler.slowLoaders.isEmpty { watch.sampler.lookAgainAtSlowLoaders() }
        observe()
        enforceApps()
        publishExecRules()
        if !enforcement.stopRecords.isEmpty {
            enforcement.recordUnrecordedStops(now: now.wall, monotonic: now.monotonic, events: &pendingEvents)
        }
        flush(force: false)
        if watchdog {
            let counting = live.values.filter(\.counting).count
            _ = SystemdNotify.send("WATCHDOG=1\nSTATUS=tracking \(live.count) managed users, \(counting) counting")
        }
    }

    func zone(for policy: Policy) -> ZoneRules { Schedule.zone(for: policy, system: systemZone) }

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
        let managed = uids(of: policies.keys)
        watch.refreshSubordinateUIDs(of: managed)
        identity.refreshRules(policies, uids: managed)
        followManagedUIDs()
        let managedUIDs = Set(uids(of: policies.keys).values)
        if watch.connector == nil {
            // Polling: catch a launcher that exec'd the game since the last tick (a readlink each, at
            // most `execChecksPerTick` a tick, in turn).
            watch.checkForExecs(uids: managedUIDs)
        }
        // The same processes with the same facts as at the last tick: the same apps, and no pass
        // over the processes at all.
        let sampler = watch.sampler
        if !(appsByUID?.isCurrent(changes: sampler.changes, generation: identity.matchGeneration, uids: managedUIDs) ?? false) {
            let processes = sampler.cached
            // Forget the apps of processes that are gone (without connector events nothing else does).
            identity.forgetGone(processes)
            var apps: [UInt32: Set<String>] = [:]
            // Counted under their reported names: catalog apps, desktop apps, programs of the family's
            // own, else `terminal` (what is stopped is decided on the app names, in `enforceApps`).
            for process in processes.values {
                let owner = watch.ownerUID(process.uid)
                guard managedUIDs.contains(owner) else { continue }
                apps[owner, default: []].insert(names(of: process).counted)
            }
            appsByUID = RunningApps(changes: sampler.changes, generation: identity.matchGeneration, uids: managedUIDs, apps: apps)
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

    /// Stops what must not run (`AppEnforcement.enforce`).
    func enforceApps() {
        enforcement.enforce(accounts: accounts, live: live, events: &pendingEvents)
    }

    /// Gives the exec guard what must not run now, when it changed (`AppEnforcement.publishExecRules`).
    func publishExecRules() {
        enforcement.publishExecRules(accounts: accounts, live: live)
    }

    /// The app `process` is ruled under and the name it counts under (`AppIdentity.names(of:owner:)`).
    func names(of process: TrackedProcess) -> AppIdentity.Names {
        identity.names(of: process, owner: watch.ownerUID(process.uid))
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
        let claimsToKeep = identity.claimsToKeep
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
                if let claimsToKeep { try AgentStateTable.set(AgentStateKeys.identityClaims, claimsToKeep.text, db) }
            }
            if let claimsToKeep { identity.persistedClaimsGeneration = claimsToKeep.generation }
            pending = [:]
            pendingEvents = []
            lastFlush = last.monotonic
        } catch {
            logger.error("cannot write usage to the database; keeping it to try again", metadata: ["error": "\(error)"])
        }
    }

    public func record(_ event: AgentEvent) { pendingEvents.append(event) }
}
