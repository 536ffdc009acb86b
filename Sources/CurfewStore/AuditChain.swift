import CurfewCore
import Crypto
import GRDB

/// The audit log's hash chain: every event carries the hash of the entry before it (`prev_hash`) and
/// its own (`hash`), so editing, inserting or removing an event breaks a link that
/// `curfew events --verify` finds. Events past the retention period are replaced by summary rows (per
/// local day, user and kind: a count) that carry the hash of the last event they replaced; the chain
/// goes on from it, so it stays verifiable across a summary.
///
/// The hash formats below are part of the database format: never change one (add a `-v2` instead).
public enum AuditChain {
    /// The `prev_hash` of the very first entry.
    public static let genesis = String(repeating: "0", count: 64)

    /// SHA-256 (hex) of `curfew-event-v1\n`, the previous hash, `\n`, and the canonical JSON array
    /// `[time_ms, user, kind, message, data]` (`data` as the text stored, or null). The row id is
    /// not part of it: the order is the chain's.
    public static func eventHash(
        previous: String, time: Int64, user: String?, kind: String, message: String, data: String?
    ) -> String {
        let content = JSONValue.array([
            .int(time), user.map { .string($0) } ?? .null, .string(kind), .string(message), data.map { .string($0) } ?? .null,
        ])
        return sha256Hex("curfew-event-v1\n\(previous)\n\(content.canonicalString)")
    }

    /// SHA-256 (hex) of `curfew-event-summary-v1\n`, the previous summary row's hash (or `genesis`),
    /// `\n`, and the canonical JSON array of the row's fields.
    static func summaryHash(previous: String, _ row: SummaryRow) -> String {
        let content = JSONValue.array([
            .int(row.firstEvent), .int(row.lastEvent), .string(row.day), row.user.map { .string($0) } ?? .null,
            .string(row.kind), .int(row.count), .int(row.firstTime.milliseconds), .int(row.lastTime.milliseconds),
            .string(row.previousHash), .string(row.lastHash),
        ])
        return sha256Hex("curfew-event-summary-v1\n\(previous)\n\(content.canonicalString)")
    }

    static func sha256Hex(_ text: String) -> String {
        let digest = SHA256.hash(data: Array(text.utf8))
        let digits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        hex.reserveCapacity(64)
        for byte in digest {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: hex, as: UTF8.self)
    }

    /// The hash the next event chains from: the newest event's, else the newest summary's
    /// `last_hash`, else `genesis`. Call inside the transaction that inserts the event.
    static func head(_ db: Database) throws -> String {
        if let hash = try String.fetchOne(db, sql: "SELECT hash FROM events WHERE hash IS NOT NULL ORDER BY id DESC LIMIT 1") {
            return hash
        }
        return try String.fetchOne(db, sql: "SELECT last_hash FROM event_summaries ORDER BY id DESC LIMIT 1") ?? genesis
    }

    /// Chains every event that has no hash yet, in id order, after the newest hashed one. Used once,
    /// by the migration that added the chain: afterwards an event without a hash was written behind
    /// curfew's back and is reported as a broken link, never chained.
    static func chainUnhashedEvents(_ db: Database) throws {
        var previous = genesis
        let rows = try Row.fetchAll(db, sql: "SELECT id, time_ms, user, kind, message, data, hash FROM events ORDER BY id")
        let update = try db.makeStatement(sql: "UPDATE events SET prev_hash = ?, hash = ? WHERE id = ?")
        for row in rows {
            if let hash: String = row["hash"] {
                previous = hash
                continue
            }
            let hash = eventHash(previous: previous, time: row["time_ms"], user: row["user"], kind: row["kind"], message: row["message"], data: row["data"])
            try update.execute(arguments: [previous, hash, row["id"] as Int64])
            previous = hash
        }
    }

    /// One row of `event_summaries`.
    public struct SummaryRow: Sendable, Equatable {
        public var id: Int64
        /// The ids of the first and last event of the run this row's batch replaced.
        public var firstEvent: Int64
        public var lastEvent: Int64
        /// Local day (YYYY-MM-DD) of the events counted.
        public var day: String
        public var user: String?
        public var kind: String
        public var count: Int64
        /// The times of the first and last event counted.
        public var firstTime: Instant
        public var lastTime: Instant
        /// The `prev_hash` of the first event replaced, and the `hash` of the last one.
        public var previousHash: String
        public var lastHash: String
        public var hash: String
    }

