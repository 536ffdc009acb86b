import CurfewCore
import CurfewSync
import Foundation
import Logging
import Testing

@testable import CurfewAgent

/// The agent's loader folds concurrent edits with `PolicyMerge` and skips what a revoked key signs.
@Suite struct PolicyMergeLoadTests {
    @Test func concurrentEditsAreMergedAndARevokedKeysNewRecordsIgnored() throws {
        let other = SigningKey()
        var later: String?
        let (agent, root) = try makeTestAgent(user: "kid", prefix: "curfew-merge", more: { shared, key in
            let ring = KeyRing(stateDirectory: Files.parentDirectory(of: shared.path))
            try ring.trust(other.publicKey)
            var mine = Policy.defaults(for: "kid")
            mine.bedtime = nil
            mine.dailyLimit = .minutes(60)
            var theirs = Policy.defaults(for: "kid")
            theirs.bedtime = nil
            theirs.dailyLimit = .minutes(90)
            theirs.lockout = .lock
            _ = try shared.publish(
                PolicyRecord(user: "kid", version: 2, baseVersion: 1, author: key.id, time: 1_790_000_100, policy: mine),
                signedBy: key)
            let theirsID = try shared.publish(
                PolicyRecord(user: "kid", version: 2, baseVersion: 1, author: other.id, time: 1_790_000_200, policy: theirs),
                signedBy: other)
            try ring.revoke(KeyRevocation(key: other.id, time: 1_790_000_300, versions: ["kid": 2], records: [theirsID]))
            var blocked = theirs
            blocked.dailyLimit = .minutes(0)
            later = try shared.publish(
                PolicyRecord(user: "kid", version: 3, baseVersion: 2, author: other.id, time: 1_790_000_400, policy: blocked),
                signedBy: other)
        })
        defer { try? FileManager.default.removeItem(atPath: root) }
        let result = try agent.loader.load(previous: [:], logger: Logger(label: "test"))
        var expected = Policy.defaults(for: "kid")
        expected.bedtime = nil
        expected.dailyLimit = .minutes(90)
        expected.lockout = .lock
        #expect(result.policies["kid"] == expected)
        #expect(result.versions["kid"] == 2)
        #expect(result.merges["kid"]?.mergedRecords.count == 2)
        #expect(result.merges["kid"]?.conflicts == ["dailyLimitMinutes"])
        #expect(result.ignored.map(\.name) == [later!])
        #expect(result.ignored.map(\.reason) == ["signed by revoked key \(other.id)"])
        try agent.reloadPolicies()
        #expect(agent.state.policies["kid"] == expected)
    }
}
