import CurfewCore
import CurfewLinux
import CurfewStore
import Foundation
import Logging

/// Acts on each managed user's sessions: warnings before a limit or bedtime, then the lockout (end
/// the sessions, or lock them and lock again after an unlock). Delivers the messages other parts of
/// the agent queue for children.
///
/// It sleeps until something it acts on changes (`AgentState.enforcerWake`: who counts or runs what,
/// other computers' usage, policies, grants, sessions, a message) or the next
/// moment its plans name: a warning threshold, the end of a countdown, the time use is allowed
/// again, the next minute (schedules change on minutes), a repeat of a lockout action, and for a minute
/// after a time request is filed, the next look for the parent's answer. Apps are stopped by the tracker, which owns
/// the process table; without logind, `logout` is carried out there too, by stopping the user's
/// processes.
///
/// Owned by the enforcer thread. It has its own logind connection, so a slow call never holds up
/// the logind watcher or the tracker.
final class Enforcer {
    let agent: Agent
    let logger: Logger
    var systemZone: ZoneRules { .system }
    var logind: LogindClient? = nil
    var logindRetryAt: Int64 = 0
    var accounts = AccountCache()
    var warnings: [String: WarningTracker] = [:]
    /// Users in a blocked state, and what was done, so each lockout is recorded once.
    var blocked: [String: UseState] = [:]
    /// Session id -> last time (monotonic ms) an action was asked of logind for it.
    var lastAction: [String: Int64] = [:]
    /// uid -> when sessions were first asked to end in the current lockout.
    var terminateSince: [UInt32: Int64] = [:]
    /// uid -> graphical sessions asked to lock in the current `lock` lockout and not locked yet, and
    /// since when (monotonic ms).
    var lockAskedSince: [UInt32: [String: Int64]] = [:]
    var lastKillUser: [UInt32: Int64] = [:]
    var lastAnswerCheck: Int64 = 0
    /// Whether a time request had no answer at the last look (then answers are looked for).
    var requestsOutstanding = true
    /// When (monotonic ms) a child last filed a request.
    var lastRequestFiled: Int64 = .min / 2

    /// A parent often answers at once: for this long after a request is filed, answers are looked for
    /// every second (`fastAnswerLookMilliseconds`); after that at most every `slowAnswerLookMilliseconds`
    /// at the steps the enforcer takes anyway (a change, the next minute), so a request nobody answers
    /// does not wake an idle agent every second (docs/performance.md). An approval publishes a grant, which wakes
    /// the enforcer at once.
    static let fastAnswerWindowMilliseconds: Int64 = 60_000
    static let fastAnswerLookMilliseconds: Int64 = 1_000
    static let slowAnswerLookMilliseconds: Int64 = 10_000
    /// Milliseconds from the last `step` to the next moment it must run again, changes aside.
    var nextStepIn: Int64 = 0

    /// How long a session may survive TerminateSession before every process of the user is killed.
    static let terminateGraceMilliseconds: Int64 = 5_000
    /// How often the same action is asked again for a session that has not complied.
    static let repeatMilliseconds: Int64 = 2_000

    /// Linger, leftovers and the belt (EnforcerHolds.swift).
    var holds = HoldsState()

    /// Desktop notifications: one worker thread, one busctl at a time.
    let notifications: DesktopNotifications
    /// The `network` lockout's nftables table.
    let network: NetworkLockout

    init(agent: Agent) {
        self.agent = agent
        self.logger = agent.logger
        self.notifications = DesktopNotifications(logger: agent.logger)
        self.network = NetworkLockout(agent: agent)
    }

    func run(until stop: StopFlag) {
        defer { notifications.stop() }
        let wake = agent.state.enforcerWake
        while !stop.isSet {
            wake.drain()
            let now = agent.clock.now()
            step(now: now.wall, monotonic: now.monotonic)
            _ = Readiness.wait([stop.descriptor, wake.descriptor], timeoutMilliseconds: nextStepIn)
        }
        deliver(agent.state.takeMessages())
    }

    /// Milliseconds from `now` until `seconds` whole seconds after the second `now` is in, plus a
    /// little so the plan computed then has crossed the moment.
    static func untilSecond(_ seconds: Int64, after now: Instant) -> Int64 {
        (Instant(seconds: now.seconds + seconds) - now).wholeMilliseconds + 20
    }

