import ArgumentParser
import CurfewCore
import CurfewReports
import CurfewStore
import CurfewSync
import Foundation

/// `--state-dir` and `--shared-dir`, taken by every command.
public struct LocationOptions: ParsableArguments, Sendable {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The state directory (default: $CURFEW_STATE_DIR, else /var/lib/curfew).", valueName: "dir"))
    var stateDir: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The shared directory that carries records (default: $CURFEW_SHARED_DIR, else <state-dir>/shared).",
            valueName: "dir"))
    var sharedDir: String?

    public init() {}

    var resolvedStateDirectory: String {
        Locations.stateDirectory(stateDir, environment: ProcessInfo.processInfo.environment)
    }

    var resolvedSharedDirectory: String {
        Locations.sharedDirectory(
            sharedDir, stateDirectory: resolvedStateDirectory, environment: ProcessInfo.processInfo.environment)
    }
}

/// The state and shared directories as one command sees them. Index rows learned while scanning are
/// kept in memory and stored by `finish()` only when the command succeeds, so a failed command leaves
/// both directories exactly as they were.
final class Workspace {
    let stateDirectory: String
    let shared: SharedDirectory
    let keyRing: KeyRing
    private var store: StateStore?
    private var pendingIndex: (entries: [IndexedRecord], vanished: [String])?
    private var cachedScan: RecordScan?
    private var folds: [String: PolicyMerge.Result] = [:]

    static let databaseName = "curfew.db"
    /// How long a write waits for the agent's lock (the login check must not wait long).
    var busySeconds: Double = 5

    init(_ options: LocationOptions) {
        stateDirectory = options.resolvedStateDirectory
        keyRing = KeyRing(stateDirectory: stateDirectory)
        shared = SharedDirectory(path: options.resolvedSharedDirectory, trust: keyRing)
    }

    var databasePath: String { "\(stateDirectory)/\(Workspace.databaseName)" }

    /// Whether this account may read the state directory (a parent, or anyone with their own for a test
    /// or demo); a child may not, and reads their own figures through the agent.
    var stateDirectoryReadable: Bool {
        !Files.isDirectory(stateDirectory) || access(stateDirectory, R_OK | X_OK) == 0
    }

    /// Fails with exit 69 unless `curfew init` has set up the state and shared directories.
    func requireInitialised() throws {
        try requireStateDirectory()
        guard Files.isDirectory(shared.recordsPath) else {
            throw CLIError("shared directory \(shared.path) is unavailable: \(shared.recordsPath) is missing", .unavailable)
        }
    }

    /// Fails with exit 69 unless `curfew init` has set up the state directory (77 when it cannot be
    /// read); the shared directory is not needed.
    func requireStateDirectory() throws {
        guard Files.isDirectory(keyRing.directory) else {
            if Files.isDirectory(stateDirectory) && access(stateDirectory, R_OK | X_OK) != 0 {
                throw CLIError(
                    "cannot read the state directory \(stateDirectory) (only a parent may do this; try sudo)", .notPermitted)
            }
            throw CLIError("state directory \(stateDirectory) is not initialised (run curfew init)", .unavailable)
        }
    }

    func openStore() throws -> StateStore {
        if let store { return store }
        do {
            let opened = try StateStore(path: databasePath, busySeconds: busySeconds)
            store = opened
            return opened
        } catch {
            throw CLIError("cannot open the database \(databasePath): \(error)", .failure)
        }
    }

    /// Every record in the shared directory, checked; each ignored one gets a warning on stderr
    /// when it concerns `user` (or every user when nil).
    func scan(warningsFor user: String? = nil) throws -> RecordScan {
        if let cachedScan { return cachedScan }
        try requireInitialised()
        let trusted = try keyRing.trustedKeys()
        let revoked = try keyRing.revocations()
        let index = (try? openStore().read { try RecordIndex.all($0) }) ?? [:]
        let scan = try RecordScan.scan(shared, trusted: trusted, index: index, revoked: revoked)
        for ignored in scan.ignored where user == nil || ignored.user == nil || ignored.user == user {
            Output.warning("ignored record \(ignored.name): \(ignored.reason)")
        }
        pendingIndex = (scan.newIndexEntries, scan.vanished)
        cachedScan = scan
        return scan
    }

