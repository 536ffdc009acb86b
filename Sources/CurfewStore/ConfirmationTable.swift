import CurfewCore
import GRDB

/// The `confirmations` table, keyed by machine id and record id.
public enum ConfirmationTable {
    public static func all(machine: String, _ db: Database) throws -> [String: ConfirmationState] {
        var result: [String: ConfirmationState] = [:]
        let rows = try Row.fetchCursor(
            db,
            sql: """
                SELECT record, user, outcome, reason, conflicts, enforced_version, written
                FROM confirmations WHERE machine = ?
                """, arguments: [machine])
        while let row = try rows.next() {
            guard let outcome = Confirmation.Outcome(rawValue: row["outcome"]) else { continue }
            var conflicts: [String] = []
            if let text: String = row["conflicts"], case .array(let values)? = try? JSONValue.parse(text) {
                conflicts = values.compactMap { if case .string(let field) = $0 { field } else { nil } }
            }
            let state = ConfirmationState(
                record: row["record"], user: row["user"], outcome: outcome, reason: row["reason"], conflicts: conflicts,
                enforcedVersion: row["enforced_version"], written: row["written"])
            result[state.record] = state
        }
        return result
    }

    public static func save(_ states: [ConfirmationState], machine: String, _ db: Database) throws {
        let statement = try db.cachedStatement(
            sql: """
                INSERT OR REPLACE INTO confirmations
                    (machine, record, user, outcome, reason, conflicts, enforced_version, written)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for state in states {
            let conflicts = JSONValue.array(state.conflicts.map { .string($0) }).canonicalString
            try statement.execute(arguments: [
                machine, state.record, state.user, state.outcome.rawValue, state.reason, conflicts, state.enforcedVersion,
                state.written,
            ])
        }
    }

    public static func remove(records: [String], machine: String, _ db: Database) throws {
        let statement = try db.cachedStatement(sql: "DELETE FROM confirmations WHERE machine = ? AND record = ?")
        for record in records { try statement.execute(arguments: [machine, record]) }
    }

    /// How many confirmations wait to be written.
    public static func pendingCount(machine: String, _ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT count(*) FROM confirmations WHERE machine = ? AND written = 0", arguments: [machine]) ?? 0
    }
}
