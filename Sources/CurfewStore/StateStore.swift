import CurfewCore
import GRDB

/// The agent's and the CLI's SQLite database (`<state-dir>/curfew.db`): WAL, a busy timeout, and
/// migrations that are only ever added.
public final class StateStore: Sendable {
    public let writer: any DatabaseWriter

    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    /// `concurrentReaders` gives a `DatabasePool` for the agent's threads; the CLI uses one connection.
    public init(path: String, concurrentReaders: Bool = false) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        if concurrentReaders {
            writer = try DatabasePool(path: path, configuration: configuration)
        } else {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            try queue.writeWithoutTransaction { db in
                if try String.fetchOne(db, sql: "PRAGMA journal_mode") != "wal" {
                    try db.execute(sql: "PRAGMA journal_mode = WAL")
                }
            }
            writer = queue
        }
        try Self.migrator.migrate(writer)
    }

    /// One transaction: everything in `body` is written, or nothing.
    public func write<T>(_ body: (Database) throws -> T) throws -> T {
        try writer.write(body)
    }

    public func read<T>(_ body: (Database) throws -> T) throws -> T {
        try writer.read(body)
    }

    /// Append-only: never edit a migration that has shipped; add a new one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-record-index") { db in
            try db.execute(
                sql: """
                    CREATE TABLE record_index (
                        name TEXT PRIMARY KEY NOT NULL,
                        device INTEGER NOT NULL,
                        inode INTEGER NOT NULL,
                        size INTEGER NOT NULL,
                        mtime_ns INTEGER NOT NULL,
                        ctime_ns INTEGER NOT NULL,
                        verdict TEXT NOT NULL CHECK (verdict IN ('valid', 'invalid')),
                        reason TEXT,
                        user TEXT,
                        version INTEGER,
                        base_version INTEGER,
                        author TEXT,
                        time INTEGER,
                        removes_user INTEGER
                    );
                    CREATE INDEX record_index_user ON record_index(user);
                    """)
        }
        return migrator
    }
}
