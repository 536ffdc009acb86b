/// What a change of the policies in force records in the audit log, decided from the policies in force
/// before and the new resolution (`PolicyInForce.resolve`), with no I/O: the agent looks up what needs
/// the machine (which accounts are of uid 0, what the log already says) and passes it in.
///
/// A user whose policy or version changed is told once (`policy-loaded`, `policy-kept`, `fail-closed`);
/// what is said once per run of the agent (failing open, a policy for an account of uid 0) is in
/// `Announced`; a user no longer in force is `user-unmanaged`; each new grant of a user in force is
/// `extra-time-granted`; the record in force missing from the shared directory is said once per version.
public enum PolicyChange {
    /// The policies in force on this computer, by user, and their versions.
    public struct InForce: Sendable, Equatable {
        public var policies: [String: Policy]
        public var versions: [String: Int]

        public init(policies: [String: Policy] = [:], versions: [String: Int] = [:]) {
            self.policies = policies
            self.versions = versions
        }
    }

    /// One thing a policy change records, in the order `record` lists them.
    public enum Event: Sendable, Equatable {
        /// The last good policy stays in force: the records fold to an older version (`recordsVersion`),
        /// or to none.
        case kept(user: String, version: Int, recordsVersion: Int?)
        /// A managed user without a policy is held to no screen time.
        case failedClosed(user: String)
        /// A managed user without a policy is let be (the computer fails open).
        case failingOpen(user: String)
        /// A policy for an account of uid 0, which is never managed.
        case superuserIgnored(user: String)
        /// A new version, or a new policy at the same version (a concurrent edit merged into it).
        case loaded(user: String, version: Int, merged: Bool)
        /// The user is no longer in force: removed, or an account of uid 0.
        case unmanaged(user: String)
        /// A new grant for a user in force.
        case granted(GrantSummary)
        /// The record of `version` is missing from the shared directory; `newestOnDisk` is the newest
        /// valid version there, and `inForce` the version that stays in force.
        case recordMissing(user: String, version: Int, newestOnDisk: Int?, inForce: Int)

        /// The entry of the audit log that says it, at `time`.
        public func auditEvent(at time: Instant) -> AgentEvent {
            switch self {
            case .kept(let user, let version, let recordsVersion):
                let why = recordsVersion.map { "the records fold to an older version \($0)" } ?? "no valid policy can be loaded"
                return AgentEvent(
                    time: time, user: user, kind: .policyKept,
                    message: "\(why) for \(user); the last good policy (version \(version)) stays in force",
                    details: EventDetails.PolicyVersion(version: version))
            case .failedClosed(let user):
                return AgentEvent(
                    time: time, user: user, kind: .failClosed,
                    message: "no valid policy for \(user); no screen time and no logins until one arrives")
            case .failingOpen(let user):
                return AgentEvent(
                    time: time, user: user, kind: .failOpen,
                    message: "no valid policy for \(user); not enforcing anything (the agent fails open)")
            case .superuserIgnored(let user):
                return AgentEvent(
                    time: time, user: user, kind: .policyIgnored,
                    message: "\(user) is an account of uid 0, which is never managed; its policy is ignored")
            case .loaded(let user, let version, let merged):
                return AgentEvent(
                    time: time, user: user, kind: .policyLoaded,
                    message: merged ? "policy version \(version) (merged from concurrent edits) is in force" : "policy version \(version) is in force",
                    details: EventDetails.PolicyVersion(version: version))
            case .unmanaged(let user):
                return AgentEvent(time: time, user: user, kind: .userUnmanaged, message: "\(user) is no longer managed")
            case .granted(let grant):
                return AgentEvent(
                    time: time, user: grant.user, kind: .extraTimeGranted, message: grant.words,
                    details: EventDetails.Grant(
                        record: grant.id, date: "\(grant.date)", minutes: grant.extraMinutes, bedtimeDelayMinutes: grant.bedtimeDelayMinutes,
                        requestId: grant.requestId, lift: grant.lift))
            case .recordMissing(let user, let version, let newestOnDisk, let inForce):
                let onDisk = newestOnDisk.map { "the newest there is version \($0)" } ?? "there is none of \(user) there"
                return AgentEvent(
                    time: time, user: user, kind: .recordMissing,
                    message: "the record of version \(version) of \(user) is missing from the shared directory (\(onDisk)); version \(inForce) stays in force",
                    details: EventDetails.PolicyVersion(version: version))
            }
        }
    }