    /// The summary rows whose last event is at or after `since`, of `user` (and of no user) when given.
    public static func summaries(user: String?, since: Instant?, _ db: Database) throws -> [SummaryRow] {
        var sql = """
            SELECT id, first_event, last_event, day, user, kind, count, first_ms, last_ms, prev_hash, last_hash, hash
            FROM event_summaries WHERE last_ms >= ?
            """
        var arguments: StatementArguments = [since?.milliseconds ?? Int64.min]
        if let user {
            sql += " AND (user = ? OR user IS NULL)"
            arguments += [user]
        }
        sql += " ORDER BY id"
        return try Row.fetchAll(db, sql: sql, arguments: arguments).map(summaryRow)
    }

    static func summaryRow(_ row: Row) -> SummaryRow {
        SummaryRow(
            id: row["id"], firstEvent: row["first_event"], lastEvent: row["last_event"], day: row["day"], user: row["user"], kind: row["kind"], count: row["count"],
            firstTime: Instant(milliseconds: row["first_ms"]), lastTime: Instant(milliseconds: row["last_ms"]), previousHash: row["prev_hash"],
            lastHash: row["last_hash"], hash: row["hash"])
    }

    /// What `verify` found.
    public struct Verification: Sendable, Equatable {
        /// Events checked, summary rows checked, and the events those rows count.
        public var events = 0
        public var summaryRows = 0
        public var summarisedEvents: Int64 = 0
        /// The hash the next event will chain from (an auditor may note it: removing the newest
        /// events leaves a shorter chain that is still whole).
        public var head = AuditChain.genesis
        /// The first broken link, if any.
        public var broken: BrokenLink?
    }

    public struct BrokenLink: Sendable, Equatable, CustomStringConvertible {
        /// `event` or `summary` (a row of `event_summaries`).
        public var entry: String
        public var id: Int64
        /// What differs, for people.
        public var problem: String
        public var description: String { "\(entry) \(id): \(problem)" }
    }

    /// Walks the whole chain (summary rows, then events, in id order) and stops at the first broken link.
    public static func verify(_ db: Database) throws -> Verification {
        var result = Verification()
        var expected = genesis
        var summaryPrevious = genesis
        var batch: (first: Int64, last: Int64, previous: String, lastHash: String)? = nil
        let summaryRows = try Row.fetchCursor(
            db,
            sql: """
                SELECT id, first_event, last_event, day, user, kind, count, first_ms, last_ms, prev_hash, last_hash, hash
                FROM event_summaries ORDER BY id
                """)
        while let raw = try summaryRows.next() {
            let row = summaryRow(raw)
            result.summaryRows += 1
            result.summarisedEvents += row.count
            let computed = summaryHash(previous: summaryPrevious, row)
            if computed != row.hash {
                result.broken = BrokenLink(
                    entry: "summary", id: row.id,
                    problem: "its content does not match its hash (stored \(short(row.hash)), computed \(short(computed))): "
                        + "its day, user, kind, count or times were changed, or a summary row before it was removed")
                return result
            }
            summaryPrevious = row.hash
            if let current = batch, current.first == row.firstEvent, current.last == row.lastEvent {
                guard current.previous == row.previousHash, current.lastHash == row.lastHash else {
                    result.broken = BrokenLink(
                        entry: "summary", id: row.id, problem: "it disagrees with the other rows of its summary about the hashes it replaced")
                    return result
                }
                continue
            }
            if row.previousHash != expected {
                result.broken = BrokenLink(
                    entry: "summary", id: row.id,
                    problem: "it links to \(short(row.previousHash)) but the entry before it has hash \(short(expected)): "
                        + "events or summaries before it were removed or changed")
                return result
            }
            batch = (row.firstEvent, row.lastEvent, row.previousHash, row.lastHash)
            expected = row.lastHash
        }
        var previousID: Int64? = batch?.last
        let events = try Row.fetchCursor(db, sql: "SELECT id, time_ms, user, kind, message, data, prev_hash, hash FROM events ORDER BY id")
        while let row = try events.next() {
            let id: Int64 = row["id"]
            result.events += 1
            guard let hash: String = row["hash"], let previous: String = row["prev_hash"] else {
                result.broken = BrokenLink(entry: "event", id: id, problem: "it has no hash: it was written into the database behind curfew's back")
                return result
            }
            if previous != expected {
                let gap = previousID.map { id > $0 + 1 ? " (events \($0 + 1) to \(id - 1) are missing)" : "" } ?? ""
                result.broken = BrokenLink(
                    entry: "event", id: id,
                    problem: "it links to \(short(previous)) but the entry before it has hash \(short(expected)): "
                        + "an event before it was removed, inserted or had its hash changed\(gap)")
                return result
            }
            let computed = eventHash(previous: previous, time: row["time_ms"], user: row["user"], kind: row["kind"], message: row["message"], data: row["data"])
            if computed != hash {
                result.broken = BrokenLink(
                    entry: "event", id: id,
                    problem: "its content does not match its hash (stored \(short(hash)), computed \(short(computed))): "
                        + "its time, user, kind, message or data was changed")
                return result
            }
            expected = hash
            previousID = id
        }
        result.head = expected
        return result
    }

