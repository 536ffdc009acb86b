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
            guard let day = try? LocalDate.parse(row[0] as String) else { continue }
            rows.append(Row(day: day, hour: row[1], app: row[2], milliseconds: row[3]))
        }
        return rows
    }

    /// Totals of one local day by app (`""` = screen time).
    public static func dayTotals(user: String, day: LocalDate, _ db: Database) throws -> [String: Int64] {
        var totals: [String: Int64] = [:]
        for row in try rows(user: user, from: day, through: day, db) { totals[row.app, default: 0] += row.milliseconds }
        return totals
    }
}


/// The `events` table: appended to, never edited; each event chained to the one before it by
/// hash (`AuditChain`), and replaced by summary rows only after the retention period.
public enum EventLog {
    /// Appends an event, chained to the newest entry. The head is read and the row inserted in one
    /// write transaction (the caller's, else one of its own; GRDB begins write transactions
    /// IMMEDIATE), so writers on other threads or in other processes wait and cannot fork the chain.
    @discardableResult
    public static func append(_ event: AgentEvent, _ db: Database) throws -> Int64 {
        guard db.isInsideTransaction else {
            var id: Int64 = 0
            try db.inTransaction(.immediate) {
                id = try append(event, db)
                return .commit
            }
            return id
        }
        let data = event.data?.canonicalString
        let previous = try AuditChain.head(db)
        let hash = AuditChain.eventHash(
            previous: previous, time: event.time, user: event.user, kind: event.kind, message: event.message, data: data)
        try db.execute(
            sql: "INSERT INTO events (time_ms, user, kind, message, data, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
            arguments: [event.time, event.user, event.kind, event.message, data, previous, hash])
        return db.lastInsertedRowID
    }

    /// Events at or after `since` (ms), of `user` (and events of no user) when given, in the order
    /// they were recorded (which is not always the order of their times: the clock may be set back).
    public static func list(user: String?, since: Int64?, limit: Int = 10_000, _ db: Database) throws -> [AgentEvent] {
        var sql = "SELECT id, time_ms, user, kind, message, data FROM events WHERE time_ms >= ?"
        var arguments: StatementArguments = [since ?? Int64.min]
        if let user {
            sql += " AND (user = ? OR user IS NULL)"
            arguments += [user]
        }
        sql += " ORDER BY id LIMIT ?"
        arguments += [limit]
        return try GRDB.Row.fetchAll(db, sql: sql, arguments: arguments).map { row in
            let dataText: String? = row[5]
            return AgentEvent(
                id: row[0], time: row[1], user: row[2], kind: row[3], message: row[4],
                data: dataText.flatMap { try? JSONValue.parse($0) })
        }
    }
}

extension EventLog {
    /// The events of exactly `user` with times in `from..<before` (ms), by time (then id): a report's timeline.
    public static func events(of user: String, from: Int64, before: Int64, _ db: Database) throws -> [AgentEvent] {
        let rows = try GRDB.Row.fetchCursor(
            db,
            sql: """
                SELECT id, time_ms, user, kind, message, data FROM events
                WHERE user = ? AND time_ms >= ? AND time_ms < ? ORDER BY time_ms, id
                """,
            arguments: [user, from, before])
        var events: [AgentEvent] = []
        while let row = try rows.next() {
            let dataText: String? = row[5]
            events.append(
                AgentEvent(
                    id: row[0], time: row[1], user: row[2], kind: row[3], message: row[4],
                    data: dataText.flatMap { try? JSONValue.parse($0) }))
        }
        return events
    }

    /// The kind of event that says a grant of extra time is in force; its data names the record.
    public static let extraTimeGranted = AgentEvent.extraTimeGranted

    /// The record ids of grants an `extra-time-granted` event already mentions.
    public static func grantsAnnounced(_ db: Database) throws -> Set<String> {
        var ids = Set(try String.fetchAll(db, sql: "SELECT record FROM announced_grants"))
        let rows = try GRDB.Row.fetchCursor(db, sql: "SELECT data FROM events WHERE kind = ?", arguments: [extraTimeGranted])
        while let row = try rows.next() {
            guard let text: String = row[0], case .object(let object)? = try? JSONValue.parse(text),
                case .string(let id)? = object["record"]
            else { continue }
            ids.insert(id)
        }
        return ids
    }
}

/// Small facts the agent keeps between runs (`agent_state`).
public enum AgentStateTable {
    public static func get(_ key: String, _ db: Database) throws -> String? {
        try String.fetchOne(db, sql: "SELECT value FROM agent_state WHERE key = ?", arguments: [key])
    }

    /// Every entry whose key starts with `prefix`, keyed by the rest of the key.
    public static func all(prefix: String, _ db: Database) throws -> [String: String] {
        var result: [String: String] = [:]
        let rows = try Row.fetchCursor(
            db, sql: "SELECT key, value FROM agent_state WHERE substr(key, 1, ?) = ?", arguments: [prefix.utf8.count, prefix])
        while let row = try rows.next() {
            let key: String = row[0]
            result[String(key.dropFirst(prefix.count))] = row[1]
        }
        return result
    }

    public static func remove(_ key: String, _ db: Database) throws {
        try db.execute(sql: "DELETE FROM agent_state WHERE key = ?", arguments: [key])
    }

    public static func set(_ key: String, _ value: String, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO agent_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            arguments: [key, value])
    }
}
