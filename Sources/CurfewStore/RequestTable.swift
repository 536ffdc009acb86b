import CurfewCore
import GRDB

/// A child's request for more time, as kept on the child's computer.
public struct TimeRequest: Sendable, Equatable {
    public enum Status: String, Sendable, Equatable, CaseIterable {
        case pending, approved, denied
    }

    public var id: Int64
    public var user: String
    public var minutes: Int
    public var reason: String?
    /// When the child asked.
    public var created: Instant
    public var status: Status
    /// When a parent (or the allowance) answered; nil while pending.
    public var answered: Instant?
    /// What a parent granted when approving (may differ from `minutes`).
    public var grantedMinutes: Int?
    /// Who answered: the parent's account or key.
    public var answeredBy: String?
    /// Whether the child was told the answer.
    public var notified: Bool
    /// What blocked the child when they asked; nil when nothing did (or for a request made before
    /// causes were recorded).
    public var cause: UseBlock?
    /// The app the child asked more time for (`curfew request 30m --app minecraft`).
    public var app: String?

    public init(
        id: Int64, user: String, minutes: Int, reason: String?, created: Instant, status: Status,
        answered: Instant? = nil, grantedMinutes: Int? = nil, answeredBy: String? = nil, notified: Bool = false,
        cause: UseBlock? = nil, app: String? = nil
    ) {
        self.cause = cause
        self.app = app
        self.id = id
        self.user = user
        self.minutes = minutes
        self.reason = reason
        self.created = created
        self.status = status
        self.answered = answered
        self.grantedMinutes = grantedMinutes
        self.answeredBy = answeredBy
        self.notified = notified
    }
}

/// Why a request could not be answered.
public enum RequestError: Error, Equatable, Sendable, CustomStringConvertible {
    case unknown(id: Int64)
    case alreadyAnswered(id: Int64, status: TimeRequest.Status)

    public var description: String {
        switch self {
        case .unknown(let id): "there is no request \(id)"
        case .alreadyAnswered(let id, let status): "request \(id) was already \(status.rawValue)"
        }
    }
}

/// The `requests` table: children's requests for more time and the parents' answers.
public enum RequestTable {
    static let columns =
        "id, user, minutes, reason, created_ms, status, answered_ms, granted_minutes, answered_by, notified, cause, app"

    static func request(_ row: Row) -> TimeRequest {
        TimeRequest(
            id: row["id"], user: row["user"], minutes: row["minutes"], reason: row["reason"], created: Instant(milliseconds: row["created_ms"]),
            status: TimeRequest.Status(rawValue: row["status"]) ?? .pending,
            answered: (row["answered_ms"] as Int64?).map(Instant.init(milliseconds:)),
            grantedMinutes: row["granted_minutes"], answeredBy: row["answered_by"], notified: row["notified"],
            cause: (row["cause"] as String?).flatMap(UseBlock.init(code:)), app: row["app"])
    }

