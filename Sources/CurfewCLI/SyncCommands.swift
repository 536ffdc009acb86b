import ArgumentParser
import CurfewReports
import CurfewCore
import CurfewLinux
import CurfewSync
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Every computer's verified confirmation of `record`, by machine id.
func confirmationsByMachine(_ shared: SharedDirectory, record: String, roster: MachineRoster)
    -> [String: SharedDirectory.ConfirmationReading]
{
    Dictionary(shared.confirmations(for: record, roster: roster).map { ($0.machine, $0) }, uniquingKeysWith: { first, _ in first })
}

/// What one computer said about one record, for people and for `--json`.
struct ComputerAnswer {
    var machine: String
    var host: String
    var confirmation: Confirmation?
    /// From publishing to this computer seeing the confirmation, on this computer's clock (a sync tool
    /// copies the other computer's mtime, so the file's time would mix two clocks).
    var seconds: Double?
    /// Why its confirmations cannot be believed, if they cannot.
    var problem: String? = nil

    var line: String {
        guard let confirmation else { return "\(host): not yet" + (problem.map { " (\($0))" } ?? "") }
        let version = confirmation.enforcedVersion.map { "v\($0)" } ?? "?"
        let after = seconds.map { String(format: " in %.2f s", max(0, $0)) } ?? ""
        switch confirmation.outcome {
        case .applied:
            // A removal leaves no policy in force: the computer says so, not a version.
            guard confirmation.enforcedVersion != nil else { return "\(host): applied (no longer managed)\(after)" }
            return "\(host): applied \(version)\(after)"
        case .merged:
            let conflicts = confirmation.conflicts.isEmpty ? "" : " (conflicts: \(confirmation.conflicts.joined(separator: ", ")))"
            return "\(host): merged into \(version)\(after)\(conflicts)"
        case .superseded: return "\(host): superseded (\(version) in force): \(confirmation.reason ?? "")"
        case .rejected: return "\(host): rejected: \(confirmation.reason ?? "no reason given")"
        }
    }

    /// What `--json` prints of the answer: every field present, `null` while it has not answered.
    var json: AnswerJSON {
        AnswerJSON(
            machine: machine, host: host, outcome: confirmation?.outcome.rawValue, reason: confirmation?.reason,
            enforcedVersion: confirmation?.enforcedVersion, conflicts: confirmation?.conflicts ?? [],
            milliseconds: seconds.map { Int64(($0 * 1000).rounded()) })
    }

    struct AnswerJSON: Encodable {
        var machine: String
        var host: String
        @OrNull var outcome: String?
        @OrNull var reason: String?
        @OrNull var enforcedVersion: Int?
        var conflicts: [String]
        @OrNull var milliseconds: Int64?
    }
}

/// Waits up to `seconds` until every enrolled computer has confirmed `recordId`, with a progress line
/// on a terminal. `publishedAt` is this computer's wall time just before the record was written; each
/// answer's time is when this computer first saw it. Looks again whenever the confirmations directory
/// or one of the computers' own directories in it changes (and every second where the shared folder
/// is on a network filesystem).
func waitForConfirmations(_ shared: SharedDirectory, recordId: String, publishedAt: Double, seconds: Double)
    -> [ComputerAnswer]
{
    let roster = shared.roster()
    let computers = roster.enrolled
    let deadline = Date().addingTimeInterval(seconds)
    let progress = isatty(2) == 1
    var answers: [ComputerAnswer] = []
    var seen: [String: Double] = [:]
    // A computer's first confirmation creates its directory in `confirmations`, so that one is watched too.
    let directories = [shared.confirmationsPath] + computers.map { shared.confirmationsPath(of: $0.machine) }
    _ = DirectoryWatch.lookUntilFound(
        in: directories, remainingMilliseconds: { Int64((deadline.timeIntervalSinceNow * 1000).rounded(.up)) }
    ) { () -> Bool? in
        let readings = confirmationsByMachine(shared, record: recordId, roster: roster)
        let now = Date().timeIntervalSince1970
        answers = computers.map { computer in
            let confirmation = readings[computer.machine]?.confirmation
            if confirmation != nil && seen[computer.machine] == nil { seen[computer.machine] = now }
            return ComputerAnswer(
                machine: computer.machine, host: computer.host, confirmation: confirmation,
                seconds: confirmation == nil ? nil : seen[computer.machine].map { $0 - publishedAt }, problem: computer.problem)
        }
        let done = answers.filter { $0.confirmation != nil }.count
        if progress {
            Output.writeError("\rwaiting for confirmations: \(done) of \(computers.count) computers")
        }
        return done == computers.count ? true : nil
    }
    if progress { Output.writeError("\r\u{1B}[K") }
    return answers
}

