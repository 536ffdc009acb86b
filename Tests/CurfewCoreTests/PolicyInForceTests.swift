import Testing

@testable import CurfewCore

/// `PolicyInForce.resolve`: which policy is in force, from the records' fold, the last good policy,
/// the newest versions seen, the managed users and the fail mode. No I/O: tables of cases.
@Suite struct PolicyInForceTests {
    static func policy(_ user: String, limit: Int) -> Policy {
        var policy = Policy.defaults(for: user)
        policy.dailyLimit = .minutes(limit)
        return policy
    }

    static func record(_ user: String, _ version: Int, removes: Bool = false) -> RecordSummary {
        let record = PolicyRecord(
            user: user, version: version, baseVersion: version - 1, author: "0123456789abcdef", time: 1_790_000_000 + Int64(version),
            policy: removes ? nil : policy(user, limit: 60))
        return RecordSummary(id: String(repeating: "a", count: 64) + ".json", record: record)
    }

    @Test func theRecordsDecideUnlessTheLastGoodPolicyIsNewer() {
        let v3 = Self.policy("kid", limit: 30)
        let v7 = Self.policy("kid", limit: 45)
        // The records fold to v7: in force, nothing missing.
        var resolution = PolicyInForce.resolve(
            folded: ["kid": (v7, 7)], current: ["kid": Self.record("kid", 7)], newestOnDisk: ["kid": 7],
            lastGood: ["kid": LastGoodPolicy(version: 7, policy: v7)], newestSeen: [:], managed: ["kid"], failOpen: false)
        #expect(resolution.entries["kid"] == PolicyInForce.Entry(policy: v7, version: 7, source: .records))
        #expect(resolution.missing.isEmpty && resolution.removed.isEmpty)
        // v4..v7 deleted: the records fold to v3, the last good v7 stays, and its record is missing.
        resolution = PolicyInForce.resolve(
            folded: ["kid": (v3, 3)], current: ["kid": Self.record("kid", 3)], newestOnDisk: ["kid": 3],
            lastGood: ["kid": LastGoodPolicy(version: 7, policy: v7)], newestSeen: ["kid": 7], managed: ["kid"], failOpen: false)
        #expect(resolution.entries["kid"] == PolicyInForce.Entry(policy: v7, version: 7, source: .kept(recordsVersion: 3)))
        #expect(resolution.missing == ["kid": 7])
        // Every record gone: the last good policy stays.
        resolution = PolicyInForce.resolve(
            folded: [:], current: [:], newestOnDisk: [:], lastGood: ["kid": LastGoodPolicy(version: 7, policy: v7)],
            newestSeen: [:], managed: ["kid"], failOpen: false)
        #expect(resolution.entries["kid"]?.source == .kept(recordsVersion: nil))
        #expect(resolution.missing == ["kid": 7])
    }

    @Test func aRemovalCountsOnlyWhenItIsTheNewestVersionSeen() {
        let v7 = Self.policy("kid", limit: 45)
        // v2 removed kid, v3..v7 added kid back and were deleted: the old removal does not count.
        var resolution = PolicyInForce.resolve(
            folded: [:], current: ["kid": Self.record("kid", 2, removes: true)], newestOnDisk: ["kid": 2],
            lastGood: ["kid": LastGoodPolicy(version: 7, policy: v7)], newestSeen: ["kid": 7], managed: ["kid"], failOpen: false)
        #expect(resolution.removed.isEmpty)
        #expect(resolution.entries["kid"]?.version == 7)
        #expect(resolution.missing == ["kid": 7])
        // The newest record is a removal: it counts, kid is unmanaged, and it is remembered.
        resolution = PolicyInForce.resolve(
            folded: [:], current: ["kid": Self.record("kid", 8, removes: true)], newestOnDisk: ["kid": 8],
            lastGood: ["kid": LastGoodPolicy(version: 7, policy: v7)], newestSeen: ["kid": 7], managed: ["kid"], failOpen: false)
        #expect(resolution.removed == ["kid"])
        #expect(resolution.entries["kid"] == nil && resolution.failingOpen.isEmpty)
        #expect(resolution.newestSeen["kid"] == 8)
    }

    @Test func aManagedUserWithNoPolicyFailsClosedUnlessTheComputerFailsOpen() {
        let closed = PolicyInForce.resolve(
            folded: [:], current: [:], newestOnDisk: [:], lastGood: [:], newestSeen: [:], managed: ["kid"], failOpen: false)
        #expect(closed.entries["kid"] == PolicyInForce.Entry(policy: Policy.failClosed(for: "kid"), version: 0, source: .failClosed))
        #expect(closed.missing.isEmpty)
        let open = PolicyInForce.resolve(
            folded: [:], current: [:], newestOnDisk: [:], lastGood: [:], newestSeen: [:], managed: ["kid"], failOpen: true)
        #expect(open.entries.isEmpty && open.failingOpen == ["kid"])
        // A user nobody manages and no record names is nothing.
        let none = PolicyInForce.resolve(
            folded: [:], current: [:], newestOnDisk: [:], lastGood: [:], newestSeen: [:], managed: [], failOpen: false)
        #expect(none == PolicyInForce.Resolution())
    }
}