    /// Makes the next step come no later than `milliseconds` from now.
    func wake(within milliseconds: Int64) { nextStepIn = max(10, min(nextStepIn, milliseconds)) }

    /// One pass over every managed user.
    func step(now: Instant, monotonic: Int64) {
        let state = agent.state
        let sessions = state.sessions
        let users = state.policies.keys.sorted()
        // Schedules (bedtime, downtime, exceptions) change on whole minutes: the next one at the latest.
        nextStepIn = 60_000 - now.milliseconds % 60_000 + 20
        accounts.refresh(for: users, monotonic: monotonic)
        var networkCuts: [UInt32: NetworkLockout.Cut] = [:]
        var networkUndecided = Set<UInt32>()
        var networkNames: [UInt32: String] = [:]
        for user in users {
            guard let schedule = state.schedule(of: user, systemZone: systemZone), let account = accounts[user] else {
                continue
            }
            let live = state.live(of: user)
            let plan = agent.plan(for: user, schedule: schedule, live: live, now: now)
            networkNames[account.uid] = user
            if plan.networkOff {
                networkCuts[account.uid] = NetworkLockout.Cut(user: user, message: plan.networkOffMessage(now: now, zone: schedule.zone))
            } else if live == nil {
                // Not counted yet since the start: a limit reached cannot be told from time left.
                networkUndecided.insert(account.uid)
            }
            let userSessions = sessions?.filter { $0.uid == account.uid && $0.sessionClass == .user } ?? []
            let present = sessions == nil ? !(live?.running.isEmpty ?? true) || live?.counting == true : !userSessions.isEmpty
            // The next warning threshold of each countdown, and its end. A countdown of used time
            // moves at most as fast as the clock (only while the tracker counts): waking as if it
            // always did is at worst early, and the tick's figures are at most a tick behind.
            let thresholds = WarningTracker.thresholds(warnMinutes: schedule.policy.warnMinutes)
            for left in plan.countdowns.values where left > 0 {
                let next = thresholds.filter { $0 < left }.max() ?? 0
                wake(within: Self.untilSecond(left - next, after: now))
            }
            if let allowed = plan.decision.allowedAgainAt, allowed > now {
                wake(within: (allowed - now).wholeMilliseconds + 20)
            }

            // Warnings, while the child is there to see them.
            if present {
                var tracker = warnings[user] ?? WarningTracker()
                let due = tracker.update(countdowns: plan.countdowns, warnMinutes: schedule.policy.warnMinutes)
                warnings[user] = tracker
                for warning in due { warn(user: user, warning: warning, now: now) }
            }

            // Entering or leaving a blocked state.
            if plan.blocked {
                if blocked[user] != plan.decision.state {
                    blocked[user] = plan.decision.state
                    lockoutStarted(user: user, plan: plan, lockout: plan.lockout ?? schedule.policy.lockout, zone: schedule.zone, now: now)
                }
            } else if blocked.removeValue(forKey: user) != nil {
                terminateSince[account.uid] = nil
                holds.userTerminatedAt[account.uid] = nil
                agent.recordEvent(
                    AgentEvent(time: now, user: user, kind: .allowedAgain, message: "\(user) may use the computer again"))
            }

            // While an always-allowed app runs, its session is neither ended nor locked (the tracker
            // stops everything else); the lockout completes when the last one exits.
            let allowedApps = live?.running.filter { schedule.policy.rule(for: $0) == .allow } ?? []
            let onlyAllowedApps = !allowedApps.isEmpty && allowedApps.count == live?.running.count
            let action = allowedApps.isEmpty ? plan.sessionAction : .none
            holdLinger(user: user, uid: account.uid, lockedOut: plan.sessionAction == .logout, now: now)
            holdBelt(
                user: user, uid: account.uid, sessions: userSessions, plan: plan,
                onlyAllowedApps: onlyAllowedApps || (plan.blocked && !allowedApps.isEmpty), monotonic: monotonic)
            if action != .lock { lockAskedSince[account.uid] = nil }
            switch action {
            case .none:
                terminateSince[account.uid] = nil
            case .logout:
                // Every session of the child, whatever its class (a `background` one from cron too).
                let all = sessions?.filter { $0.uid == account.uid } ?? []
                endSessions(all, uid: account.uid, user: user, monotonic: monotonic, now: now)
                // Asked again every 2 s while sessions live, KillUser after 5 s.
                if !all.isEmpty { wake(within: 250) }
                if sessions != nil && all.isEmpty {
                    endLeftovers(user: user, uid: account.uid, live: live, monotonic: monotonic, now: now)
                }
            case .lock:
                lockSessions(
                    userSessions, uid: account.uid, user: user, claimIgnored: live?.claimIgnored, monotonic: monotonic, now: now)
                if !userSessions.isEmpty { wake(within: 250) }
            }
        }
        if let retry = network.reconcile(
            cut: networkCuts, undecided: networkUndecided, names: networkNames, now: now, monotonic: monotonic)
        {
            wake(within: retry)
        }
        if state.takeRequestFiled() {
            requestsOutstanding = true
            lastRequestFiled = monotonic
        }
        let justFiled = monotonic - lastRequestFiled < Self.fastAnswerWindowMilliseconds
        let look = justFiled ? Self.fastAnswerLookMilliseconds : Self.slowAnswerLookMilliseconds
        if requestsOutstanding && monotonic - lastAnswerCheck >= look {
            lastAnswerCheck = monotonic
            announceAnswers()
        }
        if requestsOutstanding && justFiled { wake(within: max(10, lastAnswerCheck + look - monotonic)) }
        forgetBelts(sessions: sessions, managedUIDs: Set(users.compactMap { accounts[$0]?.uid }))
        deliver(state.takeMessages())
    }