    static func short(_ hash: String) -> String { String(hash.prefix(12)) }

    public struct BrokenChainError: Error, Sendable, CustomStringConvertible {
        public var link: BrokenLink
        public var description: String { "the audit log's hash chain is broken at \(link); nothing was summarised" }
    }

    /// Replaces the oldest events, in chain order, while each is older than `before`, by summary
    /// rows per local day (in `zone`), user and kind, in one transaction; returns how many events were
    /// replaced. The run stops at the first event not older than `before` (an event stamped in the
    /// future by a wrong clock holds back those after it: nothing is summarised early). A broken chain
    /// is never summarised (that would hide the tampering): it throws `BrokenChainError`.
    @discardableResult
    public static func summarise(before: Instant, zone: ZoneRules, _ db: Database) throws -> Int {
        guard db.isInsideTransaction else {
            var count = 0
            try db.inTransaction(.immediate) {
                count = try summarise(before: before, zone: zone, db)
                return .commit
            }
            return count
        }
        let verification = try verify(db)
        if let broken = verification.broken { throw BrokenChainError(link: broken) }
        struct Group {
            var count: Int64 = 0
            var first = Int64.max
            var last = Int64.min
        }
        var groups: [[String?]: Group] = [:]
        var firstEvent: Int64? = nil
        var lastEvent: Int64 = 0
        var previousHash = ""
        var lastHash = ""
        var grantRecords: [String] = []
        var replaced = 0
        let events = try Row.fetchCursor(db, sql: "SELECT id, time_ms, user, kind, prev_hash, hash, data FROM events ORDER BY id")
        while let row = try events.next() {
            let time: Int64 = row["time_ms"]
            guard time < before.milliseconds else { break }
            let id: Int64 = row["id"]
            if firstEvent == nil {
                firstEvent = id
                previousHash = row["prev_hash"]
            }
            lastEvent = id
            lastHash = row["hash"]
            replaced += 1
            let kind: String = row["kind"]
            let day = "\(zone.localTime(at: Instant(milliseconds: time)).date)"
            let user: String? = row["user"]
            var group = groups[[day, user, kind], default: Group()]
            group.count += 1
            group.first = min(group.first, time)
            group.last = max(group.last, time)
            groups[[day, user, kind]] = group
            if kind == EventKind.extraTimeGranted.rawValue, let text: String = row["data"], case .object(let object)? = try? JSONValue.parse(text),
                case .string(let record)? = object["record"]
            {
                grantRecords.append(record)
            }
        }
        guard let firstEvent else { return 0 }
        var summaryPrevious =
            try String.fetchOne(db, sql: "SELECT hash FROM event_summaries ORDER BY id DESC LIMIT 1") ?? genesis
        let insert = try db.makeStatement(
            sql: """
                INSERT INTO event_summaries (first_event, last_event, day, user, kind, count, first_ms, last_ms, prev_hash, last_hash, hash)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        let ordered = groups.sorted { left, right in
            (left.key[0] ?? "", left.key[1] ?? "", left.key[2] ?? "") < (right.key[0] ?? "", right.key[1] ?? "", right.key[2] ?? "")
        }
        for (key, group) in ordered {
            var row = SummaryRow(
                id: 0, firstEvent: firstEvent, lastEvent: lastEvent, day: key[0] ?? "", user: key[1],
                kind: key[2] ?? "", count: group.count, firstTime: Instant(milliseconds: group.first), lastTime: Instant(milliseconds: group.last),
                previousHash: previousHash, lastHash: lastHash, hash: "")
            row.hash = summaryHash(previous: summaryPrevious, row)
            try insert.execute(arguments: [
                row.firstEvent, row.lastEvent, row.day, row.user, row.kind, row.count, row.firstTime.milliseconds, row.lastTime.milliseconds,
                row.previousHash, row.lastHash, row.hash,
            ])
            summaryPrevious = row.hash
        }
        // The agent announces each grant once; the announcement outlives its event.
        let announce = try db.makeStatement(sql: "INSERT OR IGNORE INTO announced_grants (record) VALUES (?)")
        for record in grantRecords { try announce.execute(arguments: [record]) }
        try db.execute(sql: "DELETE FROM events WHERE id BETWEEN ? AND ?", arguments: [firstEvent, lastEvent])
        return replaced
    }
}