/// How long editing commands wait for the family's computers.
struct WaitOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Seconds to wait for every enrolled computer to confirm (default 5, or longer when the local Syncthing's watcher delay on folder curfew needs it: twice the delay plus 3 s).",
            valueName: "seconds"))
    var wait: Double?

    @Flag(help: "Publish and return at once, without waiting for confirmations.")
    var noWait = false

    func validate() throws {
        if let wait, !(wait >= 0 && wait <= SyncWait.maximumSeconds) {
            throw ValidationError("wait must be between 0 and \(Int(SyncWait.maximumSeconds)) seconds, got \(wait)")
        }
    }

    /// nil with --no-wait; else --wait, else the default for the local Syncthing's delay.
    var seconds: Double? {
        if noWait { return nil }
        return wait ?? SyncWait.defaultSeconds(syncDelaySeconds: LocalSyncthing.syncDelaySeconds())
    }
}

/// The local Syncthing as the CLI finds it: its home from `$CURFEW_SYNCTHING_HOME` (a Syncthing run with
/// `-home DIR`), else root's.
enum LocalSyncthing {
    static var home: String? {
        ProcessInfo.processInfo.environment["CURFEW_SYNCTHING_HOME"].flatMap { $0.isEmpty ? nil : $0 }
    }

    static func config() -> (path: String, config: SyncthingConfig)? { try? SyncthingConfig.load(home: home) }

    /// How long the local Syncthing holds a change of folder `curfew` before sending it, when it has one.
    static func syncDelaySeconds() -> Double? { config()?.config.folder()?.syncDelaySeconds }
}

struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync", abstract: "See which computers applied which policy, and enrol computers.",
        subcommands: [SyncStatus.self, SyncEnrol.self, SyncSetup.self, SyncPrune.self])
}

