/// Which policy is in force for each user on one computer: the one place that decides it, for the agent
/// (`reloadPolicies`) and for the CLI when it answers without the agent (`check-login`, `status`).
///
/// What is enforced never goes backwards. The records' fold is in force unless the last good policy this
/// computer kept is newer (the newest records were deleted or stopped verifying); a removal counts only
/// when it is the newest version this computer has enforced (deleting a child's later records never
/// unmanages them); a user this computer manages with no policy at all is held to no screen time
/// (fail closed) unless the computer fails open.
public enum PolicyInForce {
    public enum Source: Sendable, Equatable {
        /// The records' fold.
        case records
        /// The last good policy: the records fold to an older version (`recordsVersion`), or to none.
        case kept(recordsVersion: Int?)
        /// No policy at all for a managed user: no screen time, no logins.
        case failClosed
    }

    public struct Entry: Sendable, Equatable {
        public var policy: Policy
        /// 0 when failing closed.
        public var version: Int
        public var source: Source
    }

    public struct Resolution: Sendable, Equatable {
        public var entries: [String: Entry] = [:]
        /// Managed users with no policy who are let be, because the computer fails open.
        public var failingOpen: Set<String> = []
        /// Users whose removal counts: no longer managed, on purpose.
        public var removed: Set<String> = []
        /// Users whose version in force has no record in the shared directory any more: that version.
        public var missing: [String: Int] = [:]
        /// The newest version of each user this computer has now enforced or removed at (to keep).
        public var newestSeen: [String: Int] = [:]
    }

    /// The users whose deciding record is a removal that counts: not older than the newest version
    /// this computer has seen of them (`newestSeen`, which callers raise by the last good version).
    public static func countedRemovals(current: [String: RecordSummary], newestSeen: [String: Int]) -> Set<String> {
        Set(current.values.filter { $0.removesUser && $0.version >= newestSeen[$0.user] ?? 0 }.map(\.user))
    }

    /// - Parameters:
    ///   - folded: the policy and version each user's records fold to (users with a policy only).
    ///   - current: each user's deciding record, removals included (`PolicyFold.currentByUser`).
    ///   - newestOnDisk: the newest valid record version of each user in the shared directory.
    ///   - lastGood: the last good policies this computer kept.
    ///   - newestSeen: the newest version of each user this computer has enforced or removed at.
    ///   - managed: the users this computer manages (`managed-users`).
    public static func resolve(
        folded: [String: (policy: Policy, version: Int)], current: [String: RecordSummary], newestOnDisk: [String: Int],
        lastGood: [String: LastGoodPolicy], newestSeen: [String: Int], managed: Set<String>, failOpen: Bool
    ) -> Resolution {
        var seen = newestSeen
        for (user, kept) in lastGood { seen[user] = max(seen[user] ?? 0, kept.version) }
        var resolution = Resolution()
        resolution.removed = countedRemovals(current: current, newestSeen: seen)
        for (user, fold) in folded {
            resolution.entries[user] = Entry(policy: fold.policy, version: fold.version, source: .records)
        }
        for (user, kept) in lastGood where !resolution.removed.contains(user) {
            let fromRecords = folded[user]?.version
            if let fromRecords, fromRecords >= kept.version { continue }
            resolution.entries[user] = Entry(policy: kept.policy, version: kept.version, source: .kept(recordsVersion: fromRecords))
        }
        for user in managed where resolution.entries[user] == nil && !resolution.removed.contains(user) {
            if failOpen {
                resolution.failingOpen.insert(user)
            } else {
                resolution.entries[user] = Entry(policy: Policy.failClosed(for: user), version: 0, source: .failClosed)
            }
        }
        for (user, entry) in resolution.entries where entry.version > 0 {
            let newest = max(entry.version, seen[user] ?? 0)
            if newest > newestOnDisk[user] ?? 0 { resolution.missing[user] = newest }
        }
        resolution.newestSeen = seen
        for (user, fold) in folded { resolution.newestSeen[user] = max(resolution.newestSeen[user] ?? 0, fold.version) }
        for user in resolution.removed {
            if let removal = current[user] { resolution.newestSeen[user] = max(resolution.newestSeen[user] ?? 0, removal.version) }
        }
        return resolution
    }
}
