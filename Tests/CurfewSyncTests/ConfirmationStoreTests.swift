import CurfewCore
import Foundation
import Testing

@testable import CurfewSync

@Suite struct ConfirmationStoreTests {
    static let record = String(repeating: "cd", count: 32) + ".json"

    func confirmation(_ machine: MachineIdentity, outcome: CurfewCore.Confirmation.Outcome = .applied) -> CurfewCore.Confirmation {
        CurfewCore.Confirmation(
            machine: machine.id, host: machine.host, key: machine.key.id, record: Self.record, user: "kid", outcome: outcome,
            reason: outcome == .applied ? nil : "because", enforcedVersion: 2, time: 1_790_000_000)
    }

    func setUp() throws -> (root: String, shared: SharedDirectory, state: String) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-confirm-\(UUID().uuidString)").path
        let reader = KeyRing(stateDirectory: "\(root)/reader")
        try reader.trust(try reader.createSigningKeyIfMissing().key.publicKey)
        let shared = SharedDirectory(path: "\(root)/shared", trust: reader)
        try shared.create()
        return (root, shared, "\(root)/state")
    }

    /// Announces `machine` and enrols it with the reader's parent key.
    func enrol(_ machine: MachineIdentity, in shared: SharedDirectory) throws {
        try shared.publish(machine.announcement)
        let parent = try #require(shared.trust).loadSigningKey()
        try shared.publish(MachineEnrolment(machine.announcement, author: parent.id, time: 1_790_000_000), signedBy: parent)
    }

    @Test func writtenConfirmationsVerifyWithThePublishedMachineKey() throws {
        let (root, shared, state) = try setUp()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let machine = try MachineIdentity.load(stateDirectory: state, override: "pc-one")
        #expect(try MachineIdentity.load(stateDirectory: state, override: "pc-one").key.id == machine.key.id)
        var info = stat()
        #expect(stat("\(state)/keys/machine.key", &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(try shared.publish(machine.announcement))
        #expect(try !shared.publish(machine.announcement), "unchanged: not rewritten")
        try enrol(machine, in: shared)
        let store = ConfirmationStore(shared: shared, machine: machine)
        let (written, failure) = store.write([confirmation(machine)])
        #expect(written == [Self.record] && failure == nil)
        let readings = shared.confirmations(for: Self.record)
        #expect(readings.map(\.machine) == ["pc-one"])
        #expect(readings.first?.confirmation == confirmation(machine))

        // Another machine's key under pc-one's name does not verify.
        let impostor = MachineIdentity(id: "pc-one", host: "x", key: SigningKey())
        try Data(try impostor.sign(confirmation(impostor))).write(
            to: URL(fileURLWithPath: "\(store.directory)/\(Self.record)"))
        #expect(shared.confirmations(for: Self.record).first?.problem == "signature does not verify with the key of machine pc-one")
    }

    @Test func signaturesOfRecordsAndConfirmationsNeverPassForEachOther() throws {
        let (root, shared, state) = try setUp()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let machine = try MachineIdentity.load(stateDirectory: state, override: "pc-two")
        try enrol(machine, in: shared)
        let store = ConfirmationStore(shared: shared, machine: machine)
        try Files.makeDirectories(store.directory, mode: 0o755)
        // The same payload signed under the record domain.
        let document = confirmation(machine)
        let recordStyle = try machine.key.sign(Array(RecordFormat.signingDomain.utf8) + document.signedPayload.canonicalBytes)
        try Data(document.fileBytes(signature: recordStyle)).write(to: URL(fileURLWithPath: "\(store.directory)/\(Self.record)"))
        #expect(shared.confirmations(for: Self.record).first?.confirmation == nil)
        // A record signed under the confirmation domain, by a trusted key.
        let record = PolicyRecord(
            user: "kid", version: 1, baseVersion: 0, author: machine.key.id, time: 1_790_000_000,
            policy: Policy.defaults(for: "kid"))
        let confirmationStyle = try machine.key.sign(
            Array(ConfirmationFormat.signingDomain.utf8) + record.signedPayload.canonicalBytes)
        let bytes = record.fileBytes(signature: confirmationStyle)
        let name = "\(sha256Hex(bytes)).json"
        try Data(bytes).write(to: URL(fileURLWithPath: "\(shared.recordsPath)/\(name)"))
        let outcome = RecordVerifier.check(
            path: "\(shared.recordsPath)/\(name)", name: name, trusted: [machine.key.id: machine.key.publicKey])
        #expect(outcome == .rejected(reason: "signature does not verify with key \(machine.key.id)", user: "kid"))
    }

    @Test func machineIdComesFromTheSystemElseIsMadeOnce() throws {
        let (root, _, state) = try setUp()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let system = "\(root)/machine-id"
        try "0123456789abcdef0123456789abcdef\n".write(toFile: system, atomically: true, encoding: .utf8)
        #expect(try MachineIdentity.machineID(stateDirectory: state, override: nil, systemPath: system) == "0123456789abcdef0123456789abcdef")
        try "not an id\n".write(toFile: system, atomically: true, encoding: .utf8)
        let made = try MachineIdentity.machineID(stateDirectory: state, override: nil, systemPath: system)
        #expect(made.count == 32 && made != "0123456789abcdef0123456789abcdef")
        #expect(try MachineIdentity.machineID(stateDirectory: state, override: nil, systemPath: "/nonexistent") == made)
        #expect(throws: MachineIdentity.SetupError.self) {
            try MachineIdentity.machineID(stateDirectory: state, override: "../etc", systemPath: system)
        }
    }

    @Test func aScanOfManyNewFilesChecksThemInParallelWithTheSameVerdicts() throws {
        let (root, shared, _) = try setUp()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let key = SigningKey()
        for version in 1...300 {
            _ = try shared.publish(
                PolicyRecord(
                    user: "kid", version: version, baseVersion: version - 1, author: key.id, time: 1_790_000_000,
                    policy: Policy.defaults(for: "kid")), signedBy: key)
        }
        try Data("{}".utf8).write(to: URL(fileURLWithPath: "\(shared.recordsPath)/\(String(repeating: "0", count: 64)).json"))
        let scan = try RecordScan.scan(shared, trusted: [key.id: key.publicKey], index: [:])
        #expect(scan.valid.count == 300)
        #expect(scan.ignored.map(\.reason) == ["content does not match its name (hash)"])
        #expect(scan.newIndexEntries.count == 301)
        #expect(scan.current(for: "kid")?.version == 300)
    }

    /// Whoever can write to the shared folder may plant a symlink where the machine's directory or
    /// `confirmations/` should be; the agent (root) then writes nothing through it, and writes
    /// again once the directory is a real one.
    @Test func aSymlinkedConfirmationsDirectoryIsNotWrittenThrough() throws {
        let (root, shared, state) = try setUp()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let machine = try MachineIdentity.load(stateDirectory: state, override: "pc-one")
        let store = ConfirmationStore(shared: shared, machine: machine)
        let elsewhere = "\(root)/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        for planted in [store.directory, shared.confirmationsPath] {
            try? FileManager.default.removeItem(atPath: store.directory)
            try? FileManager.default.removeItem(atPath: shared.confirmationsPath)
            if planted == store.directory {
                try FileManager.default.createDirectory(atPath: shared.confirmationsPath, withIntermediateDirectories: true)
            }
            #expect(symlink(elsewhere, planted) == 0)
            let (written, failure) = store.write([confirmation(machine)])
            #expect(written.isEmpty, "\(planted)")
            #expect(failure?.errno == .tooManySymbolicLinkLevels || failure?.errno == .notDirectory, "\(planted): \(String(describing: failure))")
            #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty, "\(planted)")
        }
        try FileManager.default.removeItem(atPath: shared.confirmationsPath)
        let (written, failure) = store.write([confirmation(machine)])
        #expect(written == [Self.record] && failure == nil)
        #expect(store.isOnDisk(Self.record))
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.directory) == [Self.record])
    }
}