    /// Users already told about, once per run of the agent.
    public struct Announced: Sendable, Equatable {
        /// Let be without a policy, because the computer fails open.
        public var failingOpen: Set<String>
        /// Accounts of uid 0 whose policy was ignored.
        public var superusers: Set<String>

        public init(failingOpen: Set<String> = [], superusers: Set<String> = []) {
            self.failingOpen = failingOpen
            self.superusers = superusers
        }
    }

    public struct Outcome: Sendable, Equatable {
        /// The policies in force now: the resolution's, without the accounts of uid 0.
        public var inForce: InForce
        /// Users in force whose version has no record in the shared directory: that version.
        public var missing: [String: Int]
        public var events: [Event]
        /// Who has been told about now, those of `announced` included.
        public var announced: Announced
    }

    /// What changing from `before` to `resolution` records.
    /// - Parameters:
    ///   - before: the policies in force until now.
    ///   - resolution: the policies in force from now (`PolicyInForce.resolve`).
    ///   - superusers: the users of `resolution` whose account has uid 0: never managed.
    ///   - merged: the users whose version in force merges concurrent edits.
    ///   - grants: the grants not yet announced, in the order to announce them.
    ///   - newestOnDisk: the newest valid record version of each user in the shared directory.
    ///   - missingRecorded: the missing version of each user the log already told of.
    ///   - announced: who was already told about in this run.
    public static func record(
        before: InForce, resolution: PolicyInForce.Resolution, superusers: Set<String>, merged: Set<String>,
        grants: [GrantSummary], newestOnDisk: [String: Int], missingRecorded: [String: Int], announced: Announced
    ) -> Outcome {
        var events: [Event] = []
        var announced = announced
        for (user, entry) in resolution.entries.sorted(by: { $0.key < $1.key }) {
            switch entry.source {
            case .records:
                continue
            case .kept(let recordsVersion):
                guard before.versions[user] != entry.version || before.policies[user] != entry.policy else { continue }
                events.append(.kept(user: user, version: entry.version, recordsVersion: recordsVersion))
            case .failClosed:
                guard before.policies[user] != entry.policy else { continue }
                events.append(.failedClosed(user: user))
            }
        }
        for user in resolution.failingOpen.sorted() where !announced.failingOpen.contains(user) {
            announced.failingOpen.insert(user)
            events.append(.failingOpen(user: user))
        }
        // Root is never managed: a record for an account of uid 0 under another name (toor) is ignored.
        var after = InForce(policies: resolution.entries.mapValues(\.policy), versions: resolution.entries.mapValues(\.version))
        for user in after.policies.keys.sorted() where superusers.contains(user) {
            after.policies[user] = nil
            after.versions[user] = nil
            if announced.superusers.insert(user).inserted { events.append(.superuserIgnored(user: user)) }
        }
        // A concurrent edit merged into the version in force changes the policy, not the version.
        for (user, version) in after.versions.sorted(by: { $0.key < $1.key })
        where version > 0 && (before.versions[user] != version || before.policies[user] != after.policies[user]) {
            events.append(.loaded(user: user, version: version, merged: merged.contains(user)))
        }
        for user in before.policies.keys.sorted() where after.policies[user] == nil {
            events.append(.unmanaged(user: user))
        }
        for grant in grants where after.policies[grant.user] != nil {
            events.append(.granted(grant))
        }
        // The record in force gone from the shared directory (deleted, or damaged): the version stays,
        // and the parent is told once.
        let missing = resolution.missing.filter { after.policies[$0.key] != nil }
        for (user, version) in missing.sorted(by: { $0.key < $1.key }) where missingRecorded[user] != version {
            events.append(
                .recordMissing(user: user, version: version, newestOnDisk: newestOnDisk[user], inForce: after.versions[user] ?? version))
        }
        return Outcome(inForce: after, missing: missing, events: events, announced: announced)
    }
}
