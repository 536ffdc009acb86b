import CurfewCore
import CurfewLinux
import CurfewStore
import CurfewSync
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// The agent's blocking loops, each run by a `ThreadService` on a thread of its own.
extension Agent {
    func runTracker(_ stop: StopFlag) {
        recordEvent(AgentEvent(time: clock.wallInstant, kind: .agentStarted, message: "curfewd \(Agent.version) started"))
        let tracker = Tracker(
            state: state, store: store, catalog: catalog, logger: logger,
            useProcessConnector: configuration.useProcessConnector,
            stopGraceMilliseconds: configuration.stopGraceMilliseconds,
            enforcementPollMilliseconds: configuration.enforcementPollMilliseconds, identities: identities,
            execGuard: execGuard, clock: configuration.clock.now)
        tracker.start()
        _ = SystemdNotify.send("READY=1\nSTATUS=tracking \(state.policies.count) managed users")
        logger.info(
            "curfewd ready",
            metadata: [
                "users": "\(state.policies.count)", "process.connector": "\(tracker.watch.usesProcessConnector)",
                "exec.guard": "\(execGuardMode)",
                "state.dir": "\(configuration.stateDirectory)",
            ])
        tracker.run(tickMilliseconds: configuration.tickMilliseconds, until: stop)
        recordEvent(
            AgentEvent(time: clock.wallInstant, kind: .agentStopped, message: "curfewd stopped"))
    }

    /// Replaces events older than the retention period by per-day counts, keeping the hash chain; says
    /// so in an event. A broken chain is left as it is (and logged): summarising it would hide the break.
    func summariseOldEvents(now: Instant) {
        let days = configuration.eventRetentionDays
        let before = now - .seconds(Int64(days) * 86_400)
        do {
            try store.write { db in
                try AgentStateTable.set(AgentStateKeys.eventRetentionDays, days, db)
                let count = try AuditChain.summarise(before: before, zone: ZoneRules.system, db)
                guard count > 0 else { return }
                logger.info("summarised old events", metadata: ["count": "\(count)", "retention.days": "\(days)"])
                try EventLog.append(
                    AgentEvent(
                        time: now, kind: .eventsSummarised,
                        message: "\(count) events older than \(days) days were replaced by daily counts",
                        details: EventDetails.Summarised(count: count, retentionDays: days)), db)
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
                summariseOldEvents(now: clock.wallInstant)
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
        let accounts = SocketAccounts()
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
                        "answered.at.accept": "\(tally.answeredAtAccept)",
                        "watches.refused": "\(tally.watchesRefused)", "watchers.dropped": "\(tally.watchersDropped)",
                        "uid": "\(worst?.key ?? 0)", "uid.count": "\(worst?.value ?? 0)",
                    ])
            }, until: { stop.isSet }, stopDescriptor: stop.descriptor, accountOf: { accounts.account(of: $0) },
            watchRefusal: SocketProtocol.watchRefused.canonicalString, watchWake: state.watchWake.descriptor
        ) { line, caller in
            SocketProtocol.respond(request: line, caller: caller, agent: self)
        }
    }
}
