import ArgumentParser
import CurfewReports
import CurfewCore
import CurfewSync
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The computers that announced themselves in `<shared-dir>/machines/` with a well-formed file:
/// machine id, host name, and why its files cannot be believed (a key other than the one pinned here).
func knownComputers(_ shared: SharedDirectory) -> [(machine: String, host: String, problem: String?)] {
    let names = (try? Files.list(shared.machinesPath)) ?? []
    return names.filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted().compactMap { id in
        guard let (announcement, key) = shared.announcement(id) else { return nil }
        switch shared.verifiedKey(of: id, announced: key) {
        case .success: return (id, announcement.host, nil)
        case .failure(let error): return (id, announcement.host, error.reason)
        }
    }
}

/// Every computer's verified confirmation of `record`, by machine id.
func confirmationsByMachine(_ shared: SharedDirectory, record: String) -> [String: SharedDirectory.ConfirmationReading] {
    Dictionary(shared.confirmations(for: record).map { ($0.machine, $0) }, uniquingKeysWith: { first, _ in first })
}

/// What one computer said about one record, for people and for `--json`.
struct ComputerAnswer {
    var machine: String
    var host: String
    var confirmation: Confirmation?
    /// From publishing to the confirmation file being written.
    var seconds: Double?
    /// Why its confirmations cannot be believed, if they cannot.
    var problem: String? = nil

    var line: String {
        guard let confirmation else { return "\(host): not yet" + (problem.map { " (\($0))" } ?? "") }
        let version = confirmation.enforcedVersion.map { "v\($0)" } ?? "?"
        let after = seconds.map { String(format: " in %.2f s", max(0, $0)) } ?? ""
        switch confirmation.outcome {
        case .applied: return "\(host): applied \(version)\(after)"
        case .merged:
            let conflicts = confirmation.conflicts.isEmpty ? "" : " (conflicts: \(confirmation.conflicts.joined(separator: ", ")))"
            return "\(host): merged into \(version)\(after)\(conflicts)"
        case .superseded: return "\(host): superseded (\(version) in force): \(confirmation.reason ?? "")"
        case .rejected: return "\(host): rejected: \(confirmation.reason ?? "no reason given")"
        }
    }

    var json: JSONValue {
        var object = JSONObject([("machine", .string(machine)), ("host", .string(host))])
        object["outcome"] = confirmation.map { .string($0.outcome.rawValue) } ?? .null
        object["reason"] = confirmation?.reason.map { .string($0) } ?? .null
        object["enforcedVersion"] = confirmation?.enforcedVersion.map { .int(Int64($0)) } ?? .null
        object["conflicts"] = .array((confirmation?.conflicts ?? []).map { .string($0) })
        object["milliseconds"] = seconds.map { .int(Int64(($0 * 1000).rounded())) } ?? .null
        return .object(object)
    }
}

/// Waits up to `seconds` until every known computer has confirmed `recordId`, with a progress line on
/// a terminal. `publishedAt` is the wall time just before the record was written.
func waitForConfirmations(_ shared: SharedDirectory, recordId: String, publishedAt: Double, seconds: Double)
    -> [ComputerAnswer]
{
    let computers = knownComputers(shared)
    let deadline = Date().addingTimeInterval(seconds)
    let progress = isatty(2) == 1
    var answers: [ComputerAnswer] = []
    while true {
        let readings = confirmationsByMachine(shared, record: recordId)
        answers = computers.map { computer in
            let reading = readings[computer.machine]
            return ComputerAnswer(
                machine: computer.machine, host: computer.host, confirmation: reading?.confirmation,
                seconds: reading?.confirmation == nil
                    ? nil : reading?.writtenNanoseconds.map { Double($0) / 1e9 - publishedAt },
                problem: computer.problem)
        }
        let done = answers.filter { $0.confirmation != nil }.count
        if progress {
            Output.writeError("\rwaiting for confirmations: \(done) of \(computers.count) computers")
        }
        if done == computers.count || Date() >= deadline { break }
        usleep(50_000)
    }
    if progress { Output.writeError("\r\u{1B}[K") }
    return answers
}

/// How long editing commands wait for the family's computers.
struct WaitOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Seconds to wait for every known computer to confirm (default 5).", valueName: "seconds"))
    var wait: Double = 5

    @Flag(help: "Publish and return at once, without waiting for confirmations.")
    var noWait = false

    func validate() throws {
        guard wait >= 0 && wait <= 3600 else {
            throw ValidationError("wait must be between 0 and 3600 seconds, got \(wait)")
        }
    }

    var seconds: Double? { noWait ? nil : wait }
}

struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync", abstract: "See which computers applied which policy.", subcommands: [SyncStatus.self])
}