    /// Tells each child the answer a parent gave to their request for more time (once).
    func announceAnswers() {
        do {
            let (answers, pending) = try agent.store.read { db in
                (try RequestTable.unnotifiedAnswers(db), try RequestTable.pending(db))
            }
            requestsOutstanding = !pending.isEmpty || !answers.isEmpty
            guard !answers.isEmpty else { return }
            for request in answers {
                let body: String
                switch request.status {
                // The grant that answers it tells the child what they got and until when, when it
                // applies (`ExtraTime.childMessage`); a second message here would only repeat it.
                case .approved: continue
                case .denied: body = ChildMessages.answer(askedMinutes: request.minutes, grantedMinutes: nil)
                case .pending: continue
                }
                agent.state.post(AgentState.ChildMessage(user: request.user, summary: "Curfew", body: body, urgency: 1, kind: .answer))
            }
            try agent.store.write { try RequestTable.markNotified(ids: answers.map(\.id), $0) }
        } catch {
            logger.error("cannot read the answers to time requests", metadata: ["error": "\(error)"])
        }
    }

    func warn(user: String, warning: Warning, now: Instant) {
        logger.info("warning", metadata: ["user": "\(user)", "subject": "\(warning.subject.word)", "left.s": "\(warning.remainingSeconds)"])
        let zone = agent.state.policies[user].map { Schedule.zone(for: $0) } ?? ZoneRules.system
        agent.state.post(
            AgentState.ChildMessage(
                user: user, summary: "Curfew", body: ChildMessages.warning(warning, now: now, zone: zone),
                urgency: warning.isCountdown ? 2 : 1, kind: .warning))
        agent.recordEvent(AgentEvent(time: now, user: user, kind: .warning, message: warning.message, details: EventDetails.Warning(warning)))
    }

    func lockoutStarted(user: String, plan: EnforcementPlan, lockout: Lockout, zone: ZoneRules, now: Instant) {
        let reason = plan.decision.blockedReason
        let until = plan.decision.allowedAgainAt.map { "; allowed again at \(zone.iso8601($0))" } ?? ""
        let what: String
        switch lockout {
        case .logout: what = "sessions end and logins are refused"
        case .lock: what = "sessions are locked"
        case .apps: what = "apps are stopped"
        case .none: what = "nothing is stopped (monitor only)"
        case .network: what = "the internet is off"
        }
        logger.notice("lockout", metadata: ["user": "\(user)", "state": "\(plan.decision.state.rawValue)", "lockout": "\(lockout.rawValue)"])
        if lockout != .network {
            // The network lockout tells the child when their traffic is cut (`NetworkLockout`).
            let words = ChildMessages.lockout(plan.decision, lockout: lockout, now: now, zone: zone)
            agent.state.post(AgentState.ChildMessage(user: user, summary: "Curfew", body: words, urgency: 2, kind: .lockout))
        }
        let details = EventDetails.Lockout(
            state: plan.decision.state.rawValue, lockout: lockout.rawValue, allowedAgainAt: plan.decision.allowedAgainAt.map { zone.iso8601($0) })
        agent.recordEvent(AgentEvent(time: now, user: user, kind: .lockout, message: "\(reason): \(what)\(until)", details: details))
    }

