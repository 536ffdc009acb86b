import CurfewCore
import CurfewStore
import Foundation
import Testing

@testable import CurfewSync

@Suite struct GrantScanTests {
    typealias Fixture = RecordScanTests.Fixture

    static let day = LocalDate(year: 2026, month: 11, day: 22)!

    func grant(
        _ fixture: Fixture, extra: Int = 30, delay: Int = 0, user: String = "kid", author: String? = nil,
        nonce: String = "00112233445566778899aabbccddeeff", requestId: Int64? = nil
    ) -> GrantRecord {
        GrantRecord(
            user: user, date: GrantScanTests.day, extraMinutes: extra, bedtimeDelayMinutes: delay,
            author: author ?? fixture.key.id, time: 1_790_000_000, nonce: nonce, requestId: requestId)
    }

    @Test func grantsMixedWithPolicyRecordsScanIndexAndAddUp() throws {
        let fixture = try Fixture()
        defer { fixture.cleanUp() }
        let policy = try fixture.shared.publish(fixture.record(1), signedBy: fixture.key)
        let first = try fixture.shared.publish(grant(fixture, extra: 30, requestId: 7), signedBy: fixture.key)
        // The same grant with another nonce is another grant: both count.
        let second = try fixture.shared.publish(
            grant(fixture, extra: 30, delay: 15, nonce: "ffeeddccbbaa99887766554433221100"), signedBy: fixture.key)
        #expect(first != second)
        let scan = try RecordScan.scan(fixture.shared, trusted: fixture.trusted, index: [:])
        #expect(scan.ignored.isEmpty)
        // The policy fold sees only policy records.
        #expect(scan.valid.map(\.id) == [policy])
        #expect(scan.current(for: "kid")?.id == policy)
        #expect(Set(scan.grants.map(\.id)) == [first, second])
        #expect(scan.grants.first { $0.id == first }?.requestId == 7)
        #expect(scan.adjustments["kid"]?[GrantScanTests.day] == DayAdjustment(extraMinutes: 60, bedtimeDelayMinutes: 15))
        // The index keeps the grant's fields: a second scan reads nothing and finds the same.
        let store = try StateStore(path: "\(fixture.root)/index.db")
        try store.write { try RecordIndex.save(scan.newIndexEntries, $0) }
        let index = try store.read { try RecordIndex.all($0) }
        guard case .validGrant(let indexed)? = index[first]?.verdict else {
            Issue.record("grant not indexed as a grant: \(String(describing: index[first]))")
            return
        }
        #expect(indexed == scan.grants.first { $0.id == first })
        let again = try RecordScan.scan(fixture.shared, trusted: fixture.trusted, index: index)
        #expect(again.newIndexEntries.isEmpty)
        #expect(again.adjustments == scan.adjustments)
        #expect(again.valid == scan.valid)
        // Loading a grant as a policy record is refused, and the other way round.
        let path = "\(fixture.shared.recordsPath)/\(first)"
        #expect(try RecordVerifier.loadGrant(path: path, name: first, trusted: fixture.trusted).get().extraMinutes == 30)
        guard case .failure(let failure) = RecordVerifier.load(path: path, name: first, trusted: fixture.trusted) else {
            Issue.record("a grant loaded as a policy record")
            return
        }
        #expect(failure.outcome == .rejected(reason: "a grant, not a policy record", user: "kid"))
    }

    @Test func untrustedAndTamperedGrantsNeverCount() throws {
        let fixture = try Fixture()
        defer { fixture.cleanUp() }
        let good = try fixture.shared.publish(grant(fixture, extra: 15), signedBy: fixture.key)

        // Signed by a key this computer does not trust.
        let stranger = SigningKey()
        let foreign = grant(fixture, extra: 480, author: stranger.id)
        let foreignName = try fixture.shared.publish(foreign, signedBy: stranger)

        // A trusted grant whose minutes were changed after signing, renamed to match its new hash.
        let original = grant(fixture, extra: 20, nonce: "0000000000000000000000000000000a")
        let signature = try fixture.key.sign(original.signingBytes)
        var changed = original
        changed.extraMinutes = 400
        let tamperedBytes = changed.fileBytes(signature: signature)
        let tamperedName = "\(sha256Hex(tamperedBytes)).json"
        try fixture.write(tamperedName, tamperedBytes)

        // Changed in place: the content no longer matches the name.
        let edited = try fixture.shared.publish(
            grant(fixture, extra: 25, nonce: "0000000000000000000000000000000b"), signedBy: fixture.key)
        let editedPath = "\(fixture.shared.recordsPath)/\(edited)"
        let bytes = try Files.readRegularFile(editedPath, maxBytes: 1 << 20)
        let text = String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\"extraMinutes\":25", with: "\"extraMinutes\":45")
        try fixture.write(edited, Array(text.utf8))

        let scan = try RecordScan.scan(fixture.shared, trusted: fixture.trusted, index: [:])
        #expect(scan.grants.map(\.id) == [good])
        #expect(scan.adjustments["kid"]?[GrantScanTests.day] == DayAdjustment(extraMinutes: 15))
        let reasons = Dictionary(uniqueKeysWithValues: scan.ignored.map { ($0.name, $0.reason) })
        #expect(reasons[foreignName] == "signed by key \(stranger.id), which is not trusted here")
        #expect(reasons[tamperedName] == "signature does not verify with key \(fixture.key.id)")
        #expect(reasons[edited] == "content does not match its name (hash)")
        #expect(scan.ignored.first { $0.name == tamperedName }?.user == "kid")
        // Publishing refuses a grant that breaks the rules.
        #expect(throws: PolicyError("extra time must be between 1 and 480 minutes, got 500")) {
            try fixture.shared.publish(grant(fixture, extra: 500), signedBy: fixture.key)
        }
    }
}