    /// The user's records folded (`PolicyMerge`): the policy in force, concurrent edits merged, each
    /// record it needs verified again from its file.
    func policyState(of user: String) throws -> PolicyMerge.Result {
        try Policy.validateUserName(user)
        if let folded = folds[user] { return folded }
        let folded = try scan(warningsFor: user).fold(user: user) { try load($0) }
        folds[user] = folded
        return folded
    }

    /// The user's policy in force and the record that decides its version (the newest; with merged
    /// edits, the latest of them). The next edit is based on `record.version`.
    ///
    /// When this computer's agent keeps a newer version than the records fold to (its record is missing
    /// from the shared directory, or no longer verifies), that version's policy is the one in force: it
    /// is returned with the record's version raised to it, so the next edit starts from what is
    /// enforced and is newer than it.
    func currentPolicy(of user: String) throws -> (policy: Policy, record: RecordSummary) {
        let state = try policyState(of: user)
        if let kept = try policyInForce(only: [user], failOpen: true).entries[user], case .kept = kept.source,
            var record = state.record
        {
            record.version = kept.version
            return (kept.policy, record)
        }
        guard let policy = state.policy, let record = state.record else {
            throw CLIError("unknown user \(quoted(user)): no policy for this user (add one with curfew user add \(user))", .invalidArguments)
        }
        return (policy, record)
    }

    /// Which policy is in force for every user as this computer's agent decides it (`PolicyInForce`):
    /// the records' fold, the last good policies and newest versions the agent kept in the database, the
    /// managed users and the fail mode. Without a readable database, the records alone. `only`: fold
    /// the records of these users alone (the others' entries then come from what the agent kept).
    func policyInForce(only: Set<String>? = nil, failOpen: Bool) throws -> PolicyInForce.Resolution {
        let scan = try self.scan()
        var folded: [String: (policy: Policy, version: Int)] = [:]
        for user in scan.currentByUser.keys where only?.contains(user) ?? true {
            let state = try policyState(of: user)
            if let policy = state.policy { folded[user] = (policy, state.version) }
        }
        let (lastGood, newestSeen) =
            (try? openStore().read { db in
                (
                    try AgentStateTable.all(AgentStateKeys.lastGoodPolicy, db),
                    try AgentStateTable.all(AgentStateKeys.newestVersion, db)
                )
            }) ?? ([:], [:])
        return PolicyInForce.resolve(
            folded: folded, current: PolicyFold.currentByUser(scan.valid),
            newestOnDisk: Dictionary(scan.valid.map { ($0.user, $0.version) }, uniquingKeysWith: max),
            lastGood: lastGood, newestSeen: newestSeen,
            managed: ManagedUsers.read(stateDirectory: stateDirectory) ?? [], failOpen: failOpen)
    }

    /// `user`'s schedule under `policy` (its zone, the grants in the shared directory) and the usage saved
    /// for the local day of `now`: what commands answer from disk when the agent is not running.
    /// `otherComputers` is the day's screen time on the family's other computers when the policy's
    /// daily limit counts them (else 0).
    func savedDay(of user: String, policy: Policy, now: Instant) throws -> (
        schedule: Schedule, totals: [String: Int64], otherComputers: Int64
    ) {
        let zone = Schedule.zone(for: policy)
        let day = zone.localTime(at: now).date
        let (totals, selfService) = try openStore().read { db in
            (
                try UsageTable.dayTotals(user: user, day: day, db),
                try RequestTable.selfService(user: user, since: zone.start(of: day), db)
            )
        }
        var adjustments = try scan(warningsFor: user).adjustments[user] ?? [:]
        // Extra time the child took under their allowance today (`curfew extend`) counts as a grant.
        for use in selfService where zone.localTime(at: use.created).date == day {
            adjustments[day, default: DayAdjustment()].extraMinutes += use.grantedMinutes ?? use.minutes
        }
        let others =
            policy.limitScope == .allComputers
            ? otherComputersUsage(of: user, from: day, through: day).reduce(0) { $0 + $1.screenMilliseconds } : 0
        return (Schedule(policy: policy, zone: zone, adjustments: adjustments), totals, others)
    }