struct SyncStatus: ParsableCommand {
    /// What is wrong with the sync itself: two computers under one machine id, a folder a child could
    /// reach, a Syncthing that holds changes back longer than the usual wait.
    static func warnings(
        _ workspace: Workspace, roster: MachineRoster, answers: [String: [String: SharedDirectory.ConfirmationReading]]
    ) -> [String] {
        var warnings: [String] = []
        for entry in roster.enrolled {
            let keys = Set(answers.values.compactMap { $0[entry.machine]?.claimedKey })
            if keys.count > 1 {
                warnings.append(
                    "two computers write as machine id \(entry.machine) (confirmations signed by keys \(keys.sorted().joined(separator: ", "))): a clone? On one of them: rm /etc/machine-id && systemd-machine-id-setup, restart curfewd, and enrol it")
            }
        }
        let config = LocalSyncthing.config()?.config
        let sharedPath = workspace.shared.path
        let resolved = SyncSetup.realPath(sharedPath)
        let isSymlink = (try? FileManager.default.destinationOfSymbolicLink(atPath: sharedPath)) != nil
        let folder = config?.folder()
        if isSymlink || folder.map({ SyncSetup.realPath($0.path) == resolved }) == true {
            warnings += SyncthingFolder.warnings(resolved)
        }
        if let folder {
            if !folder.watcherEnabled {
                warnings.append(
                    "Syncthing's file watcher is off for folder curfew: a change waits up to \(Int(folder.rescanIntervalSeconds)) s for a rescan (curfew sync setup --syncthing turns it on)")
            } else if SyncWait.isTooShort(SyncWait.minimumSeconds, syncDelaySeconds: folder.watcherDelaySeconds) {
                let wait = SyncWait.defaultSeconds(syncDelaySeconds: folder.syncDelaySeconds)
                warnings.append(
                    "Syncthing's watcher delay on folder curfew is \(String(format: "%g", folder.watcherDelaySeconds)) s, longer than a \(String(format: "%g", SyncWait.minimumSeconds)) s wait allows: editing commands wait \(String(format: "%g", wait)) s by default (curfew sync setup --syncthing sets 1 s)")
            }
        }
        return warnings
    }

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
        let roster = workspace.shared.roster()
        // Every record's confirmations, read and verified once: record -> machine -> reading.
        var answers: [String: [String: SharedDirectory.ConfirmationReading]] = [:]
        for record in records {
            answers[record] = confirmationsByMachine(workspace.shared, record: record, roster: roster)
        }
        // Today's usage summaries of every user with a policy, by computer.
        let today = ZoneRules.system.localTime(at: Workspace.now()).date
        var usage: [String: [(user: String, reading: SharedDirectory.UsageReading)]] = [:]
        for user in Set(scan.valid.map(\.user)).sorted() {
            for reading in workspace.shared.usageReadings(user: user, from: today, through: today, roster: roster) {
                usage[reading.machine, default: []].append((user, reading))
            }
        }
        var computers: [ComputerStatusJSON] = []
        var lines: [String] = []
        for entry in roster.all {
            let (machine, host, problem) = (entry.machine, entry.host, entry.problem)
            guard entry.isEnrolled else {
                // Whoever can write to the folder can announce a computer: it counts for nothing until a
                // parent enrols it, so only what it claims is shown.
                let fingerprint = entry.announcedKey.map { KeyFingerprint.text(of: $0) }
                computers.append(.announced(.init(machine: machine, host: host, keyFingerprint: fingerprint, keyProblem: problem)))
                lines.append("\(host) (\(machine)): \(problem ?? MachineRoster.notEnrolled)")
                if let fingerprint {
                    lines.append("  its key: \(fingerprint); if this is one of your computers: curfew sync enrol \(machine)")
                }
                continue
            }
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
                .enrolled(
                    .init(
                        machine: machine, host: host, lastSeen: seen, enforced: NamedValues(sorting: enforced.mapValues(\.version)),
                        pending: pending, missingRecords: missing.map { .init(user: $0.key, version: $0.value.version) },
                        rejected: rejected.map { .init(record: $0.0, reason: $0.1) }, keyProblem: problem,
                        usageToday: (usage[machine] ?? []).map { user, reading in
                            .init(
                                user: user, screenSeconds: reading.summary.map { UserStatus.seconds($0.screenMilliseconds) },
                                written: reading.summary.map { utcTimestamp($0.time) }, problem: reading.problem)
                        })))
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
        for warning in Self.warnings(workspace, roster: roster, answers: answers) { Output.warning(UntrustedText.terminal(warning)) }
        if json {
            Output.json(computers)
        } else if computers.isEmpty {
            Output.line("no computer has announced itself in \(workspace.shared.path) yet (curfewd writes machines/<id>.json at start)")
        } else {
            // Host names, reasons and problems come from files in the shared directory.
            lines.forEach { Output.line(UntrustedText.terminal($0)) }
        }
    }
}

/// `curfew sync enrol ID`: a parent's word that a computer of the shared directory is one of the
/// family's, so that editing commands wait for it and its usage counts.
struct SyncEnrol: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enrol",
        abstract: "Enrol a computer of the shared directory with this computer's parent key.",
        discussion: """
            Signs enrolments/ID.json with this computer's parent key: from then on every computer that \
            trusts that key waits for computer ID after an edit and counts its usage summaries. Without \
            --key, the key computer ID announced in machines/ID.json is enrolled, after showing its \
            fingerprint (compare it with curfew key show --machine on that computer); with --key FILE, \
            the machine key in FILE (curfew key export --machine on that computer).
            """)

    @OptionGroup var location: LocationOptions
    @Argument(help: "The computer's machine id (as curfew sync status lists it).") var machine: String
    @Option(name: .long, help: ArgumentHelp("The computer's machine key file instead of the key it announced.", valueName: "file"))
    var key: String?
    @Flag(name: .long, help: "Do not ask for confirmation.") var yes = false

    func run() throws {
        guard MachineID.isValid(machine) else {
            throw CLIError("machine id must be 1 to 64 letters, digits, - or _, got \(quoted(machine))", .invalidArguments)
        }
        var fileKey: PublicKey?
        if let key {
            let bytes: [UInt8]
            do { bytes = try Files.readRegularFile(key, maxBytes: KeyCommand.maxFileBytes) } catch {
                throw CLIError(error.description, error.isPermissionDenied ? .notPermitted : .invalidArguments)
            }
            fileKey = try KeyCommand.parsePublicKey(bytes, source: key)
        }
        let workspace = Workspace(location)
        try workspace.requireInitialised()
        let parent = try workspace.keyRing.loadSigningKey()
        let announced = workspace.shared.announcement(machine)
        guard let machineKey = fileKey ?? announced?.1 else {
            throw CLIError(
                "computer \(machine) has not announced itself in \(workspace.shared.machinesPath) (start its curfewd, or give its key with --key FILE)",
                .invalidArguments)
        }
        let host = announced?.0.host ?? machine
        if let entry = workspace.shared.roster().entries[machine], entry.key == machineKey {
            Output.line("computer \(UntrustedText.terminal(host)) (\(machine)) is already enrolled with key \(machineKey.id)")
            return
        }
        Output.line("computer \(UntrustedText.terminal(host)) (\(machine)), machine key \(machineKey.id)")
        Output.line("  fingerprint: \(KeyFingerprint.text(of: machineKey))")
        if fileKey != nil, let announced, announced.1 != machineKey {
            Output.warning("machines/\(machine).json announces another key, \(announced.1.id): the key of --key is enrolled")
        }
        guard yes || Output.confirm("Enrol this computer? Edits will wait for it and its usage will count.") else {
            throw CLIError("not confirmed; nothing changed", .failure)
        }
        let enrolment = MachineEnrolment(
            machine: machine, host: host, publicKey: machineKey.base64, keyId: machineKey.id, author: parent.id, time: Workspace.now().seconds)
        try workspace.shared.publish(enrolment, signedBy: parent)
        Output.line("enrolled computer \(machine) with parent key \(parent.id)")
    }
}

