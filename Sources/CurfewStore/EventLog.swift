import CurfewCore
import GRDB

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
            previous: previous, time: event.time.milliseconds, user: event.user, kind: event.kind.rawValue, message: event.message, data: data)
        try db.execute(
            sql: "INSERT INTO events (time_ms, user, kind, message, data, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
            arguments: [event.time.milliseconds, event.user, event.kind.rawValue, event.message, data, previous, hash])
        return db.lastInsertedRowID
    }

    /// Events at or after `since`, of `user` (and events of no user) when given, in the order
    /// they were recorded (which is not always the order of their times: the clock may be set back).
    public static func list(user: String?, since: Instant?, limit: Int = 10_000, _ db: Database) throws -> [AgentEvent] {
        var sql = "SELECT id, time_ms, user, kind, message, data FROM events WHERE time_ms >= ?"
        var arguments: StatementArguments = [since?.milliseconds ?? Int64.min]
        if let user {
            sql += " AND (user = ? OR user IS NULL)"
            arguments += [user]
        }
        sql += " ORDER BY id LIMIT ?"
        arguments += [limit]
        return try GRDB.Row.fetchAll(db, sql: sql, arguments: arguments).map(event)
    }

    /// An event from its row (`id, time_ms, user, kind, message, data`).
    static func event(_ row: GRDB.Row) -> AgentEvent {
        let dataText: String? = row["data"]
        return AgentEvent(
            id: row["id"], time: Instant(milliseconds: row["time_ms"]), user: row["user"], kind: EventKind(rawValue: row["kind"]),
            message: row["message"], data: dataText.flatMap { try? JSONValue.parse($0) })
    }
}

extension EventLog {
    /// The events of exactly `user` with times in `from..<before` (all later ones when `before` is nil), by
    /// time (then id): a report's timeline.
    public static func events(of user: String, from: Instant, before: Instant?, _ db: Database) throws -> [AgentEvent] {
        let rows = try GRDB.Row.fetchCursor(
            db,
            sql: """
                SELECT id, time_ms, user, kind, message, data FROM events
                WHERE user = ? AND time_ms >= ? AND time_ms < ? ORDER BY time_ms, id
                """,
            arguments: [user, from.milliseconds, before?.milliseconds ?? Int64.max])
        var events: [AgentEvent] = []
        while let row = try rows.next() { events.append(event(row)) }
        return events
    }

    /// The record ids of grants an `extra-time-granted` event already mentions.
    public static func grantsAnnounced(_ db: Database) throws -> Set<String> {
        var ids = Set(try String.fetchAll(db, sql: "SELECT record FROM announced_grants"))
        let rows = try GRDB.Row.fetchCursor(db, sql: "SELECT data FROM events WHERE kind = ?", arguments: [EventKind.extraTimeGranted.rawValue])
        while let row = try rows.next() {
            guard let text: String = row["data"], case .object(let object)? = try? JSONValue.parse(text),
                case .string(let id)? = object["record"]
            else { continue }
            ids.insert(id)
        }
        return ids
    }
}