    /// What a report of `user` judges past days by: every verified policy record of theirs (removals
    /// too), their grants, and each day's extra time (grants plus what the child took under their
    /// allowance).
    func reportHistory(of user: String) throws -> (
        records: [PolicyMerge.Input], grants: [GrantSummary], adjustments: [LocalDate: DayAdjustment]
    ) {
        try Policy.validateUserName(user)
        let scan = try self.scan(warningsFor: user)
        let records = try scan.records(of: user).map { PolicyMerge.Input(id: $0.id, record: try load($0)) }
        var adjustments = scan.adjustments[user] ?? [:]
        let newest = records.max { ($0.record.time, $0.id) < ($1.record.time, $1.id) }
        let zone = (newest?.record.policy).map { Schedule.zone(for: $0) } ?? ZoneRules.system
        let uses = (try? openStore().read { try RequestTable.selfService(user: user, since: .epoch, $0) }) ?? []
        for use in uses {
            adjustments[zone.localTime(at: use.created).date, default: DayAdjustment()].extraMinutes +=
                use.grantedMinutes ?? use.minutes
        }
        return (records, scan.grants.filter { $0.user == user }, adjustments)
    }

    /// Screen time of `user` saved on this computer in the week of `now` (from Monday, today included),
    /// in milliseconds, when the policy has a weekly budget; else nil.
    func savedWeek(of user: String, policy: Policy, now: Instant) throws -> Int64? {
        guard policy.weeklyLimitMinutes != nil else { return nil }
        let day = Schedule.zone(for: policy).localTime(at: now).date
        return try openStore().read { try UsageTable.screenMilliseconds(user: user, from: day.weekStart, through: day, $0) }
    }

    /// The latest usage summary of each other computer and day: the verified files in the shared
    /// directory, and what this computer's agent kept of them (a file may since have been removed).
    func otherComputersUsage(of user: String, from: LocalDate, through to: LocalDate) -> [UsageSummary] {
        // This computer's own summaries are in its usage table; the agent notes which id is its own.
        let machine = try? openStore().read { try AgentStateTable.get(AgentStateKeys.machineID, $0) }
        var latest: [String: UsageSummary] = [:]
        func consider(_ summary: UsageSummary) {
            guard summary.machine != machine else { return }
            let key = "\(summary.machine)/\(summary.day)"
            if let kept = latest[key], !summary.replaces(kept) { return }
            latest[key] = summary
        }
        if let kept = try? openStore().read({ try RemoteUsageTable.summaries(user: user, from: from, through: to, $0) }) {
            kept.forEach(consider)
        }
        for reading in shared.usageReadings(user: user, from: from, through: to) {
            if let summary = reading.summary { consider(summary) }
        }
        return latest.values.sorted { ($0.day, $0.machine) < ($1.day, $1.machine) }
    }

    /// The version this computer's agent enforces for `user` although its record is missing from the
    /// shared directory (the agent notes it), if any.
    func missingRecordInForce(of user: String) -> Int? {
        try? openStore().read { try AgentStateTable.get(AgentStateKeys.recordMissing(user), $0) }
    }

    /// Reads and verifies a record file that the scan found valid.
    func load(_ summary: RecordSummary) throws -> PolicyRecord {
        let trusted = try keyRing.trustedKeys()
        let path = "\(shared.recordsPath)/\(summary.id)"
        switch RecordVerifier.load(path: path, name: summary.id, trusted: trusted) {
        case .success(let record): return record
        case .failure: throw CLIError("record \(summary.id) changed while it was read; try again", .failure)
        }
    }

    /// Signs and publishes the user's new policy (nil removes the user) as the next version.
    func publish(_ policy: Policy?, for user: String, replacing current: RecordSummary?, now: Instant) throws -> (
        version: Int, id: String
    ) {
        let key = try keyRing.loadSigningKey()
        let version = (current?.version ?? 0) + 1
        let record = PolicyRecord(
            user: user, version: version, baseVersion: current?.version ?? 0, author: key.id, time: now.seconds,
            policy: policy)
        let id = try shared.publish(record, signedBy: key)
        return (version, id)
    }

    /// Stores what the scan learned; called once a command has succeeded. A database that cannot be
    /// written (a parent reading without root) only costs speed next time.
    func finish() {
        guard let pending = pendingIndex, !(pending.entries.isEmpty && pending.vanished.isEmpty) else { return }
        try? openStore().write { db in
            try RecordIndex.save(pending.entries, db)
            try RecordIndex.remove(names: pending.vanished, db)
        }
        pendingIndex = nil
    }

    /// Now, to the whole second: what records carry and what the schedule counts in.
    static func now() -> Instant { Instant(seconds: Int64(Date().timeIntervalSince1970)) }
}
