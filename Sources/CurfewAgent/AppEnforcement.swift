import CurfewCore
import CurfewLinux
import Foundation
import Logging

/// Stops the apps that must not run (blocked, over their own limit, or every tracked app under the
/// `apps` lockout), tells the child why and records it within a budget, and gives the exec guard
/// what must not run before it runs.
///
/// Owned by the tracker's thread; uses the tracker's process watch and app identity.
final class AppEnforcement {
    /// A user's budget of `app-stopped` events (and log lines) their relaunches may cause, and the
    /// processes stopped past it, per app, not yet recorded.
    struct StopRecord {
        var budget: EventBudget
        var unrecorded: [String: Int]
    }

    /// What was given to the exec guard (the rules but the catalog, which does not change).
    struct PublishedRules: Equatable {
        var users: [UInt32: ExecRules.User]
        var subordinates: [OwnedSubordinateRange]
        var claimsGeneration: UInt64
    }

    let state: AgentState
    let catalog: AppCatalog
    let logger: Logger
    let clock: () -> ClockReading
    let watch: ProcessWatch
    let identity: AppIdentity
    /// Stops blocked and limited apps (and, without logind, a logged-out user's processes).
    let stopper: ProcessStopper
    /// How often, between ticks, processes are checked for apps to stop when the process connector
    /// is not available: a blocked app dies within this much of its exec, plus the time to parse it.
    let enforcementPollMilliseconds: Int64
    /// Whether, at the last pass, some managed user had app rules or was blocked: only then are
    /// processes checked between ticks.
    var mayStopSomething = false
    var enforcedUIDs = Set<UInt32>()
    /// Per user: the budget of `app-stopped` events and the stops past it.
    var stopRecords: [String: StopRecord] = [:]
    /// 60 app-stopped events at once, then one a minute, per user: a child relaunching a blocked app
    /// in a loop adds at most about 120 events the first hour and 60 an hour after, each stop still
    /// counted (in the events' `unrecordedBefore` and in summary events).
    static let stopEventBurst = 60
    static let stopEventRefillMilliseconds: Int64 = 60_000
    /// Apps kept apart in the count of unrecorded stops; more are counted under `otherApps`.
    static let maxUnrecordedApps = 32

    /// Denies execs of what must not run before it runs; fed `ExecRules` after every decision.
    let execGuard: ExecGuard?
    /// What was last given to the exec guard.
    var publishedExecRules: PublishedRules? = nil
    /// uid -> when (monotonic ms) the user's current lockout began: the grace counts from then
    /// (LockoutKill.swift).
    var lockoutSince: [UInt32: Int64] = [:]
    /// uid -> when every process of the user was last killed at once.
    var lastUserKill: [UInt32: Int64] = [:]

    var systemZone: ZoneRules { .system }

    init(
        state: AgentState, catalog: AppCatalog, logger: Logger, clock: @escaping () -> ClockReading, watch: ProcessWatch,
        identity: AppIdentity, stopGraceMilliseconds: Int64, enforcementPollMilliseconds: Int64, execGuard: ExecGuard?
    ) {
        self.state = state
        self.catalog = catalog
        self.logger = logger
        self.clock = clock
        self.watch = watch
        self.identity = identity
        self.stopper = ProcessStopper(graceMilliseconds: stopGraceMilliseconds)
        self.enforcementPollMilliseconds = enforcementPollMilliseconds
        self.execGuard = execGuard
    }

    /// The app `process` is ruled under.
    func app(of process: TrackedProcess) -> String {
        identity.names(of: process, owner: watch.ownerUID(process.uid)).app
    }

    /// Whether a batch of connector events started or changed a process of a user whose apps may
    /// have to be stopped.
    func concernsEnforcedUser(_ events: [ProcessEvent]) -> Bool {
        mayStopSomething && watch.concerns(events, uids: enforcedUIDs)
    }

    /// Whether stops past a budget wait to be recorded.
    var hasUnrecordedStops: Bool { stopRecords.values.contains { !$0.unrecorded.isEmpty } }

