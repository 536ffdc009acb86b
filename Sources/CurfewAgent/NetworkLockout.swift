import SystemPackage
import CurfewCore
import CurfewLinux
import Foundation
import Logging

/// The `network` lockout, for the enforcer: keeps nftables' `inet curfew` table (`NetworkFilter`)
/// holding exactly the users whose plan says `networkOff`, and tells them.
///
/// At the first pass it reads what the table holds (the agent may have been killed while a child was
/// locked out); every pass then compares what should be dropped with what was applied and replaces
/// the table whole when they differ: a rule left for a child who is allowed now goes, a child locked
/// out now gets one. The rules outlive the agent on purpose (a crash does not give the internet back);
/// the package's prerm removes the table when Curfew is removed.
final class NetworkLockout {
    let agent: Agent
    let logger: Logger
    let filter: NetworkFilter
    /// uid -> user whose traffic the table drops, as last applied; nil until read from the kernel.
    var applied: [UInt32: String]? = nil
    /// When (monotonic ms) a failed read or apply may be tried again.
    var retryAt: Int64 = 0
    /// The last failure recorded as an event, so a lasting one is recorded once.
    var lastFailure: String? = nil
    /// When (monotonic ms) the table was last read back while it held someone.
    var verifiedAt: Int64 = 0

    static let retryMilliseconds: Int64 = 5_000
    /// How often the table is read back while it drops someone's traffic: a firewall reload
    /// (Debian's nftables.service starts with `flush ruleset`) or an administrator may have removed it.
    static let verifyMilliseconds: Int64 = 10_000

    /// A user to cut off now, and what they are told.
    struct Cut {
        var user: String
        var message: String
    }

    init(agent: Agent, filter: NetworkFilter = NetworkFilter()) {
        self.agent = agent
        self.logger = agent.logger
        self.filter = filter
    }

    /// One pass. `cut`: uid -> user to cut off now; `undecided`: uids whose plan cannot be known yet
    /// (the tracker has not counted them since the start), kept as they are; `names`: every managed
    /// user's uid, for the events. Returns milliseconds until it must run again (a retry, or the next
    /// read-back of a table that drops someone's traffic), or nil.
    func reconcile(cut: [UInt32: Cut], undecided: Set<UInt32>, names: [UInt32: String], now: Instant, monotonic: Int64)
        -> Int64?
    {
        if let retry = pendingRetry(monotonic) { return retry }
        let current: [UInt32: String]
        if let applied, !applied.isEmpty, monotonic - verifiedAt >= Self.verifyMilliseconds {
            verifiedAt = monotonic
            if let retry = verify(applied, now: now, monotonic: monotonic) { return retry }
            current = self.applied ?? applied
        } else if let applied {
            current = applied
        } else {
            do {
                current = Dictionary(uniqueKeysWithValues: try filter.blockedUIDs().map { ($0, names[$0] ?? "uid \($0)") })
            } catch {
                // Nothing to cut and no nftables: the lockout is not used here; nothing to say.
                if cut.isEmpty && error.errno == .noSuchFileOrDirectory {
                    applied = [:]
                    return nil
                }
                return failed("cannot read the network lockout table", error, now: now, monotonic: monotonic)
            }
            applied = current
            verifiedAt = monotonic
        }
        var target = current.filter { undecided.contains($0.key) }
        for (uid, entry) in cut { target[uid] = entry.user }
        guard Set(target.keys) != Set(current.keys) else { return nextVerification(monotonic) }
        do {
            try filter.apply(target.map { NetworkFilter.Blocked(uid: $0.key, user: $0.value) })
        } catch {
            return failed("cannot update the network lockout table", error, now: now, monotonic: monotonic)
        }
        applied = target
        lastFailure = nil
        for (uid, user) in target.sorted(by: { $0.key < $1.key }) where current[uid] == nil {
            let message = cut[uid]?.message ?? "the internet is off"
            logger.notice("network off", metadata: ["user": "\(user)", "uid": "\(uid)"])
            agent.state.post(
                AgentState.ChildMessage(user: user, summary: "Curfew", body: ChildMessages.networkOff(message), urgency: 2, kind: .lockout))
            agent.recordEvent(
                AgentEvent(
                    time: now, user: user, kind: .networkOff, message: "\(user)'s network traffic is dropped: \(message)",
                    details: EventDetails.Network(uid: uid)))
        }
        defer { verifiedAt = monotonic }
        for (uid, user) in current.sorted(by: { $0.key < $1.key }) where target[uid] == nil {
            let name = names[uid] ?? user
            logger.notice("network on", metadata: ["user": "\(name)", "uid": "\(uid)"])
            if names[uid] != nil {
                agent.state.post(AgentState.ChildMessage(user: name, summary: "Curfew", body: ChildMessages.networkOn, urgency: 1))
            }
            agent.recordEvent(
                AgentEvent(
                    time: now, user: name, kind: .networkOn, message: "\(name)'s network traffic flows again",
                    details: EventDetails.Network(uid: uid)))
        }
        return nextVerification(monotonic)
    }

    /// Milliseconds until the table is next read back; nil while it drops nobody's traffic.
    func nextVerification(_ monotonic: Int64) -> Int64? {
        guard let applied, !applied.isEmpty else { return nil }
        return max(10, verifiedAt + Self.verifyMilliseconds - monotonic)
    }

    /// Reads the table back; where it no longer holds what was applied (someone else changed it), puts
    /// it back as it was (the children were told already) and says so. Returns a retry time on failure.
    func verify(_ applied: [UInt32: String], now: Instant, monotonic: Int64) -> Int64? {
        let found: Set<UInt32>
        do {
            found = try filter.blockedUIDs()
        } catch {
            return failed("cannot read the network lockout table", error, now: now, monotonic: monotonic)
        }
        guard found != Set(applied.keys) else { return nil }
        do {
            try filter.apply(applied.map { NetworkFilter.Blocked(uid: $0.key, user: $0.value) })
        } catch {
            return failed("cannot restore the network lockout table", error, now: now, monotonic: monotonic)
        }
        let users = applied.values.sorted().joined(separator: ", ")
        logger.warning("the network lockout table was changed by someone else; restored", metadata: ["users": "\(users)"])
        agent.recordEvent(
            AgentEvent(
                time: now, kind: .networkFilterFailed,
                message: "the network lockout table was changed outside Curfew (a firewall reload?); restored for \(users)"))
        return nil
    }

    func pendingRetry(_ monotonic: Int64) -> Int64? {
        guard lastFailure != nil, monotonic < retryAt else { return nil }
        return retryAt - monotonic
    }

    func failed(_ what: String, _ error: LinuxError, now: Instant, monotonic: Int64) -> Int64 {
        retryAt = monotonic + Self.retryMilliseconds
        let text = "\(error)"
        if lastFailure != text {
            logger.error("\(what)", metadata: ["error": "\(text)"])
            agent.recordEvent(
                AgentEvent(time: now, kind: .networkFilterFailed, message: "\(what): \(text)"))
        }
        lastFailure = text
        return Self.retryMilliseconds
    }
}
