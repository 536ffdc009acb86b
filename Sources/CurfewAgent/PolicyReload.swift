import CurfewCore
import CurfewLinux
import CurfewStore
import CurfewSync
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

extension Agent {
    /// Folds the records again; logs and records each user whose version changed.
    ///
    /// What is enforced never goes backwards: a user whose records can no longer be read, or fold to
    /// an older version (the newest file deleted), keeps the last good policy, which is kept in the
    /// database. A user this computer manages (`<state-dir>/managed-users`) with no policy at all is
    /// locked out (no screen time) unless the agent fails open. Only a valid removal record ends
    /// management.
    func reloadPolicies() throws {
        let previous = state.policies
        let (lastGood, newestStored, missingStored) = try store.read { db in
            (
                try AgentStateTable.all(AgentStateKeys.lastGoodPolicy, db),
                try AgentStateTable.all(AgentStateKeys.newestVersion, db),
                try AgentStateTable.all(AgentStateKeys.recordMissing, db)
            )
        }
        var newestSeen = newestStored
        for (user, kept) in lastGood { newestSeen[user] = max(newestSeen[user] ?? 0, kept.version) }
        let result = try loader.load(
            previous: previous, newestSeen: newestSeen, logger: logger, now: clock.wallSecond)
        let valid = result.scan?.valid ?? []
        let managed = ManagedUsers.read(stateDirectory: configuration.stateDirectory) ?? []
        // A record in force that changed while it was read keeps the policy (and version) it had.
        let folded = Dictionary(
            uniqueKeysWithValues: result.policies.map { user, policy in
                (user, (policy: policy, version: result.versions[user] ?? state.version(of: user) ?? 0))
            })
        let resolution = PolicyInForce.resolve(
            folded: folded, current: PolicyFold.currentByUser(valid),
            newestOnDisk: Dictionary(valid.map { ($0.user, $0.version) }, uniquingKeysWith: max), lastGood: lastGood,
            newestSeen: newestStored, managed: managed, failOpen: configuration.failOpen)
        var policies = resolution.entries.mapValues(\.policy)
        var versions = resolution.entries.mapValues(\.version)
        var events: [AgentEvent] = []
        let now = clock.wallInstant
        for (user, entry) in resolution.entries.sorted(by: { $0.key < $1.key }) {
            switch entry.source {
            case .records:
                continue
            case .kept(let recordsVersion):
                guard state.version(of: user) != entry.version || previous[user] != entry.policy else { continue }
                let why = recordsVersion.map { "the records fold to an older version \($0)" } ?? "no valid policy can be loaded"
                logger.warning("keeping the last good policy", metadata: ["user": "\(user)", "version": "\(entry.version)"])
                events.append(
                    AgentEvent(
                        time: now, user: user, kind: .policyKept,
                        message: "\(why) for \(user); the last good policy (version \(entry.version)) stays in force",
                        details: EventDetails.PolicyVersion(version: entry.version)))
            case .failClosed:
                guard previous[user] != entry.policy else { continue }
                logger.critical("no valid policy for a managed user; failing closed", metadata: ["user": "\(user)"])
                events.append(
                    AgentEvent(
                        time: now, user: user, kind: .failClosed,
                        message: "no valid policy for \(user); no screen time and no logins until one arrives"))
            }
        }
        for user in resolution.failingOpen.sorted() where failOpenReported.withLock({ $0.insert(user).inserted }) {
            events.append(
                AgentEvent(
                    time: now, user: user, kind: .failOpen,
                    message: "no valid policy for \(user); not enforcing anything (the agent fails open)"))
        }
        // Root is never managed: a record for an account of uid 0 under another name (toor) is ignored.
        for user in policies.keys.sorted() where Accounts.isSuperuser(user) {
            policies[user] = nil
            versions[user] = nil
            if superuserReported.withLock({ $0.insert(user).inserted }) {
                logger.error("ignoring a policy for an account of uid 0", metadata: ["user": "\(user)"])
                events.append(
                    AgentEvent(
                        time: now, user: user, kind: .policyIgnored,
                        message: "\(user) is an account of uid 0, which is never managed; its policy is ignored"))
            }
        }
        // A concurrent edit merged into the version in force changes the policy, not the version.
        for (user, version) in versions.sorted(by: { $0.key < $1.key })
        where version > 0 && (state.version(of: user) != version || previous[user] != policies[user]) {
            let merged = result.merges[user].map { $0.mergedRecords.count > 1 } ?? false
            logger.info("policy in force", metadata: ["user": "\(user)", "version": "\(version)"])
            events.append(
                AgentEvent(
                    time: now, user: user, kind: .policyLoaded,
                    message: merged ? "policy version \(version) (merged from concurrent edits) is in force" : "policy version \(version) is in force",
                    details: EventDetails.PolicyVersion(version: version)))
        }
        for user in previous.keys where policies[user] == nil {
            events.append(AgentEvent(time: now, user: user, kind: .userUnmanaged, message: "\(user) is no longer managed"))
        }
        // Each ignored file is logged when first seen or when its verdict changes, not on every scan (a
        // folder of junk must not fill the journal); files gone from the folder are forgotten.
        let recordsPath = loader.shared.recordsPath
        let ignoredNow = Dictionary(
            result.ignored.map { ignored in
                // The verdict and the file's identity (inode, size, times): a rewritten file is news.
                let identity = (try? Files.identity("\(recordsPath)/\(ignored.name)")).map { "\($0.0)" } ?? "gone"
                return (ignored.name, "\(ignored.reason)\n\(identity)")
            }, uniquingKeysWith: { first, _ in first })
        let newlyIgnored = ignoredLogged.withLock { logged in
            defer { logged = ignoredNow }
            return result.ignored.filter { logged[$0.name] != ignoredNow[$0.name] }
        }
        for ignored in newlyIgnored {
            logger.warning("ignored record", metadata: ["record.id": "\(ignored.name)", "reason": "\(ignored.reason)"])
        }
        for grant in result.unannouncedGrants where policies[grant.user] != nil {
            events.append(Agent.grantEvent(grant, now: now))
        }
        // The record in force gone from the shared directory (deleted, or damaged): the version stays,
        // and the parent is told once, here and by `curfew sync status` and `policy show`.
        let missing = resolution.missing.filter { policies[$0.key] != nil }
        let newestOnDisk = Dictionary(valid.map { ($0.user, $0.version) }, uniquingKeysWith: max)
        for (user, version) in missing.sorted(by: { $0.key < $1.key }) where missingStored[user] != version {
            logger.error("the record in force is missing from the shared directory", metadata: ["user": "\(user)", "version": "\(version)"])
            let onDisk = newestOnDisk[user].map { "the newest there is version \($0)" } ?? "there is none of \(user) there"
            events.append(
                AgentEvent(
                    time: now, user: user, kind: .recordMissing,
                    message: "the record of version \(version) of \(user) is missing from the shared directory (\(onDisk)); version \(versions[user] ?? version) stays in force",
                    details: EventDetails.PolicyVersion(version: version)))
        }
        let newestNow = resolution.newestSeen
        state.setPolicies(policies, versions: versions)
        state.setAdjustments(result.adjustments.filter { policies[$0.key] != nil })
        // What children took under their allowance this week counts as extra time too.
        loadSelfService(now: clock.wallSecond)
        try store.write { db in
            for (user, version) in newestNow where version != newestStored[user] {
                try AgentStateTable.set(AgentStateKeys.newestVersion(user), version, db)
            }
            for (user, version) in missing where missingStored[user] != version {
                try AgentStateTable.set(AgentStateKeys.recordMissing(user), version, db)
            }
            for user in missingStored.keys where missing[user] == nil {
                try AgentStateTable.remove(AgentStateKeys.recordMissing(user), db)
            }
            for (user, policy) in result.policies {
                let kept = lastGood[user]
                guard let version = result.versions[user], version > (kept?.version ?? 0) || (version == kept?.version && policy != kept?.policy)
                else { continue }
                try AgentStateTable.set(AgentStateKeys.lastGoodPolicy(user), LastGoodPolicy(version: version, policy: policy), db)
            }
            for user in resolution.removed where lastGood[user] != nil {
                try AgentStateTable.remove(AgentStateKeys.lastGoodPolicy(user), db)
            }
            for event in events { try EventLog.append(event, db) }
        }
        // Each new grant, once it is recorded as in force: a break it ends ends now, and the child is
        // told what they got and until when.
        for grant in result.unannouncedGrants where policies[grant.user] != nil {
            guard let schedule = state.schedule(of: grant.user, systemZone: ZoneRules.system) else { continue }
            let today = schedule.zone.localTime(at: clock.wallSeconds).date
            if grant.lift.endsBreak, grant.date == today { state.endBreak(of: grant.user) }
            if let words = ExtraTime.childMessage(grant, schedule: schedule, now: clock.wallSecond) {
                state.post(AgentState.ChildMessage(user: grant.user, summary: "Curfew", body: words, urgency: 1, kind: .answer))
            }
        }
        let enforced = Set(policies.keys).union(configuration.failOpen ? managed.subtracting(resolution.removed) : [])
        if enforced != managed {
            do { try ManagedUsers.write(enforced, stateDirectory: configuration.stateDirectory) } catch {
                logger.error("cannot write the list of managed users", metadata: ["error": "\(error)"])
            }
        }
        // After enforcement: confirmations never hold it up, and their failures never stop it.
        confirm(result, policies: policies, versions: versions)
    }
}
