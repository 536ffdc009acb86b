import CurfewCore
import CurfewStore
import Foundation
import Testing

@testable import CurfewSync

@Suite struct RevocationTests {
    @Test func aRevokedKeyKeepsOnlyTheRecordsListedAtRevocation() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-revoke-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let shared = SharedDirectory(path: "\(root)/shared")
        try shared.create()
        let ring = KeyRing(stateDirectory: "\(root)/state")
        let parent = SigningKey()
        let other = SigningKey()
        try ring.trust(parent.publicKey)
        try ring.trust(other.publicKey)
        func record(_ version: Int, _ key: SigningKey, limit: Int, time: Int64) -> PolicyRecord {
            var policy = Policy.defaults(for: "kid")
            policy.dailyLimit = .minutes(limit)
            return PolicyRecord(user: "kid", version: version, baseVersion: version - 1, author: key.id, time: time, policy: policy)
        }
        let first = try shared.publish(record(1, parent, limit: 120, time: 1000), signedBy: parent)
        let before = try shared.publish(record(2, other, limit: 60, time: 2000), signedBy: other)
        let revocation = KeyRevocation(key: other.id, time: 3000, versions: ["kid": 2], records: [before])
        #expect(try ring.revoke(revocation))
        #expect(try ring.revoke(revocation) == false)
        #expect(try ring.revocations() == [other.id: revocation])
        // After the revocation: a newer record, and one that claims an old time and version.
        let after = try shared.publish(record(3, other, limit: 30, time: 4000), signedBy: other)
        let backdated = try shared.publish(record(2, other, limit: 15, time: 1500), signedBy: other)
        let scan = try RecordScan.scan(
            shared, trusted: try ring.trustedKeys(), index: [:], revoked: try ring.revocations())
        #expect(Set(scan.valid.map(\.id)) == [first, before])
        #expect(
            scan.ignored.map(\.reason) == Array(repeating: "signed by revoked key \(other.id)", count: 2))
        #expect(Set(scan.ignored.map(\.name)) == [after, backdated])
        #expect(scan.current(for: "kid")?.id == before)
        // The verdicts indexed are about the files only: without the revocation they count again.
        let unrevoked = try RecordScan.scan(
            shared, trusted: try ring.trustedKeys(), index: Dictionary(uniqueKeysWithValues: scan.newIndexEntries.map { ($0.name, $0) }))
        #expect(unrevoked.valid.count == 4)
    }

    @Test func aDamagedRevocationFileRevokesEveryRecordOfItsKey() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-revoke-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let ring = KeyRing(stateDirectory: root)
        try Files.makeDirectories(ring.revokedDirectory, mode: 0o700)
        try Data("not json".utf8).write(to: URL(fileURLWithPath: "\(ring.revokedDirectory)/0123456789abcdef.json"))
        try Data("{}".utf8).write(to: URL(fileURLWithPath: "\(ring.revokedDirectory)/not-a-key.json"))
        let revocations = try ring.revocations()
        #expect(revocations.keys.sorted() == ["0123456789abcdef"])
        #expect(revocations["0123456789abcdef"]?.records == [])
    }

    @Test func revocationFilesRoundTrip() {
        let revocation = KeyRevocation(key: "0123456789abcdef", time: 1_790_000_000, versions: ["kid": 3, "anna": 1], records: ["b.json", "a.json"])
        #expect(
            revocation.json.canonicalString
                == #"{"key":"0123456789abcdef","records":["a.json","b.json"],"revokedAt":"2026-09-21T14:13:20Z","versions":{"anna":1,"kid":3}}"#)
        #expect(KeyRevocation.parse(revocation.json.canonicalBytes) == revocation)
        #expect(KeyRevocation.parse(Array(#"{"key":"x"}"#.utf8)) == nil)
    }
}
