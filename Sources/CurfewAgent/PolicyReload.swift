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
        let newestOnDisk = Dictionary(valid.map { ($0.user, $0.version) }, uniquingKeysWith: max)
        let resolution = PolicyInForce.resolve(
            folded: folded, current: PolicyFold.currentByUser(valid), newestOnDisk: newestOnDisk, lastGood: lastGood,
            newestSeen: newestStored, managed: managed, failOpen: configuration.failOpen)
        let now = clock.wallInstant
        let before = PolicyChange.InForce(
            policies: previous, versions: Dictionary(uniqueKeysWithValues: previous.keys.compactMap { user in state.version(of: user).map { (user, $0) } }))
        let announced = PolicyChange.Announced(failingOpen: failOpenReported.withLock { $0 }, superusers: superuserReported.withLock { $0 })
        let change = PolicyChange.record(
            before: before, resolution: resolution, superusers: Set(resolution.entries.keys.filter(Accounts.isSuperuser)),
            merged: Set(result.merges.filter { $0.value.mergedRecords.count > 1 }.keys), grants: result.unannouncedGrants,
            newestOnDisk: newestOnDisk, missingRecorded: missingStored, announced: announced)
        failOpenReported.withLock { $0.formUnion(change.announced.failingOpen) }
        superuserReported.withLock { $0.formUnion(change.announced.superusers) }
        let policies = change.inForce.policies
        let versions = change.inForce.versions
        let missing = change.missing
        for event in change.events { log(event) }
        let events = change.events.map { $0.auditEvent(at: now) }
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
        publishManagedUsers(enforced)
        // After enforcement: confirmations never hold it up, and their failures never stop it.
        confirm(result, policies: policies, versions: versions)
    }

    /// Keeps the list of managed users beside the socket (`ManagedUsers.published`) what `enforced` is:
    /// a child's own `check-login`, which cannot read the state directory, then knows they are managed
    /// when the agent does not answer, and refuses them. Left in place when the agent stops, so a
    /// stopped agent keeps its children's own checks closed.
    func publishManagedUsers(_ enforced: Set<String>) {
        guard ManagedUsers.readPublished(socketPath: configuration.socketPath) != enforced else { return }
        do {
            try ManagedUsers.publish(enforced, socketPath: configuration.socketPath)
            publishFailed.withLock { $0 = false }
        } catch {
            let failedBefore = publishFailed.withLock { failed in
                defer { failed = true }
                return failed
            }
            guard !failedBefore else { return }
            logger.error(
                "cannot publish the list of managed users beside the socket; a child's own login check cannot tell they are managed while the agent does not answer",
                metadata: ["error": "\(error)"])
        }
    }

    /// The journal's line for what a policy change records (the audit log has the event).
    private func log(_ event: PolicyChange.Event) {
        switch event {
        case .kept(let user, let version, _):
            logger.warning("keeping the last good policy", metadata: ["user": "\(user)", "version": "\(version)"])
        case .failedClosed(let user):
            logger.critical("no valid policy for a managed user; failing closed", metadata: ["user": "\(user)"])
        case .superuserIgnored(let user):
            logger.error("ignoring a policy for an account of uid 0", metadata: ["user": "\(user)"])
        case .loaded(let user, let version, _):
            logger.info("policy in force", metadata: ["user": "\(user)", "version": "\(version)"])
        case .recordMissing(let user, let version, _, _):
            logger.error("the record in force is missing from the shared directory", metadata: ["user": "\(user)", "version": "\(version)"])
        case .failingOpen, .unmanaged, .granted:
            break
        }
    }
}
