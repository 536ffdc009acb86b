import CurfewCore
import GRDB

/// What the database holds about the parent's PIN for one child: the tries (`pin-try` events) that
/// `PINRules.checkRoom(tries:now:)` weighs, and the request a PIN approval would answer.
public enum PINApprovals {
    /// The request the PIN would answer (the child's newest pending one) and the minutes it may grant.
    public struct Room: Sendable, Equatable {
        public var request: TimeRequest
        /// What `PINRules.grantable` allows: 0 when the day's maximum is used up.
        public var minutes: Int
        /// The minutes the PIN approved for this child in the last `PINRules.daySeconds`.
        public var approvedInDay: Int
    }

    /// nil when the child has no pending request.
    public static func room(user: String, offered: Int, maxPerDay: Int, now: Instant, _ db: Database) throws -> Room? {
        guard let request = try RequestTable.latestPending(user: user, db) else { return nil }
        let approved = try RequestTable.minutesApprovedByPIN(
            user: user, since: now - .seconds(PINRules.daySeconds) + .milliseconds(1), db)
        let minutes = PINRules.grantable(offered: offered, asked: request.minutes, approvedInDay: approved, maxPerDay: maxPerDay)
        return Room(request: request, minutes: minutes, approvedInDay: approved)
    }

    /// The child's tries of the last `PINRules.daySeconds`, oldest first.
    public static func tries(of user: String, now: Instant, _ db: Database) throws -> [PINRules.Try] {
        try EventLog.events(of: user, from: now - .seconds(PINRules.daySeconds) + .milliseconds(1), before: nil, db)
            .filter { $0.kind == .pinTry }
            .map { event in
                guard case .object(let details)? = event.data else { return PINRules.Try(time: event.time, right: false) }
                return PINRules.Try(time: event.time, right: details["right"] == .bool(true))
            }
    }
}
