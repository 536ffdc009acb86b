/// What this computer last decided about one record, and whether its confirmation reached the shared
/// directory. A row with `written == false` is pending: it is written again on every scan until it is.
public struct ConfirmationState: Sendable, Equatable {
    public var record: String
    public var user: String?
    public var outcome: Confirmation.Outcome
    public var reason: String?
    public var conflicts: [String]
    public var enforcedVersion: Int?
    public var written: Bool

    public init(
        record: String, user: String?, outcome: Confirmation.Outcome, reason: String?, conflicts: [String] = [],
        enforcedVersion: Int?, written: Bool
    ) {
        self.record = record
        self.user = user
        self.outcome = outcome
        self.reason = reason
        self.conflicts = conflicts
        self.enforcedVersion = enforcedVersion
        self.written = written
    }

    /// Whether a confirmation saying `other` must replace this one: the verdict changed. A new
    /// enforced version alone does not rewrite every older record's confirmation.
    public func sameVerdict(as other: ConfirmationState) -> Bool {
        user == other.user && outcome == other.outcome && reason == other.reason && conflicts == other.conflicts
    }
}

/// A record file that could not be used, and why; shown to parents as a warning.
public struct IgnoredRecord: Sendable, Equatable {
    public var name: String
    public var reason: String
    /// The user it claims to be for, when that could be read.
    public var user: String?

    public init(name: String, reason: String, user: String?) {
        self.name = name
        self.reason = reason
        self.user = user
    }
}

/// What this computer answers for each record file of a scan, after enforcement was decided.
///
/// - `applied`: the policy record in force for its user (or the removal in force), or a grant that
///   counts here.
/// - `superseded`: a valid, trusted policy record older than the one in force (or of the same
///   version but losing the tie), or in force in the records while a newer last good policy stays.
/// - `merged`: named by the fold in `merged` (record id → fields in conflict).
/// - `rejected`: every file named like a record that cannot be used (malformed, not canonical,
///   forged, tampered, signed by a key not trusted here, an unknown format, oversized, a symlink, a
///   FIFO, unreadable), and grants of users with no policy on this computer or removed.
///   Every policy record makes its user managed, so "user not managed here" only concerns grants.
/// - Files still arriving (`RecordScan.incomplete`) get no answer yet.
public enum ConfirmationPlan {
    // Reasons that do not name the newer version, so a confirmation is not rewritten at each change.
    public static let newer = "a newer version is in force"
    public static let lostTie = "another record of the same version wins (later time, then greater key id)"
    public static let keptNewer = "a newer version stays in force (its record can no longer be read)"

    public static func verdicts(
        valid: [RecordSummary], grants: [GrantSummary], ignored: [IgnoredRecord], versions: [String: Int],
        enforcedUsers: Set<String>, removed: Set<String>, merged: [String: [String]] = [:]
    ) -> [String: ConfirmationState] {
        var result: [String: ConfirmationState] = [:]
        func add(
            _ id: String, _ user: String?, _ outcome: Confirmation.Outcome, _ reason: String?, conflicts: [String] = [],
            enforced: Int?
        ) {
            result[id] = ConfirmationState(
                record: id, user: user, outcome: outcome, reason: reason, conflicts: conflicts, enforcedVersion: enforced,
                written: false)
        }
        let byUser = Dictionary(grouping: valid, by: \.user)
        for (user, records) in byUser {
            guard let current = PolicyFold.current(records) else { continue }
            let enforced = versions[user]
            for record in records {
                if let conflicts = merged[record.id] {
                    add(
                        record.id, user, .merged, "merged with a concurrent edit of version \(record.baseVersion)",
                        conflicts: conflicts, enforced: enforced)
                } else if record.id == current.id {
                    if record.removesUser {
                        add(record.id, user, .applied, nil, enforced: nil)
                    } else if enforced == record.version {
                        add(record.id, user, .applied, nil, enforced: enforced)
                    } else if let enforced, enforced > record.version {
                        add(record.id, user, .superseded, ConfirmationPlan.keptNewer, enforced: enforced)
                    }
                    // Otherwise the record in force could not be read back just now: answer next scan.
                } else if record.version < current.version {
                    add(
                        record.id, user, .superseded, ConfirmationPlan.newer,
                        enforced: enforced ?? (current.removesUser ? nil : current.version))
                } else {
                    add(
                        record.id, user, .superseded, ConfirmationPlan.lostTie,
                        enforced: enforced ?? (current.removesUser ? nil : current.version))
                }
            }
        }
        for grant in grants {
            if removed.contains(grant.user) {
                add(grant.id, grant.user, .rejected, "\(grant.user) is no longer managed", enforced: nil)
            } else if enforcedUsers.contains(grant.user) {
                add(grant.id, grant.user, .applied, nil, enforced: versions[grant.user])
            } else {
                add(grant.id, grant.user, .rejected, "\(grant.user) has no policy on this computer", enforced: nil)
            }
        }
        for ignored in ignored {
            add(ignored.name, ignored.user, .rejected, ignored.reason, enforced: ignored.user.flatMap { versions[$0] })
        }
        return result
    }
}
