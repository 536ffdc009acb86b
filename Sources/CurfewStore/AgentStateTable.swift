import CurfewCore
import GRDB

/// Small facts the agent keeps between runs (`agent_state`), each under its typed key
/// (`AgentStateKeys`).
public enum AgentStateTable {
    /// The fact's value; nil when it is not kept or its text is not a value of its type.
    public static func get<Value>(_ key: AgentStateKey<Value>, _ db: Database) throws -> Value? {
        try String.fetchOne(db, sql: "SELECT value FROM agent_state WHERE key = ?", arguments: [key.name]).flatMap(Value.init(stateText:))
    }

    /// Every user's value of a per-user fact, keyed by user (values that do not read are left out).
    public static func all<Value>(_ keys: AgentStateKeyPerUser<Value>, _ db: Database) throws -> [String: Value] {
        var result: [String: Value] = [:]
        let rows = try Row.fetchCursor(
            db, sql: "SELECT key, value FROM agent_state WHERE substr(key, 1, ?) = ?", arguments: [keys.prefix.utf8.count, keys.prefix])
        while let row = try rows.next() {
            let key: String = row["key"]
            let text: String = row["value"]
            if let value = Value(stateText: text) { result[String(key.dropFirst(keys.prefix.count))] = value }
        }
        return result
    }

    public static func remove<Value>(_ key: AgentStateKey<Value>, _ db: Database) throws {
        try db.execute(sql: "DELETE FROM agent_state WHERE key = ?", arguments: [key.name])
    }

    public static func set<Value>(_ key: AgentStateKey<Value>, _ value: Value, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO agent_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            arguments: [key.name, value.stateText])
    }
}
