import CurfewCore
import GRDB

/// The `remote_usage` table: the latest verified usage summary of each other computer, user and day.
public enum RemoteUsageTable {
    /// Keeps `summary` unless the stored summary of the same computer, user and day is at least as new
    /// and holds at least as much screen time (`UsageSummary.replaces`, here in SQL): an older copy put
    /// back in the shared directory changes nothing. Returns whether it was stored.
    @discardableResult
    public static func keep(_ summary: UsageSummary, _ db: Database) throws -> Bool {
        let bucketText = JSONValue.array(
            summary.buckets.map { .array([.int(Int64($0.hour)), .string($0.app), .int($0.milliseconds)]) }
        ).canonicalString
        try db.execute(
            sql: """
                INSERT INTO remote_usage (machine, user, day, host, screen_ms, buckets, written) VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (machine, user, day) DO UPDATE SET
                    host = excluded.host, screen_ms = excluded.screen_ms, buckets = excluded.buckets, written = excluded.written
                WHERE excluded.written > remote_usage.written OR excluded.screen_ms > remote_usage.screen_ms
                """,
            arguments: [
                summary.machine, summary.user, "\(summary.day)", summary.host, summary.screenMilliseconds, bucketText,
                summary.time,
            ])
        return db.changesCount > 0
    }

    /// What is kept of `user` from `from` through `to`, by computer and day; `key` is empty (the
    /// signature was checked when it was read from the shared directory).
    public static func summaries(user: String, from: LocalDate, through to: LocalDate, _ db: Database) throws -> [UsageSummary] {
        let rows = try Row.fetchAll(
            db,
            sql: """
                SELECT machine, host, day, buckets, written FROM remote_usage
                WHERE user = ? AND day BETWEEN ? AND ? ORDER BY day, machine
                """,
            arguments: [user, "\(from)", "\(to)"])
        return rows.compactMap { row in
            guard let day = try? LocalDate.parse(row["day"] as String), case .array(let entries)? = try? JSONValue.parse(row["buckets"] as String)
            else { return nil }
            let buckets: [UsageSummary.Bucket] = entries.compactMap { entry in
                guard case .array(let parts) = entry, parts.count == 3, case .int(let hour) = parts[0],
                    case .string(let app) = parts[1], case .int(let milliseconds) = parts[2]
                else { return nil }
                return UsageSummary.Bucket(hour: Int(hour), app: app, milliseconds: milliseconds)
            }
            return UsageSummary(machine: row["machine"], host: row["host"], key: "", user: user, day: day, buckets: buckets, time: row["written"])
        }
    }
}
