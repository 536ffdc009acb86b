import CurfewCore
import GRDB

/// The `usage` table: milliseconds per user, local day, local hour and app (`""` = screen time).
public enum UsageTable {
    /// Adds the slices to what is stored (one statement per key; call inside one transaction).
    public static func add(_ slices: [UsageKey: Int64], _ db: Database) throws {
        let statement = try db.cachedStatement(
            sql: """
                INSERT INTO usage (user, day, hour, app, milliseconds) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (user, day, hour, app) DO UPDATE SET milliseconds = milliseconds + excluded.milliseconds
                """)
        for (key, milliseconds) in slices.sorted(by: { $0.key < $1.key }) where milliseconds > 0 {
            try statement.execute(arguments: [key.user, "\(key.day)", key.hour, key.app, milliseconds])
        }
    }

    public typealias Row = UsageRow


    /// Every bucket of `user` from `from` through `to` (inclusive), ordered by day, hour, app.
    public static func rows(user: String, from: LocalDate, through to: LocalDate, _ db: Database) throws -> [Row] {
        let cursor = try GRDB.Row.fetchCursor(
            db,
            sql: """
                SELECT day, hour, app, milliseconds FROM usage
                WHERE user = ? AND day BETWEEN ? AND ? ORDER BY day, hour, app
                """,
            arguments: [user, "\(from)", "\(to)"])
        var rows: [Row] = []
        while let row = try cursor.next() {
            guard let day = try? LocalDate.parse(row["day"] as String) else { continue }
            rows.append(Row(day: day, hour: row["hour"], app: row["app"], milliseconds: row["milliseconds"]))
        }
        return rows
    }

    /// Screen time of `user` from `from` through `to` (inclusive), in milliseconds: a week's so far,
    /// for a weekly budget.
    public static func screenMilliseconds(user: String, from: LocalDate, through to: LocalDate, _ db: Database) throws -> Int64 {
        try Int64.fetchOne(
            db, sql: "SELECT COALESCE(SUM(milliseconds), 0) FROM usage WHERE user = ? AND app = '' AND day BETWEEN ? AND ?",
            arguments: [user, "\(from)", "\(to)"]) ?? 0
    }

    /// Totals of one local day by app (`""` = screen time).
    public static func dayTotals(user: String, day: LocalDate, _ db: Database) throws -> [String: Int64] {
        var totals: [String: Int64] = [:]
        for row in try rows(user: user, from: day, through: day, db) { totals[row.app, default: 0] += row.milliseconds }
        return totals
    }
}