    /// TerminateSession for each session, again every 2 s while it lives; if the user still has
    /// sessions 5 s after the first call (a desktop that ignores it), KillUser with SIGKILL.
    /// `why`, when given, says why a session under `lock` is ended instead (in the event).
    func endSessions(
        _ sessions: [LoginSession], uid: UInt32, user: String, monotonic: Int64, now: Instant,
        why: ((LoginSession) -> String)? = nil
    ) {
        guard !sessions.isEmpty else { return }
        let first = terminateSince[uid] ?? monotonic
        terminateSince[uid] = first
        for session in sessions where due(session.id, monotonic) {
            call("TerminateSession", user: user) { try $0.terminateSession(session.id) }
            let reason = why?(session)
            agent.recordEvent(
                AgentEvent(
                    time: now, user: user, kind: .sessionEnded,
                    message: "session \(session.id) of \(user) was ended" + (reason.map { ": \($0)" } ?? ""),
                    details: EventDetails.Session(session: session.id, tty: session.tty, why: reason)))
        }
        if monotonic - first >= Self.terminateGraceMilliseconds,
            monotonic - (lastKillUser[uid] ?? .min / 2) >= Self.terminateGraceMilliseconds
        {
            lastKillUser[uid] = monotonic
            call("KillUser", user: user) { try $0.killUser(uid, signal: SIGKILL) }
            agent.recordEvent(
                AgentEvent(
                    time: now, user: user, kind: .userKilled,
                    message: "\(user)'s sessions did not end within 5 s; every process of \(user) was killed"))
        }
    }

    /// LockSession for each graphical session every 3 s while no time is left, whatever its
    /// LockedHint says (the child can set it on their own session; locking a locked session is
    /// harmless), recorded when the session said it was unlocked. A session with no screen to lock
    /// (a text console, ssh) is ended instead, and so is a graphical one that is not locked
    /// `lockConfirmMilliseconds` after it was first asked: nothing locked it (no screen locker
    /// listens to logind's Lock), or it says it is locked while an app of the child is busy
    /// (`claimIgnored`, the tracker's judgement: a hint the child set, not a locker's).
    func lockSessions(
        _ sessions: [LoginSession], uid: UInt32, user: String, claimIgnored: String?, monotonic: Int64, now: Instant
    ) {
        let lockable = sessions.filter(\.canBeLocked)
        // Since when each graphical session has been asked to lock without being locked.
        let asked = lockAskedSince[uid] ?? [:]
        var stillAsked: [String: Int64] = [:]
        for session in lockable where !session.lockedHint || session.id == claimIgnored {
            stillAsked[session.id] = asked[session.id] ?? monotonic
        }
        lockAskedSince[uid] = stillAsked.isEmpty ? nil : stillAsked
        let notLocked = Set(stillAsked.filter { monotonic - $0.value >= Self.lockConfirmMilliseconds }.keys)
        for session in lockable where !notLocked.contains(session.id) && due(session.id, monotonic, every: Self.relockMilliseconds) {
            call("LockSession", user: user) { try $0.lockSession(session.id) }
            guard !session.lockedHint else { continue }
            agent.recordEvent(
                AgentEvent(
                    time: now, user: user, kind: .sessionLocked, message: "session \(session.id) of \(user) was locked",
                    details: EventDetails.Session(session: session.id)))
        }
        let unlockable = sessions.filter { !$0.canBeLocked || notLocked.contains($0.id) }
        if unlockable.isEmpty {
            terminateSince[uid] = nil
        } else {
            endSessions(unlockable, uid: uid, user: user, monotonic: monotonic, now: now) { session in
                guard notLocked.contains(session.id) else { return "it cannot be locked" }
                return session.id == claimIgnored
                    ? "it said it was locked while an app was busy" : "nothing locked it within \(Self.lockConfirmMilliseconds / 1000) s"
            }
        }
    }

