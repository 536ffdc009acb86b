import CurfewCore
import CurfewLinux
import Foundation
import Logging

/// The processes the tracker sees: the sampler's table of /proc, the process connector's events
/// that keep it up to date (or polling without it), and the managed users' subordinate uids, whose
/// processes are theirs.
///
/// Owned by the tracker's thread: the sampler and the connector are not shared.
public final class ProcessWatch {
    public let sampler: ProcessSampler
    let connector: ProcessConnector?
    let logger: Logger
    let clock: () -> ClockReading

    /// Managed users' subordinate uid ranges (`/etc/subuid`) and the uid each belongs to: processes in
    /// a child's user namespaces run under them and are the child's. Read again every 30 s.
    var subordinateUIDs: [OwnedSubordinateRange] = []
    var subordinatesReadAt: Int64? = nil
    var subordinateFile = "/etc/subuid"
    /// What `follow` last gave the sampler: the managed uids and the subordinate ranges.
    var followedKey: [UInt32] = []
    /// At most this many subordinate uids are followed in all (four children's usual 65,536 each).
    static let maxSubordinateUIDs: UInt32 = 1 << 18
    /// When /proc was last listed in full (monotonic ms).
    var lastFullScan: Int64 = 0
    /// Whether the connector passes only uid changes (nobody managed is active).
    var uidFilterOn = false
    /// Without the process connector, how many managed processes have their executable checked each
    /// tick (one readlink each): all of them up to this many, else in turn, so a launcher's exec among
    /// thousands of processes is seen within a few ticks and a tick stays well under a millisecond.
    public var execChecksPerTick = 128
    var execCheckCursor = 0

    init(identities: FileIdentityCache, useProcessConnector: Bool, logger: Logger, clock: @escaping () -> ClockReading) {
        self.sampler = ProcessSampler(identities: identities)
        self.logger = logger
        self.clock = clock
        var connector: ProcessConnector? = nil
        if useProcessConnector {
            do {
                connector = try ProcessConnector.open()
            } catch {
                logger.notice("process connector unavailable, polling /proc every tick", metadata: ["error": "\(error)"])
            }
        }
        self.connector = connector
    }

    public var usesProcessConnector: Bool { connector != nil }

    /// Lists /proc in full.
    func fullScan() {
        _ = sampler.sample()
        lastFullScan = clock().monotonic
    }

    /// At a tick: lists /proc when polling, while the uid filter drops events, or when the last full
    /// listing is 30 s old.
    func scanIfDue(now monotonic: Int64) {
        if connector == nil || uidFilterOn || monotonic - lastFullScan > 30_000 {
            _ = sampler.sample()
            lastFullScan = monotonic
        }
    }

    /// With the process connector, only managed users' processes are read fully (the sampler's
    /// `interestingUIDs`): the forks and execs of everyone else cost no reading at all. `users`: the
    /// managed users' uids, by name.
    func follow(_ users: [String: UInt32]) {
        guard connector != nil else { return }
        refreshSubordinateUIDs(of: users)
        let managed = Set(users.values)
        // Subordinate ranges make the set large (65,536 uids a child): it is rebuilt only when the
        // managed uids or the ranges change, not at every tick.
        let key = managed.sorted() + [UInt32.max] + subordinateUIDs.flatMap { [$0.range.start, $0.range.count] }
        guard key != followedKey else { return }
        followedKey = key
        var uids = managed
        for owned in subordinateUIDs { uids.formUnion(owned.range.start..<(owned.range.start + owned.range.count)) }
        if sampler.interestingUIDs != uids {
            sampler.interestingUIDs = uids
            fullScan()
        }
    }

    /// Reads `/etc/subuid` (at most every 30 s) for the ranges of managed users (`users`: their uids,
    /// by name).
    func refreshSubordinateUIDs(of users: [String: UInt32]) {
        let now = clock().monotonic
        guard subordinatesReadAt.map({ now - $0 > 30_000 }) ?? true else { return }
        subordinatesReadAt = now
        var owners: [String: UInt32] = [:]
        for (user, uid) in users {
            owners[user] = uid
            owners[String(uid)] = uid
        }
        let text = (try? String(contentsOfFile: subordinateFile, encoding: .utf8)) ?? ""
        var total: UInt32 = 0
        subordinateUIDs = SubordinateRange.parse(text).compactMap { range in
            // `maxSubordinateUIDs` in all: the set the sampler follows stays small.
            guard let owner = owners[range.owner], range.count <= Self.maxSubordinateUIDs - total else { return nil }
            total += range.count
            return OwnedSubordinateRange(range: range, ownerUID: owner)
        }
    }

    /// The managed user a uid belongs to: itself, or the owner of the subordinate range holding it.
    func ownerUID(_ uid: UInt32) -> UInt32 {
        guard !subordinateUIDs.isEmpty else { return uid }
        for owned in subordinateUIDs where owned.range.contains(uid) { return owned.ownerUID }
        return uid
    }

    /// Whether a batch of connector events started or changed a process of one of `uids` (by its uid
    /// now, a subordinate uid counting as its owner's), or overran so that nobody can tell.
    func concerns(_ events: [ProcessEvent], uids: Set<UInt32>) -> Bool {
        let cached = sampler.cached
        for event in events {
            switch event {
            case .fork(_, let pid), .exec(let pid), .uidChange(let pid):
                if let uid = cached[pid]?.uid, uids.contains(ownerUID(uid)) { return true }
            case .overrun:
                return true
            case .exit:
                continue
            }
        }
        return false
    }

    /// Turns the connector's uid-change filter on (`passOnly`) or off, listing /proc for what it
    /// dropped when it goes off. Whether the filter changed.
    func passOnlyUIDChanges(_ passOnly: Bool) -> Bool {
        guard let connector, passOnly != uidFilterOn else { return false }
        do {
            try connector.passOnlyUIDChanges(passOnly)
            uidFilterOn = passOnly
        } catch {
            logger.warning("cannot filter the process connector's events", metadata: ["error": "\(error)"])
            return false
        }
        if !passOnly {
            // Forks, execs and exits were dropped while the filter was on.
            sampler.requireListing()
            fullScan()
        }
        return true
    }

    /// Polling: re-reads the processes of `uids` whose executable changed, `execChecksPerTick` of
    /// them, continuing where the last call stopped.
    func checkForExecs(uids: Set<UInt32>) {
        guard !uids.isEmpty else { return }
        let mine = sampler.cached.values.lazy.filter { uids.contains(self.ownerUID($0.uid)) }.map(\.pid).sorted()
        guard !mine.isEmpty else { return }
        let count = min(mine.count, execChecksPerTick)
        if execCheckCursor >= mine.count { execCheckCursor = 0 }
        for step in 0..<count { _ = sampler.refreshIfExecutableChanged(pid: mine[(execCheckCursor + step) % mine.count]) }
        execCheckCursor = (execCheckCursor + count) % mine.count
    }
}