    /// Records a new pending request, made at `now`.
    @discardableResult
    public static func add(
        user: String, minutes: Int, reason: String?, now: Instant, cause: UseBlock? = nil, app: String? = nil, _ db: Database
    ) throws -> TimeRequest {
        try db.execute(
            sql: "INSERT INTO requests (user, minutes, reason, created_ms, cause, app) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [user, minutes, reason, now.milliseconds, cause?.code, app])
        return TimeRequest(
            id: db.lastInsertedRowID, user: user, minutes: minutes, reason: reason, created: now,
            status: .pending, cause: cause, app: app)
    }

    /// Who answers a self-service extension (`curfew extend`): the policy's allowance, not a parent.
    public static let selfService = "allowance"

    /// Records extra time a child took without asking, under the policy's allowance: a request that is
    /// approved as it is made, at `now` (so parents see it in `curfew requests --all`).
    @discardableResult
    public static func addSelfService(user: String, minutes: Int, now: Instant, _ db: Database) throws -> TimeRequest {
        try db.execute(
            sql: """
                INSERT INTO requests (user, minutes, reason, created_ms, status, answered_ms, granted_minutes, answered_by, notified)
                VALUES (?, ?, NULL, ?, 'approved', ?, ?, ?, 1)
                """,
            arguments: [user, minutes, now.milliseconds, now.milliseconds, minutes, selfService])
        return TimeRequest(
            id: db.lastInsertedRowID, user: user, minutes: minutes, reason: nil, created: now, status: .approved,
            answered: now, grantedMinutes: minutes, answeredBy: selfService, notified: true)
    }

    /// The self-service extensions of `user` made at or after `since`, oldest first.
    public static func selfService(user: String, since: Instant, _ db: Database) throws -> [TimeRequest] {
        try Row.fetchAll(
            db,
            sql: "SELECT \(columns) FROM requests WHERE user = ? AND answered_by = ? AND status = 'approved' AND created_ms >= ? ORDER BY id",
            arguments: [user, selfService, since.milliseconds]
        ).map(request)
    }

    /// How many requests of `user` are waiting for an answer, and how many were made at or after
    /// `since` (answered ones included): what `RequestRules.checkRoom` weighs.
    public static func counts(user: String, since: Instant, _ db: Database) throws -> (pending: Int, recent: Int) {
        let row = try Row.fetchOne(
            db,
            sql: """
                SELECT COALESCE(SUM(status = 'pending'), 0), COALESCE(SUM(created_ms >= ?), 0)
                FROM requests WHERE user = ? AND (status = 'pending' OR created_ms >= ?)
                """,
            arguments: [since.milliseconds, user, since.milliseconds])
        return (row?[0] ?? 0, row?[1] ?? 0)
    }

    public static func find(id: Int64, _ db: Database) throws -> TimeRequest? {
        try Row.fetchOne(db, sql: "SELECT \(columns) FROM requests WHERE id = ?", arguments: [id]).map(request)
    }

    /// Who answers a request with the parent's PIN typed on the child's screen (`approve-pin`).
    public static let parentPIN = "parent-pin"

    /// The newest request of `user` still waiting for an answer.
    public static func latestPending(user: String, _ db: Database) throws -> TimeRequest? {
        try Row.fetchOne(
            db, sql: "SELECT \(columns) FROM requests WHERE user = ? AND status = 'pending' ORDER BY id DESC LIMIT 1",
            arguments: [user]
        ).map(request)
    }

    /// The minutes the parent's PIN approved for `user` in requests answered at or after `since`.
    public static func minutesApprovedByPIN(user: String, since: Instant, _ db: Database) throws -> Int {
        try Int.fetchOne(
            db,
            sql: """
                SELECT COALESCE(SUM(granted_minutes), 0) FROM requests
                WHERE user = ? AND status = 'approved' AND answered_by = ? AND answered_ms >= ?
                """,
            arguments: [user, parentPIN, since.milliseconds]) ?? 0
    }

    /// Unanswered requests, oldest first.
    public static func pending(_ db: Database) throws -> [TimeRequest] {
        try Row.fetchAll(db, sql: "SELECT \(columns) FROM requests WHERE status = 'pending' ORDER BY id").map(request)
    }

    /// Every request (of `user` when given), oldest first.
    public static func all(user: String? = nil, _ db: Database) throws -> [TimeRequest] {
        if let user {
            return try Row.fetchAll(
                db, sql: "SELECT \(columns) FROM requests WHERE user = ? ORDER BY id", arguments: [user]
            ).map(request)
        }
        return try Row.fetchAll(db, sql: "SELECT \(columns) FROM requests ORDER BY id").map(request)
    }

    /// Approves or denies a pending request; refuses one that is unknown or already answered.
    /// `minutes` is what was granted (nil when denied); answered at `now`.
    @discardableResult
    public static func answer(
        id: Int64, status: TimeRequest.Status, minutes: Int?, by answeredBy: String?, now: Instant, _ db: Database
    ) throws -> TimeRequest {
        precondition(status != .pending, "an answer approves or denies")
        guard let existing = try find(id: id, db) else { throw RequestError.unknown(id: id) }
        guard existing.status == .pending else { throw RequestError.alreadyAnswered(id: id, status: existing.status) }
        try db.execute(
            sql: """
                UPDATE requests SET status = ?, answered_ms = ?, granted_minutes = ?, answered_by = ?, notified = 0
                WHERE id = ? AND status = 'pending'
                """,
            arguments: [status.rawValue, now.milliseconds, status == .approved ? minutes : nil, answeredBy, id])
        guard db.changesCount == 1 else { throw RequestError.alreadyAnswered(id: id, status: existing.status) }
        return try find(id: id, db) ?? existing
    }

    /// Answered requests whose child has not been told yet, oldest first.
    public static func unnotifiedAnswers(_ db: Database) throws -> [TimeRequest] {
        try Row.fetchAll(
            db, sql: "SELECT \(columns) FROM requests WHERE status != 'pending' AND notified = 0 ORDER BY id"
        ).map(request)
    }

    /// Notes that the child was told the answer to these requests.
    public static func markNotified(ids: [Int64], _ db: Database) throws {
        let statement = try db.cachedStatement(sql: "UPDATE requests SET notified = 1 WHERE id = ? AND status != 'pending'")
        for id in ids { try statement.execute(arguments: [id]) }
    }
}

extension TimeRequest {
    /// The form the socket and `curfew requests --json` use.
    public var record: AgentReply.RecordedRequest {
        AgentReply.RecordedRequest(
            id: id, user: user, minutes: minutes, reason: reason, createdMs: created.milliseconds, status: status.rawValue,
            answeredMs: answered?.milliseconds, grantedMinutes: grantedMinutes, answeredBy: answeredBy, cause: cause?.code, app: app)
    }

    public var json: JSONValue { JSONValueEncoder().value(of: record) }
}