    /// Stops the running apps the plan says must not run (blocked, over their own limit, or every
    /// tracked app under the `apps` lockout), each with its children, and tells the child why.
    /// Without logind, the `logout` and `lock` lockouts stop all of the user's processes.
    /// `accounts` and `live`: the tracker's, for the managed users; events recorded go to `events`.
    func enforce(accounts: AccountCache, live: [String: AgentState.LiveUser], events: inout [AgentEvent]) {
        let policies = state.policies
        let monotonic = clock().monotonic
        var enforced = Set<UInt32>()
        var lockedOut = Set<UInt32>()
        defer {
            enforcedUIDs = enforced
            mayStopSomething = !enforced.isEmpty
            noteLockouts(lockedOut, monotonic: monotonic)
        }
        guard !policies.isEmpty else { return }
        // The rules matching uses come from the tracker's `observe`, which every policy change reaches
        // first (the change wakes the loop for a tick).
        let sampler = watch.sampler
        let processes = sampler.cached
        let now = clock().wall
        for user in policies.keys.sorted() {
            guard let account = accounts[user], let schedule = state.schedule(of: user, systemZone: systemZone)
            else { continue }
            // Most passes have nothing to stop: no app rules, and use is allowed.
            let hasAppRules = schedule.policy.apps.contains { $0.rule != .allow }
            let allowed = schedule.state(at: now, usage: live[user]?.scheduleUsage ?? ScheduleUsage(daySeconds: 0)) == .allowed
            if !allowed { lockedOut.insert(account.uid) }
            if !hasAppRules && allowed { continue }
            enforced.insert(account.uid)
            var mine: [TrackedProcess] = []
            for process in processes.values where watch.ownerUID(process.uid) == account.uid {
                if watch.connector == nil {
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
            // Past the grace, a sweep without logind kills every process of the child at once, as the
            // child: a fork-hopper's next generation cannot escape it (LockoutKill.swift).
            var killedAtOnce = false
            if sweep == .allButAllowed, grace(for: .lockout(plan.decision.state), uid: account.uid, monotonic: monotonic) == 0,
                mine.contains(where: { appOf[$0.pid].map { sweep.stops($0, policy: schedule.policy) } ?? false })
            {
                killedAtOnce = killEveryProcess(
                    of: account, user: user, sparing: { schedule.policy.rule(for: self.app(of: $0)) == .allow }, mine: mine,
                    monotonic: monotonic)
            }
            for (app, reason) in reasons.sorted(by: { $0.key < $1.key }) {
                let roots = mine.filter { appOf[$0.pid] == app }.map { ProcessRef(pid: $0.pid, startTime: $0.startTime) }
                let targets = ProcessTree.withDescendants(of: roots, in: sampler.cached).filter {
                    sampler.cached[$0.pid].map { watch.ownerUID($0.uid) } == account.uid
                }
                var signalled = stopper.stop(
                    targets, nowMonotonic: monotonic, grace: grace(for: reason, uid: account.uid, monotonic: monotonic))
                // What the helper killed is dead already; it was stopped all the same.
                if killedAtOnce, case .lockout = reason { signalled = targets }
                guard !signalled.isEmpty else { continue }
                stopped(
                    app: app, reason: reason, user: user, processes: signalled, now: now, monotonic: monotonic, events: &events)
            }
        }
        _ = stopper.poll(nowMonotonic: monotonic)
    }

    /// Gives the exec guard, when it changed, what each managed user must not run now: the apps
    /// `Enforcement.plan` would stop were every candidate running, with the claims and rules that name
    /// a file's app as `AppIdentity.names(of:owner:)` does.
    func publishExecRules(accounts: AccountCache, live: [String: AgentState.LiveUser]) {
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
            users[account.uid] = ExecRules.User(name: user, rules: identity.rulesByUID[account.uid] ?? [:], denied: plan.stopApps)
        }
        let subordinates = watch.subordinateUIDs
        let claims = identity.claims
        let published = PublishedRules(users: users, subordinates: subordinates, claimsGeneration: claims.generation)
        guard published != publishedExecRules else { return }
        publishedExecRules = published
        execGuard.publish(
            ExecRules(
                users: users, subordinates: subordinates, catalog: catalog, claims: claims,
                interpreterIdentities: identity.interpreterIdentities))
    }

    /// Tells the children whose execs the guard denied, and records it, as for a stop.
    func recordDeniedExecs(events: inout [AgentEvent]) {
        guard let execGuard else { return }
        let (denied, dropped) = execGuard.takeDenials()
        guard !denied.isEmpty || dropped > 0 else { return }
        let now = clock()
        for exec in denied {
            stopped(
                app: exec.denial.app, reason: exec.denial.reason, user: exec.denial.user,
                processes: [ProcessRef(pid: exec.pid, startTime: 0)], now: now.wall, monotonic: now.monotonic, execDenied: true,
                events: &events)
        }
        if dropped > 0 { logger.notice("exec guard: more execs denied than could be told one by one", metadata: ["count": "\(dropped)"]) }
    }

    /// Tells the child (the notification worker coalesces) and, within the user's budget, records
    /// an `app-stopped` event (in `events`) and a log line; past it the stop is only counted, and
    /// recorded later. `execDenied`: the exec guard denied the program's exec (it never ran); the
    /// event says so.
    func stopped(
        app: String, reason: StopReason, user: String, processes: [ProcessRef], now: Instant, monotonic: Int64,
        execDenied: Bool = false, events: inout [AgentEvent]
    ) {
        let message = reason.message(app: app)
        state.post(
            AgentState.ChildMessage(user: user, summary: "Curfew", body: ChildMessages.appStopped(app: app, reason: reason), urgency: 2, kind: .appStopped))
        var records =
            stopRecords[user]
            ?? StopRecord(
                budget: EventBudget(capacity: Self.stopEventBurst, refillMilliseconds: Self.stopEventRefillMilliseconds, now: monotonic),
                unrecorded: [:])
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
        events.append(
            AgentEvent(
                time: now, user: user, kind: .appStopped, message: message,
                details: EventDetails.AppStopped(app: app, reason: reason.word, pids: processes.map(\.pid), execDenied: execDenied)))
    }

    /// Records (in `events`), as budgets allow, one event per app for the stops that were only
    /// counted: the audit log says how often, if not each time.
    func recordUnrecordedStops(now: Instant, monotonic: Int64, events: inout [AgentEvent]) {
        for (user, var records) in stopRecords where !records.unrecorded.isEmpty {
            for (app, count) in records.unrecorded.sorted(by: { $0.key < $1.key }) {
                guard records.budget.take(now: monotonic) else { break }
                records.unrecorded[app] = nil
                logger.notice("stopped an app again and again", metadata: ["user": "\(user)", "app": "\(app)", "count": "\(count)"])
                events.append(
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
}
