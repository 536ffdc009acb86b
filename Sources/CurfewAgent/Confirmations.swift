import CurfewCore
import CurfewLinux
import CurfewStore
import CurfewSync
import Foundation
import Logging
import Synchronization

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
        // A computer that holds a parent key enrols itself with it (how a one-computer family, and
        // every computer that has its own parent key, keeps counting without a step of its own).
        do {
            if let author = try shared.enrolWithOwnParentKey(machine, now: clock.wallSecond) {
                logger.notice("enrolled this computer in the shared directory with its parent key", metadata: ["key": "\(author)"])
            }
        } catch {
            logger.warning("cannot enrol this computer in the shared directory", metadata: ["error": "\(error)"])
        }
        let wanted = ConfirmationPlan.verdicts(
            valid: scan.valid, grants: scan.grants, ignored: scan.ignored, versions: versions, enforcedUsers: Set(policies.keys), removed: result.removed,
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
        let now = clock.wallSeconds
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
