import CurfewPOSIX
import CurfewCore
import GRDB

/// The agent's and the CLI's SQLite database (`<state-dir>/curfew.db`): WAL, a busy timeout, and
/// migrations that are only ever added.
public final class StateStore: Sendable {
    public let writer: any DatabaseWriter

    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    /// `concurrentReaders` gives a `DatabasePool` for the agent's threads; the CLI uses one connection.
    /// `busySeconds`: how long a write waits for another writer's lock.
    public init(path: String, concurrentReaders: Bool = false, busySeconds: Double = 5) throws {
        // A new database is the owner's alone from its first byte: SQLite gives its -wal and -shm
        // files the database file's mode, and would otherwise create it with the umask's (0644).
        let created = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if created >= 0 { close(created) }
        var configuration = Configuration()
        configuration.busyMode = .timeout(busySeconds)
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
    @discardableResult
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
        migrator.registerMigration("v2-usage-events") { db in
            try db.execute(
                sql: """
                    CREATE TABLE usage (
                        user TEXT NOT NULL,
                        day TEXT NOT NULL,
                        hour INTEGER NOT NULL CHECK (hour BETWEEN 0 AND 23),
                        app TEXT NOT NULL,
                        milliseconds INTEGER NOT NULL CHECK (milliseconds >= 0),
                        PRIMARY KEY (user, day, hour, app)
                    ) WITHOUT ROWID;
                    CREATE TABLE events (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        time_ms INTEGER NOT NULL,
                        user TEXT,
                        kind TEXT NOT NULL,
                        message TEXT NOT NULL,
                        data TEXT
                    );
                    CREATE INDEX events_time ON events(time_ms);
                    CREATE INDEX events_user_time ON events(user, time_ms);
                    CREATE TABLE agent_state (
                        key TEXT PRIMARY KEY NOT NULL,
                        value TEXT NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("v3-grants-requests") { db in
            // Versions before grants called a grant file invalid; forget every invalid verdict so
            // such files are checked again by code that knows grants.
            try db.execute(
                sql: """
                    ALTER TABLE record_index ADD COLUMN kind TEXT NOT NULL DEFAULT 'policy'
                        CHECK (kind IN ('policy', 'grant'));
                    ALTER TABLE record_index ADD COLUMN date TEXT;
                    ALTER TABLE record_index ADD COLUMN extra_minutes INTEGER;
                    ALTER TABLE record_index ADD COLUMN bedtime_delay_minutes INTEGER;
                    ALTER TABLE record_index ADD COLUMN request_id INTEGER;
                    DELETE FROM record_index WHERE verdict = 'invalid';
                    CREATE TABLE requests (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        user TEXT NOT NULL,
                        minutes INTEGER NOT NULL CHECK (minutes BETWEEN 1 AND 480),
                        reason TEXT,
                        created_ms INTEGER NOT NULL,
                        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied')),
                        answered_ms INTEGER,
                        granted_minutes INTEGER,
                        answered_by TEXT,
                        notified INTEGER NOT NULL DEFAULT 0 CHECK (notified IN (0, 1))
                    );
                    CREATE INDEX requests_status ON requests(status);
                    CREATE INDEX requests_user ON requests(user, created_ms);
                    """)
        }
        migrator.registerMigration("v4-confirmations") { db in
            try db.execute(
                sql: """
                    CREATE TABLE confirmations (
                        machine TEXT NOT NULL,
                        record TEXT NOT NULL,
                        user TEXT,
                        outcome TEXT NOT NULL CHECK (outcome IN ('applied', 'rejected', 'superseded', 'merged')),
                        reason TEXT,
                        conflicts TEXT NOT NULL DEFAULT '[]',
                        enforced_version INTEGER,
                        written INTEGER NOT NULL CHECK (written IN (0, 1)),
                        PRIMARY KEY (machine, record)
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v5-audit-chain") { db in
            // Each event carries the hash of the entry before it and its own (AuditChain); events past
            // the retention period become summary rows that keep the chain; grants announced by an
            // event that was summarised stay announced.
            try db.execute(
                sql: """
                    ALTER TABLE events ADD COLUMN prev_hash TEXT;
                    ALTER TABLE events ADD COLUMN hash TEXT;
                    CREATE TABLE event_summaries (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        first_event INTEGER NOT NULL,
                        last_event INTEGER NOT NULL,
                        day TEXT NOT NULL,
                        user TEXT,
                        kind TEXT NOT NULL,
                        count INTEGER NOT NULL CHECK (count > 0),
                        first_ms INTEGER NOT NULL,
                        last_ms INTEGER NOT NULL,
                        prev_hash TEXT NOT NULL,
                        last_hash TEXT NOT NULL,
                        hash TEXT NOT NULL
                    );
                    CREATE INDEX event_summaries_user_day ON event_summaries(user, day);
                    CREATE TABLE announced_grants (
                        record TEXT PRIMARY KEY NOT NULL
                    ) WITHOUT ROWID;
                    """)
            // The events written before the chain existed are chained here, once, in id order (the
            // hash is SHA-256, which SQLite's SQL lacks; its format is frozen in AuditChain).
            try AuditChain.chainUnhashedEvents(db)
        }
        migrator.registerMigration("v6-remote-usage") { db in
            // Other computers' usage summaries, the latest of each kept, so a summary deleted from or
            // replaced by an older copy in the shared directory does not take time back.
            try db.execute(
                sql: """
                    CREATE TABLE remote_usage (
                        machine TEXT NOT NULL,
                        user TEXT NOT NULL,
                        day TEXT NOT NULL,
                        host TEXT NOT NULL,
                        screen_ms INTEGER NOT NULL CHECK (screen_ms >= 0),
                        buckets TEXT NOT NULL,
                        written INTEGER NOT NULL,
                        PRIMARY KEY (machine, user, day)
                    ) WITHOUT ROWID;
                    CREATE INDEX remote_usage_user_day ON remote_usage(user, day);
                    """)
        }
        migrator.registerMigration("v7-record-index-incomplete") { db in
            // Whether a refused file may still be arriving (its bytes do not yet match its name, or are
            // not yet whole JSON), so code never decides it from the reason's words.
            try db.execute(
                sql: """
                    ALTER TABLE record_index ADD COLUMN may_be_incomplete INTEGER NOT NULL DEFAULT 0
                        CHECK (may_be_incomplete IN (0, 1));
                    UPDATE record_index SET may_be_incomplete = 1
                        WHERE verdict = 'invalid' AND (reason = 'content does not match its name (hash)' OR reason LIKE 'not valid JSON%');
                    """)
        }
        migrator.registerMigration("v8-request-cause-grant-lifts") { db in
            // What blocked the child when they asked (`daily-limit`, `bedtime`, `downtime:school`,
            // `app-limit:minecraft`, ...; NULL: nothing did, or a request made before this column), and
            // the app the request names: what `curfew approve` lifts.
            try db.execute(
                sql: """
                    ALTER TABLE requests ADD COLUMN cause TEXT;
                    ALTER TABLE requests ADD COLUMN app TEXT;
                    """)
            // What a grant lifts besides screen time and bedtime, kept with its checked verdict. A grant
            // an older version refused for a field it did not know is checked again.
            try db.execute(
                sql: """
                    ALTER TABLE record_index ADD COLUMN grant_app TEXT;
                    ALTER TABLE record_index ADD COLUMN grant_app_minutes INTEGER;
                    ALTER TABLE record_index ADD COLUMN grant_downtime_window TEXT;
                    ALTER TABLE record_index ADD COLUMN grant_downtime_delay_minutes INTEGER;
                    ALTER TABLE record_index ADD COLUMN grant_ends_break INTEGER NOT NULL DEFAULT 0
                        CHECK (grant_ends_break IN (0, 1));
                    DELETE FROM record_index WHERE verdict = 'invalid' AND reason LIKE 'unknown record field%';
                    """)
        }
        return migrator
    }
}

#if canImport(Glibc)
    import Glibc
#endif

extension StateStore {
    /// What `openChecked` found wrong with the previous database, and where it was moved.
    public struct Corruption: Sendable, Equatable {
        public var reason: String
        public var movedTo: String
    }

    /// Opens the agent's database after checking it (`PRAGMA quick_check`). A file SQLite cannot read
    /// or that fails the check is moved aside (with its -wal and -shm) to `<path>.corrupt-<unix time>`
    /// and a fresh database is created: policy comes back from the shared directory, and the caller
    /// records what happened as an event.
    public static func openChecked(path: String, now: Instant) throws -> (StateStore, Corruption?) {
        var reason: String? = nil
        if access(path, F_OK) == 0 {
            do {
                let store = try StateStore(path: path, concurrentReaders: true)
                let result = try store.read { try String.fetchAll($0, sql: "PRAGMA quick_check") }
                if result == ["ok"] { return (store, nil) }
                reason = "integrity check failed: " + result.prefix(3).joined(separator: "; ")
            } catch {
                reason = "cannot be opened: \(error)"
            }
        }
        guard let reason else { return (try StateStore(path: path, concurrentReaders: true), nil) }
        let aside = "\(path).corrupt-\(now.seconds)"
        for suffix in ["", "-wal", "-shm"] where access(path + suffix, F_OK) == 0 {
            if case .failure(let error) = valueOrErrno({ rename(path + suffix, aside + suffix) }) {
                throw StoreError(message: "cannot move the damaged database \(path + suffix) aside: \(error)")
            }
        }
        return (try StateStore(path: path, concurrentReaders: true), Corruption(reason: reason, movedTo: aside))
    }
}

public struct StoreError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
