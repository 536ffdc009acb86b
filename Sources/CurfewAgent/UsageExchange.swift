import CurfewCore
import CurfewLinux
import CurfewStore
import CurfewSync
import Foundation
import Logging

/// Shares usage between the family's computers through the shared directory: writes this computer's
/// signed summary of each managed user's day (`usage/<machine-id>/<user>/<day>.json`) whenever it
/// changed, at most every `usageIntervalMilliseconds`, and reads the other computers' summaries of
/// users whose daily limit counts every computer. What it reads is kept in the database (the latest
/// per computer, user and day), so a summary deleted or put back older in the shared directory does
/// not give time back. It runs on a thread of its own: a slow network file system never holds up
/// counting or enforcement.
final class UsageExchange {
    let agent: Agent
    var published: [String: [UsageSummary.Bucket]] = [:]
    var reported = Set<String>()

    /// Deriving a key id expands the private key (as costly as a signature): once, not per summary.
    let machineKeyID: String

    init(agent: Agent) {
        self.agent = agent
        machineKeyID = agent.machine.key.id
    }

    var logger: Logger { agent.logger }
    var shared: SharedDirectory { agent.loader.shared }

    func run(until stop: StopFlag) {
        let interval = agent.configuration.usageIntervalMilliseconds
        var lastPublish: Int64 = .min / 2
        var lastRead: Int64 = .min / 2
        while !stop.isSet {
            let monotonic = ClockReading.now().monotonic
            let now = agent.clock.wallSecond
            if monotonic - lastPublish >= interval {
                lastPublish = monotonic
                publish(now: now)
            }
            // Other computers' summaries matter only to a limit that counts every computer.
            let readsOthers = agent.state.policies.values.contains { $0.limitScope == .allComputers }
            let readInterval = min(interval, 5_000)
            if readsOthers && monotonic - lastRead >= readInterval {
                lastRead = monotonic
                readOthers(now: now)
            }
            // Asleep until the next summary is due (and the next read, if any), or the agent stops; a
            // policy that starts counting every computer is read at the latest with the next summary.
            var due = lastPublish + interval
            if readsOthers { due = min(due, lastRead + readInterval) }
            stop.wait(milliseconds: max(1, due - ClockReading.now().monotonic))
        }
        publish(now: agent.clock.wallSecond)
    }

    /// Writes today's and yesterday's summary of every managed user whose figures changed since
    /// they were last written (yesterday's: its last minutes may not have been written before midnight).
    func publish(now: Instant) {
        var current = Set<String>()
        for (user, policy) in agent.state.policies {
            let today = Schedule.zone(for: policy).localTime(at: now).date
            for day in [today.adding(days: -1), today] {
                let key = "\(user)/\(day)"
                current.insert(key)
                let rows: [UsageTable.Row]
                do { rows = try agent.store.read { try UsageTable.rows(user: user, from: day, through: day, $0) } } catch {
                    logger.error("cannot read usage to share", metadata: ["user": "\(user)", "error": "\(error)"])
                    continue
                }
                let summary = UsageSummary(
                    machine: agent.machine.id, host: agent.machine.host, key: machineKeyID, user: user, day: day,
                    writing: rows.map {
                        UsageSummary.Bucket(hour: $0.hour, app: $0.app, milliseconds: $0.milliseconds)
                    },
                    time: now.seconds)
                guard !summary.buckets.isEmpty, published[key] != summary.buckets else { continue }
                do {
                    try shared.publish(summary, as: agent.machine)
                    published[key] = summary.buckets
                } catch {
                    // Retried at the next interval; counting and enforcement go on meanwhile.
                    logger.warning(
                        "cannot write a usage summary to the shared directory", metadata: ["user": "\(user)", "error": "\(error)"])
                }
            }
        }
        // Forget what was written for users no longer managed and for days before yesterday.
        published = published.filter { current.contains($0.key) }
    }

    /// Reads the other computers' summaries of today for users whose daily limit counts every
    /// computer, keeps the valid ones and hands the day's total to the tracker.
    func readOthers(now: Instant) {
        for (user, policy) in agent.state.policies where policy.limitScope == .allComputers {
            let today = Schedule.zone(for: policy).localTime(at: now).date
            let readings = shared.usageReadings(user: user, from: today, through: today, excluding: agent.machine.id)
            do {
                let total = try agent.store.write { db -> Int64 in
                    for reading in readings {
                        if let summary = reading.summary { try RemoteUsageTable.keep(summary, db) }
                    }
                    return try RemoteUsageTable.summaries(user: user, from: today, through: today, db)
                        .reduce(0) { $0 + $1.screenMilliseconds }
                }
                agent.state.setOtherComputers(user, day: today, milliseconds: total)
            } catch {
                logger.error("cannot keep other computers' usage", metadata: ["user": "\(user)", "error": "\(error)"])
            }
            for reading in readings {
                guard let problem = reading.problem, reported.insert("\(reading.machine)/\(user)/\(reading.day)/\(problem)").inserted
                else { continue }
                logger.warning(
                    "ignoring a usage summary",
                    metadata: ["machine": "\(reading.machine)", "user": "\(user)", "day": "\(reading.day)", "reason": "\(problem)"])
            }
        }
    }
}
