import CurfewCore
import CurfewStore
import Foundation
import Testing

@testable import CurfewSync

@Suite struct RecordScanTests {
    struct Fixture {
        let root: String
        let shared: SharedDirectory
        let key = SigningKey()

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-sync-\(UUID().uuidString)").path
            shared = SharedDirectory(path: "\(root)/shared")
            try shared.create()
        }

        var trusted: [String: PublicKey] { [key.id: key.publicKey] }

        func record(_ version: Int, limit: Int = 120, user: String = "kid", time: Int64 = 1_790_000_000) -> PolicyRecord {
            var policy = Policy.defaults(for: user)
            policy.dailyLimit = .minutes(limit)
            return PolicyRecord(user: user, version: version, baseVersion: version - 1, author: key.id, time: time, policy: policy)
        }

        func write(_ name: String, _ bytes: [UInt8]) throws {
            try Data(bytes).write(to: URL(fileURLWithPath: "\(shared.recordsPath)/\(name)"))
        }

        func cleanUp() { try? FileManager.default.removeItem(atPath: root) }
    }

    @Test func publishedRecordsScanAndFoldToTheNewest() throws {
        let fixture = try Fixture()
        defer { fixture.cleanUp() }
        let first = try fixture.shared.publish(fixture.record(1), signedBy: fixture.key)
        let second = try fixture.shared.publish(fixture.record(2, limit: 60), signedBy: fixture.key)
        #expect(first != second)
        let bytes = try Files.readRegularFile("\(fixture.shared.recordsPath)/\(second)", maxBytes: 1 << 20)
        #expect("\(sha256Hex(bytes)).json" == second)
        let scan = try RecordScan.scan(fixture.shared, trusted: fixture.trusted, index: [:])
        #expect(scan.valid.count == 2)
        #expect(scan.ignored.isEmpty)
        #expect(scan.current(for: "kid")?.id == second)
        #expect(scan.newIndexEntries.count == 2)
        let record = try RecordVerifier.load(
            path: "\(fixture.shared.recordsPath)/\(second)", name: second, trusted: fixture.trusted
        ).get()
        #expect(record.policy?.dailyLimit == .minutes(60))
        // Publishing the identical record again is a no-op: same content, same name.
        #expect(try fixture.shared.publish(fixture.record(2, limit: 60), signedBy: fixture.key) == second)
    }

    @Test func theIndexSkipsUnchangedFilesAndNoticesChangedOnes() throws {
        let fixture = try Fixture()
        defer { fixture.cleanUp() }
        let name = try fixture.shared.publish(fixture.record(1), signedBy: fixture.key)
        let first = try RecordScan.scan(fixture.shared, trusted: fixture.trusted, index: [:])
        let index = Dictionary(uniqueKeysWithValues: first.newIndexEntries.map { ($0.name, $0) })
        let second = try RecordScan.scan(fixture.shared, trusted: fixture.trusted, index: index)
        #expect(second.newIndexEntries.isEmpty)
        #expect(second.valid == first.valid)
        // Overwrite in place with other content: the identity changes, so the file is checked again.
        let path = "\(fixture.shared.recordsPath)/\(name)"
        var bytes = try Files.readRegularFile(path, maxBytes: 1 << 20)
        bytes[bytes.count - 5] ^= 0x01
        try fixture.write(name, bytes)
        let third = try RecordScan.scan(fixture.shared, trusted: fixture.trusted, index: index)
        #expect(third.valid.isEmpty)
        #expect(third.ignored.map(\.reason) == ["content does not match its name (hash)"])
        // A removed file is reported as vanished.
        try FileManager.default.removeItem(atPath: path)
        #expect(try RecordScan.scan(fixture.shared, trusted: fixture.trusted, index: index).vanished == [name])
    }

    @Test func untrustedForgedAndBrokenFilesNeverCount() throws {
        let fixture = try Fixture()
        defer { fixture.cleanUp() }
        let good = try fixture.shared.publish(fixture.record(1), signedBy: fixture.key)

        // Signed by a stranger.
        let stranger = SigningKey()
        var foreign = fixture.record(2, limit: 480)
        foreign.author = stranger.id
        let foreignBytes = foreign.fileBytes(signature: try stranger.sign(foreign.signingBytes))
        try fixture.write("\(sha256Hex(foreignBytes)).json", foreignBytes)

        // Claims our key but signed by the stranger (forged).
        let forged = fixture.record(3, limit: 480)
        let forgedBytes = forged.fileBytes(signature: try stranger.sign(forged.signingBytes))
        try fixture.write("\(sha256Hex(forgedBytes)).json", forgedBytes)

        // A valid signature over a record of another domain is refused: sign the payload without
        // the domain prefix.
        let undomained = fixture.record(4, limit: 480)
        let undomainedBytes = undomained.fileBytes(signature: try fixture.key.sign(undomained.signedPayload.canonicalBytes))
        try fixture.write("\(sha256Hex(undomainedBytes)).json", undomainedBytes)

        // Not canonical (pretty-printed), but otherwise correctly signed.
        let pretty = fixture.record(5, limit: 480)
        let prettyBytes = Array(
            try JSONValue.parse(pretty.fileBytes(signature: try fixture.key.sign(pretty.signingBytes))).prettyString.utf8)
        try fixture.write("\(sha256Hex(prettyBytes)).json", prettyBytes)

        // Names that are not records are skipped without a word.
        try fixture.write(".tmp-\(good)-1-2", [1, 2, 3])
        try fixture.write("\(good.dropLast(5)).sync-conflict-20261121-120000-ABCDEFG.json", [1])
        try fixture.write(".syncthing.\(good).tmp", [1])

        // A symlink and a FIFO with record names.
        let linkName = String(repeating: "b", count: 64) + ".json"
        try FileManager.default.createSymbolicLink(
            atPath: "\(fixture.shared.recordsPath)/\(linkName)", withDestinationPath: "\(fixture.shared.recordsPath)/\(good)")
        let fifoName = String(repeating: "c", count: 64) + ".json"
        #expect(mkfifo("\(fixture.shared.recordsPath)/\(fifoName)", 0o644) == 0)

        // Oversized.
        let bigName = String(repeating: "d", count: 64) + ".json"
        try fixture.write(bigName, [UInt8](repeating: 0x20, count: RecordFormat.maxBytes + 1))

        let scan = try RecordScan.scan(fixture.shared, trusted: fixture.trusted, index: [:])
        #expect(scan.valid.map(\.id) == [good])
        let reasons = Dictionary(uniqueKeysWithValues: scan.ignored.map { ($0.name, $0.reason) })
        #expect(reasons.count == 7)
        #expect(reasons["\(sha256Hex(foreignBytes)).json"] == "signed by key \(stranger.id), which is not trusted here")
        #expect(reasons["\(sha256Hex(forgedBytes)).json"] == "signature does not verify with key \(fixture.key.id)")
        #expect(reasons["\(sha256Hex(undomainedBytes)).json"] == "signature does not verify with key \(fixture.key.id)")
        #expect(reasons["\(sha256Hex(prettyBytes)).json"] == "record is not in canonical form")
        #expect(reasons[linkName] == "not a regular file")
        #expect(reasons[fifoName] == "not a regular file")
        #expect(reasons[bigName] == "record is larger than \(RecordFormat.maxBytes) bytes")
        // The untrusted verdict depends on the keys, so it is not indexed; the others are.
        #expect(!scan.newIndexEntries.contains { $0.name == "\(sha256Hex(foreignBytes)).json" })
        #expect(scan.newIndexEntries.contains { $0.name == "\(sha256Hex(forgedBytes)).json" })
        // Once the stranger is trusted, their record counts.
        var trusted = fixture.trusted
        trusted[stranger.id] = stranger.publicKey
        let index = Dictionary(uniqueKeysWithValues: scan.newIndexEntries.map { ($0.name, $0) })
        let later = try RecordScan.scan(fixture.shared, trusted: trusted, index: index)
        #expect(later.current(for: "kid")?.id == "\(sha256Hex(foreignBytes)).json")
    }

    @Test func keysAreStoredPrivatelyAndTrustIsByKeyID() throws {
        let fixture = try Fixture()
        defer { fixture.cleanUp() }
        let ring = KeyRing(stateDirectory: "\(fixture.root)/state")
        #expect(throws: KeyError.noSigningKey(path: ring.signingKeyPath)) { try ring.loadSigningKey() }
        let (key, created) = try ring.createSigningKeyIfMissing()
        #expect(created)
        let mode = try FileManager.default.attributesOfItem(atPath: ring.signingKeyPath)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let (again, createdAgain) = try ring.createSigningKeyIfMissing()
        #expect(!createdAgain)
        #expect(again.id == key.id)
        try ring.trust(key.publicKey)
        #expect(try ring.trustedKeys().keys.sorted() == [key.id])
        // A trusted-key file renamed to another id is not believed.
        try FileManager.default.moveItem(
            atPath: "\(ring.trustedDirectory)/\(key.id).pub", toPath: "\(ring.trustedDirectory)/0000000000000000.pub")
        #expect(try ring.trustedKeys().isEmpty)
        #expect(KeyID.isValid(key.id))
    }

    @Test func fileErrorsCarryAnOperationCodeAndReadAsBefore() throws {
        let directory = "/tmp/curfew-file-error-\(getpid())"
        try Files.makeDirectories(directory, mode: 0o700)
        defer { _ = try? FileManager.default.removeItem(atPath: directory) }
        try Files.writeAtomically(Array(repeating: 0x41, count: 100), directory: directory, name: "big", mode: 0o600)
        let oversized = #expect(throws: FileError.self) { try Files.readRegularFile("\(directory)/big", maxBytes: 10) }
        #expect(oversized?.operation == .readOversizedFile && oversized?.isOversized == true)
        #expect(oversized?.description == "cannot read oversized file \(directory)/big: File too large")
        let missing = #expect(throws: FileError.self) { try Files.readRegularFile("\(directory)/none", maxBytes: 10) }
        #expect(missing?.operation == .open && missing?.isMissing == true && missing?.isOversized == false)
        #expect(missing?.description == "cannot open \(directory)/none: No such file or directory")
    }
}
