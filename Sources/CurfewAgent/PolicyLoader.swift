import CurfewCore
import CurfewStore
import CurfewSync
import Logging

/// Folds the signed records of the shared directory into the policies in force, through the same
/// record index the CLI uses. A user whose record in force cannot be read keeps the policy they had.
public struct PolicyLoader: Sendable {
    public let shared: SharedDirectory
    public let keyRing: KeyRing
    public let store: StateStore

    public init(shared: SharedDirectory, keyRing: KeyRing, store: StateStore) {
        self.shared = shared
        self.keyRing = keyRing
        self.store = store
    }

    public struct Result: Sendable {
        public var policies: [String: Policy]
        public var versions: [String: Int]
        public var ignored: [IgnoredRecord]
        /// Users whose record in force removes them: no longer managed, on purpose.
        public var removed: Set<String>
        /// Extra time per managed user and local day: every valid, trusted grant added up.
        public var adjustments: [String: [LocalDate: DayAdjustment]] = [:]
        /// Valid, trusted grants of managed users that no `extra-time-granted` event mentions yet.
        public var unannouncedGrants: [GrantSummary] = []
        /// How each managed user's records folded: the records merged into the version in force and
        /// the fields in conflict (`PolicyMerge.Result.top`), for confirmations.
        public var merges: [String: PolicyMerge.Result] = [:]
        /// The scan the result was folded from: what the confirmations answer.
        public var scan: RecordScan? = nil
        /// Records the fold merged with a concurrent edit, with the fields both changed: their
        /// confirmations say `merged` and list those fields.
        public var merged: [String: [String]] = [:]
    }

    /// `now` (seconds since the epoch), when given, lets young unreadable files count as still
    /// arriving (`RecordScan.incomplete`) rather than rejected. `newestSeen`: the newest version of each
    /// user this computer has enforced; a removal older than that does not count (its later records
    /// were deleted from the shared directory, which must never unmanage a child).
    public func load(previous: [String: Policy], newestSeen: [String: Int] = [:], logger: Logger, now: Instant? = nil) throws
        -> Result
    {
        let trusted = try keyRing.trustedKeys()
        let index = try store.read { try RecordIndex.all($0) }
        let scan = try RecordScan.scan(shared, trusted: trusted, index: index, revoked: try keyRing.revocations(), now: now)
        if !scan.newIndexEntries.isEmpty || !scan.vanished.isEmpty {
            try store.write { db in
                try RecordIndex.save(scan.newIndexEntries, db)
                try RecordIndex.remove(names: scan.vanished, db)
            }
        }
        var policies: [String: Policy] = [:]
        var versions: [String: Int] = [:]
        var merges: [String: PolicyMerge.Result] = [:]
        for (user, summary) in scan.currentByUser {
            do {
                let merge = try scan.fold(user: user) { record in
                    try RecordVerifier.load(path: "\(shared.recordsPath)/\(record.id)", name: record.id, trusted: trusted).get()
                }
                merges[user] = merge
                if let policy = merge.policy {
                    policies[user] = policy
                    versions[user] = merge.version
                }
            } catch {
                logger.warning("record in force changed while read; keeping the last good policy", metadata: ["user": "\(user)", "record.id": "\(summary.id)"])
                if let old = previous[user] { policies[user] = old }
            }
        }
        // Records merged into the version in force are confirmed `merged`, with the fields in conflict.
        var merged: [String: [String]] = [:]
        for merge in merges.values where merge.mergedRecords.count > 1 {
            for id in merge.mergedRecords { merged[id] = merge.conflicts }
        }
        let removed = PolicyInForce.countedRemovals(current: PolicyFold.currentByUser(scan.valid), newestSeen: newestSeen)
        // Grants of users still managed; the agent drops those of users it does not enforce at all.
        let grants = scan.grants.filter { !removed.contains($0.user) }
        let announced = try store.read { try EventLog.grantsAnnounced($0) }
        return Result(
            policies: policies, versions: versions, ignored: scan.ignored, removed: removed,
            adjustments: GrantFold.adjustments(grants),
            unannouncedGrants: grants.filter { !announced.contains($0.id) }.sorted { ($0.time, $0.id) < ($1.time, $1.id) },
            merges: merges, scan: scan, merged: merged)
    }
}