/// `curfew sync prune`: confirmations of records that are gone, unusable record files and leftover
/// temporary files, each older than a day.
struct SyncPrune: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Remove confirmations of deleted records and rejected files older than a day.",
        discussion: """
            Lists what it will remove and asks (--yes skips the question): confirmations of records no \
            longer in records/, record files that can never be used (malformed, tampered, forged by a \
            trusted key's name), and temporary files of interrupted writes, each last changed more than \
            a day ago. Records signed by keys this computer does not trust, or has revoked, are kept: \
            another computer may trust them.
            """)

    @OptionGroup var location: LocationOptions
    @Flag(name: .long, help: "Do not ask for confirmation.") var yes = false

    func run() throws {
        let workspace = Workspace(location)
        try workspace.requireInitialised()
        let trusted = try workspace.keyRing.trustedKeys()
        let plan = workspace.shared.prunePlan(trusted: trusted, now: Workspace.now())
        guard !plan.items.isEmpty else {
            Output.line("nothing to prune in \(workspace.shared.path)")
            return
        }
        for item in plan.items { Output.lineNow(UntrustedText.terminal("\(item.path): \(item.reason)")) }
        guard yes || Output.confirm("Remove these \(plan.items.count) files?") else {
            throw CLIError("not confirmed; nothing removed", .failure)
        }
        let failed = workspace.shared.prune(plan)
        for (_, error) in failed { Output.warning(error.description) }
        Output.line("removed \(plan.items.count - failed.count) of \(plan.items.count) files")
        if !failed.isEmpty { throw CLIError("\(failed.count) files could not be removed", failed.first!.error.isPermissionDenied ? .notPermitted : .failure) }
    }
}

/// One computer in `curfew sync status --json`: what an announced computer claims, or what an enrolled
/// one confirmed (every field present, `null` when unknown).
enum ComputerStatusJSON: Encodable {
    struct Announced: Encodable {
        var machine: String
        var host: String
        var enrolled = false
        @OrNull var keyFingerprint: String?
        @OrNull var keyProblem: String?
    }

    struct Enrolled: Encodable {
        struct MissingRecord: Encodable {
            var user: String
            var version: Int
        }

        struct Rejected: Encodable {
            var record: String
            var reason: String
        }

        struct Usage: Encodable {
            var user: String
            @OrNull var screenSeconds: Int64?
            @OrNull var written: String?
            @OrNull var problem: String?
        }

        var machine: String
        var host: String
        var enrolled = true
        @OrNull var lastSeen: String?
        /// The version each user is enforced at.
        var enforced: NamedValues<Int>
        var pending: [String]
        var missingRecords: [MissingRecord]
        var rejected: [Rejected]
        @OrNull var keyProblem: String?
        var usageToday: [Usage]
    }

    case announced(Announced)
    case enrolled(Enrolled)

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .announced(let computer): try computer.encode(to: encoder)
        case .enrolled(let computer): try computer.encode(to: encoder)
        }
    }
}