    /// How long a graphical session may stay unlocked after it was asked to lock before it is ended:
    /// a desktop's locker sets LockedHint within a second or two of logind's Lock signal.
    static let lockConfirmMilliseconds: Int64 = 10_000

    /// How often LockSession is asked again of a session while no time is left.
    static let relockMilliseconds: Int64 = 3_000

    func due(_ session: String, _ monotonic: Int64, every interval: Int64 = repeatMilliseconds) -> Bool {
        if let last = lastAction[session], monotonic - last < interval { return false }
        lastAction[session] = monotonic
        if lastAction.count > 256 { lastAction = lastAction.filter { monotonic - $0.value < 60_000 } }
        return true
    }

    /// One logind method call on the enforcer's own connection; a failure is logged and the
    /// connection made again on the next call.
    func call(_ method: String, user: String, _ body: (LogindClient) throws -> Void) {
        let now = ClockReading.now().monotonic
        do {
            if logind == nil {
                guard now >= logindRetryAt else { return }
                logind = try LogindClient(busAddress: agent.configuration.logindBusAddress)
            }
            try body(logind!)
        } catch {
            logger.error("logind call failed", metadata: ["method": "\(method)", "user": "\(user)", "error": "\(error)"])
            logind = nil
            logindRetryAt = now + 1_000
        }
    }

    /// Writes each message to the child's terminals now and queues it for their desktop; the
    /// notification worker sends it (a notification server that does not answer must not hold up
    /// enforcement, nor make the agent start a thread per message).
    func deliver(_ messages: [AgentState.ChildMessage]) {
        for message in messages {
            guard let account = Accounts.account(named: message.user) else { continue }
            // Bodies name apps, whose names a program chose: no escape sequence reaches a terminal. The
            // terminal line has its own `Curfew:` banner (the summary is the notification's title).
            let terminals = TerminalMessages.write(
                UntrustedText.terminal(message.body), toTerminalsOf: account.uid,
                devRoot: agent.configuration.devRoot)
            guard
                let address = DesktopNotifier.sessionBusAddress(uid: account.uid, runtimeRoot: agent.configuration.userRuntimeRoot)
            else {
                if terminals.isEmpty {
                    logger.debug("no terminal or desktop to tell", metadata: ["user": "\(message.user)"])
                }
                continue
            }
            notifications.enqueue(
                DesktopNotifications.Job(
                    user: message.user, uid: account.uid, gid: account.gid, busAddress: address, message: message))
        }
    }
}

extension Agent {
    /// The plan for one user now, from the live figures the tracker keeps.
    func plan(for user: String, schedule: Schedule, live: AgentState.LiveUser?, now: Instant) -> EnforcementPlan {
        Enforcement.plan(schedule: schedule, live: live, running: live?.running ?? [], catalog: catalog, now: now)
    }
}

extension Enforcement {
    /// The figures a decision takes from the tracker's live ones (`live.totals` in milliseconds, `""`
    /// = screen time; figures of another day count as nothing used yet). A child's
    /// request is judged by the same.
    static func dayUsage(schedule: Schedule, live: AgentState.LiveUser?, now: Instant) -> DayUsage {
        var totals = live?.totals ?? [:]
        var screen = live?.screenForLimit ?? 0
        var week: Int64? = live.map { $0.weekBeforeToday + $0.screenForLimit }
        if let day = live?.day, day != schedule.zone.localTime(at: now).date {
            totals = [:]
            screen = 0
            week = nil
        }
        var appSeconds: [String: Int64] = [:]
        for (app, milliseconds) in totals where app != UsageKey.screen { appSeconds[app] = milliseconds / 1000 }
        return DayUsage(
            screenSeconds: screen / 1000, appSeconds: appSeconds, weekSeconds: week.map { $0 / 1000 },
            continuousSeconds: live?.breakClock.continuousSeconds ?? 0, pauseSeconds: live?.breakClock.pauseSeconds ?? 0)
    }

    /// The plan from the agent's live figures of one user.
    static func plan(
        schedule: Schedule, live: AgentState.LiveUser?, running: Set<String>, catalog: AppCatalog, now: Instant
    ) -> EnforcementPlan {
        plan(
            schedule: schedule, now: now, usage: dayUsage(schedule: schedule, live: live, now: now),
            running: running,
            tracked: running.filter { catalog.definition(named: $0) != nil || schedule.policy.rule(for: $0) != nil })
    }
}
