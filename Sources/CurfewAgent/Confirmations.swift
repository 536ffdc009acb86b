import CurfewCore
import CurfewStore
import CurfewSync
import Foundation
import Logging
import Synchronization

/// What this computer answers for each record file of a scan, after enforcement was decided.
///
/// - `applied`: the policy record in force for its user (or the removal in force), or a grant that
///   counts here.
/// - `superseded`: a valid, trusted policy record older than the one in force (or of the same
///   version but losing the tie), or in force in the records while a newer last good policy stays.
/// - `merged`: named by the fold in `merged` (record id → fields in conflict).
/// - `rejected`: every file named like a record that cannot be used (malformed, not canonical,
///   forged, tampered, signed by a key not trusted here, an unknown format, oversized, a symlink, a
///   FIFO, unreadable), and grants of users with no policy on this computer or removed.
///   Every policy record makes its user managed, so "user not managed here" only concerns grants.
/// - Files still arriving (`RecordScan.incomplete`) get no answer yet.
public enum ConfirmationPlan {
    // Reasons that do not name the newer version, so a confirmation is not rewritten at each change.
    public static let newer = "a newer version is in force"
    public static let lostTie = "another record of the same version wins (later time, then greater key id)"
    public static let keptNewer = "a newer version stays in force (its record can no longer be read)"

    public static func verdicts(
        scan: RecordScan, versions: [String: Int], enforcedUsers: Set<String>, removed: Set<String>,
        merged: [String: [String]] = [:]
    ) -> [String: ConfirmationState] {
        var result: [String: ConfirmationState] = [:]
        func add(
            _ id: String, _ user: String?, _ outcome: Confirmation.Outcome, _ reason: String?, conflicts: [String] = [],
            enforced: Int?
        ) {
            result[id] = ConfirmationState(
                record: id, user: user, outcome: outcome, reason: reason, conflicts: conflicts, enforcedVersion: enforced,
                written: false)
        }
        let byUser = Dictionary(grouping: scan.valid, by: \.user)
        for (user, records) in byUser {
            guard let current = PolicyFold.current(records) else { continue }
            let enforced = versions[user]
            for record in records {
                if let conflicts = merged[record.id] {
                    add(
                        record.id, user, .merged, "merged with a concurrent edit of version \(record.baseVersion)",
                        conflicts: conflicts, enforced: enforced)
                } else if record.id == current.id {
                    if record.removesUser {
                        add(record.id, user, .applied, nil, enforced: nil)
                    } else if enforced == record.version {
                        add(record.id, user, .applied, nil, enforced: enforced)
                    } else if let enforced, enforced > record.version {
                        add(record.id, user, .superseded, ConfirmationPlan.keptNewer, enforced: enforced)
                    }
                    // Otherwise the record in force could not be read back just now: answer next scan.
                } else if record.version < current.version {
                    add(
                        record.id, user, .superseded, ConfirmationPlan.newer,
                        enforced: enforced ?? (current.removesUser ? nil : current.version))
                } else {
                    add(
                        record.id, user, .superseded, ConfirmationPlan.lostTie,
                        enforced: enforced ?? (current.removesUser ? nil : current.version))
                }
            }
        }
        for grant in scan.grants {
            if removed.contains(grant.user) {
                add(grant.id, grant.user, .rejected, "\(grant.user) is no longer managed", enforced: nil)
            } else if enforcedUsers.contains(grant.user) {
                add(grant.id, grant.user, .applied, nil, enforced: versions[grant.user])
            } else {
                add(grant.id, grant.user, .rejected, "\(grant.user) has no policy on this computer", enforced: nil)
            }
        }
        for ignored in scan.ignored {
            add(ignored.name, ignored.user, .rejected, ignored.reason, enforced: ignored.user.flatMap { versions[$0] })
        }
        return result
    }
}

extension Agent {
    /// Writes a confirmation for every record whose verdict is new or changed, and retries those that
    /// could not be written before. Never throws: enforcement has already happened.
    func confirm(_ result: PolicyLoader.Result, policies: [String: Policy], versions: [String: Int]) {
        guard let scan = result.scan else { return }
        confirmationsChecked.withLock { checked in
            do {
                try confirm(scan: scan, result: result, policies: policies, versions: versions, checked: &checked)
            } catch {
                logger.error("cannot keep track of confirmations", metadata: ["error": "\(error)"])
            }
        }
    }

    private func confirm(
        scan: RecordScan, result: PolicyLoader.Result, policies: [String: Policy], versions: [String: Int],
        checked: inout Bool
    ) throws {
        let shared = confirmations.shared
        do { try shared.publish(machine.announcement) } catch {
            logger.warning("cannot publish this computer's key in the shared directory", metadata: ["error": "\(error)"])
        }
        let wanted = ConfirmationPlan.verdicts(
            scan: scan, versions: versions, enforcedUsers: Set(policies.keys), removed: result.removed,
            merged: result.merged)
        var known = try store.read { try ConfirmationTable.all(machine: machine.id, $0) }
        if !checked {
            // Written without an fsync each: make sure those we count as written survived.
            for (id, state) in known where state.written && !confirmations.isOnDisk(id) { known[id]?.written = false }
            checked = true
        }
        var toWrite: [ConfirmationState] = []
        for (id, wantedState) in wanted.sorted(by: { $0.key < $1.key }) {
            var state = wantedState
            // The record index does not keep the user a rejected file claimed: keep the one we knew.
            if state.user == nil, let old = known[id], old.outcome == state.outcome, old.reason == state.reason {
                state.user = old.user
            }
            if let old = known[id], old.written, old.sameVerdict(as: state) { continue }
            toWrite.append(state)
        }
        let incomplete = Set(scan.incomplete)
        let gone = known.keys.filter { wanted[$0] == nil && !incomplete.contains($0) }
        guard !toWrite.isEmpty || !gone.isEmpty else { return }
        let now = Int64(Date().timeIntervalSince1970)
        // Derived from the private key at each use, as costly as a signature: once per batch.
        let keyID = machine.key.id
        let documents = toWrite.map { state in
            Confirmation(
                machine: machine.id, host: machine.host, key: keyID, record: state.record, user: state.user,
                outcome: state.outcome, reason: state.reason, conflicts: state.conflicts,
                enforcedVersion: state.enforcedVersion, time: now)
        }
        let (written, failure) = confirmations.write(documents)
        let done = Set(written)
        let rows = toWrite.map { state in
            var row = state
            row.written = done.contains(state.record)
            return row
        }
        try store.write { db in
            try ConfirmationTable.save(rows, machine: machine.id, db)
            try ConfirmationTable.remove(records: gone, machine: machine.id, db)
        }
        if let failure {
            logger.warning(
                "cannot write confirmations; they stay pending and are retried on every scan",
                metadata: ["pending": "\(toWrite.count - written.count)", "error": "\(failure)"])
        }
    }
}
