import CurfewCore
import GRDB

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
            let key: String = row["key"]
            result[String(key.dropFirst(prefix.count))] = row["value"]
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