struct SyncStatus: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Every computer of the shared directory: last seen, enforced versions, pending and rejected records.")

    @OptionGroup var location: LocationOptions
    @Flag(name: .long, help: "Print the result as JSON.") var json = false

    func run() throws {
        let workspace = Workspace(location)
        let scan = try workspace.scan()
        let records = ((try? Files.list(workspace.shared.recordsPath)) ?? []).filter(SharedDirectory.isRecordName).sorted()
        let valid = Set(scan.valid.map(\.id)).union(scan.grants.map(\.id))
        let newestOnDisk = Dictionary(scan.valid.map { ($0.user, $0.version) }, uniquingKeysWith: max)
        // Every record's confirmations, read and verified once: record -> machine -> reading.
        var answers: [String: [String: SharedDirectory.ConfirmationReading]] = [:]
        for record in records {
            answers[record] = confirmationsByMachine(workspace.shared, record: record)
        }
        // Today's usage summaries of every user with a policy, by computer.
        let today = ZoneRules.system.localTime(at: Workspace.now()).date
        var usage: [String: [(user: String, reading: SharedDirectory.UsageReading)]] = [:]
        for user in Set(scan.valid.map(\.user)).sorted() {
            for reading in workspace.shared.usageReadings(user: user, from: today, through: today) {
                usage[reading.machine, default: []].append((user, reading))
            }
        }
        var computers: [JSONValue] = []
        var lines: [String] = []
        for (machine, host, problem) in knownComputers(workspace.shared) {
            var lastSeen: Int64? = nil
            var enforced: [String: (time: Int64, version: Int)] = [:]
            var rejected: [(String, String)] = []
            var confirmed = Set<String>()
            for record in records {
                guard let reading = answers[record]?[machine], let confirmation = reading.confirmation
                else { continue }
                confirmed.insert(record)
                lastSeen = max(lastSeen ?? .min, reading.writtenNanoseconds ?? confirmation.time * 1_000_000_000)
                // What a computer enforces never goes back, so the highest version it reported is current
                // (confirmation times have whole seconds and cannot order answers of the same second).
                if let user = confirmation.user, let version = confirmation.enforcedVersion,
                    version >= enforced[user]?.version ?? .min
                {
                    enforced[user] = (confirmation.time, version)
                }
                if confirmation.outcome == .rejected { rejected.append((record, confirmation.reason ?? "")) }
            }
            // Pending: valid records this computer has not answered yet.
            let pending = records.filter { valid.contains($0) && !confirmed.contains($0) }
            // A version in force whose record is no longer in the shared directory (deleted or damaged):
            // the computer keeps it, but no other computer can learn it from the folder any more.
            let missing = enforced.filter { $0.value.version > newestOnDisk[$0.key] ?? 0 }.sorted { $0.key < $1.key }
            let seen = lastSeen.map { utcTimestamp($0 / 1_000_000_000) }
            computers.append(
                .object(
                    JSONObject([
                        ("machine", .string(machine)), ("host", .string(host)),
                        ("lastSeen", seen.map { .string($0) } ?? .null),
                        ("enforced", .object(JSONObject(enforced.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value.version))) }))),
                        ("pending", .array(pending.map { .string($0) })),
                        (
                            "missingRecords",
                            .array(
                                missing.map {
                                    .object(JSONObject([("user", .string($0.key)), ("version", .int(Int64($0.value.version)))]))
                                })
                        ),
                        ("rejected", .array(rejected.map { .object(JSONObject([("record", .string($0.0)), ("reason", .string($0.1))])) })),
                        ("keyProblem", problem.map { .string($0) } ?? .null),
                        (
                            "usageToday",
                            .array(
                                (usage[machine] ?? []).map { user, reading in
                                    var entry = JSONObject([("user", .string(user))])
                                    entry["screenSeconds"] = reading.summary.map { .int(UserStatus.seconds($0.screenMilliseconds)) } ?? .null
                                    entry["written"] = reading.summary.map { .string(utcTimestamp($0.time)) } ?? .null
                                    entry["problem"] = reading.problem.map { .string($0) } ?? .null
                                    return .object(entry)
                                })
                        ),
                    ])))
            lines.append("\(host) (\(machine)): last seen \(seen ?? "never")")
            if let problem { lines.append("  key: \(problem)") }
            let shared = (usage[machine] ?? []).map { user, reading in
                reading.summary.map {
                    "\(user) \(formatSeconds(UserStatus.seconds($0.screenMilliseconds))) (written \(utcTimestamp($0.time)))"
                } ?? "\(user): \(reading.problem ?? "unreadable")"
            }
            lines.append("  usage today: \(shared.isEmpty ? "none shared" : shared.joined(separator: ", "))")
            let versions = enforced.sorted { $0.key < $1.key }.map { "\($0.key) v\($0.value.version)" }
            lines.append("  enforced: \(versions.isEmpty ? "nothing yet" : versions.joined(separator: ", "))")
            lines.append("  pending: \(pending.isEmpty ? "none" : pending.map { String($0.prefix(12)) }.joined(separator: ", "))")
            for (user, entry) in missing {
                let newest = newestOnDisk[user].map { "the newest there is v\($0)" } ?? "there is no record of \(user) there"
                lines.append("  record in force missing: \(user) v\(entry.version) is not in the shared directory (\(newest))")
            }
            for (record, reason) in rejected { lines.append("  rejected \(record.prefix(12)): \(reason)") }
        }
        workspace.finish()
        if json {
            Output.line(JSONValue.array(computers).prettyString)
        } else if computers.isEmpty {
            Output.line("no computer has announced itself in \(workspace.shared.path) yet (curfewd writes machines/<id>.json at start)")
        } else {
            // Host names, reasons and problems come from files in the shared directory.
            lines.forEach { Output.line(UntrustedText.terminal($0)) }
        }
    }
}
