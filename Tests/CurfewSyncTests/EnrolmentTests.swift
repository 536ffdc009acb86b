import CurfewCore
import Foundation
import Testing

@testable import CurfewSync

/// A computer counts only once a parent key trusted here signed its enrolment.
@Suite struct EnrolmentTests {
    struct Setup {
        let root: String
        let ring: KeyRing
        let parent: SigningKey
        let shared: SharedDirectory
        let machine: MachineIdentity

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-enrol-\(UUID().uuidString)").path
            ring = KeyRing(stateDirectory: "\(root)/state")
            parent = try ring.createSigningKeyIfMissing().key
            try ring.trust(parent.publicKey)
            shared = SharedDirectory(path: "\(root)/shared", trust: ring)
            try shared.create()
            machine = try MachineIdentity.load(stateDirectory: "\(root)/pc", override: "kids-pc")
            try shared.publish(machine.announcement)
        }

        var file: String { "\(shared.enrolmentsPath)/kids-pc.json" }
        func entry() -> MachineRoster.Entry? { shared.roster().entries["kids-pc"] }
        func cleanUp() { try? FileManager.default.removeItem(atPath: root) }
    }

    @Test func anEnrolmentSignedByATrustedParentKeyEnrolsTheAnnouncedKey() throws {
        let setup = try Setup()
        defer { setup.cleanUp() }
        #expect(setup.entry()?.isEnrolled == false)
        #expect(setup.entry()?.problem == MachineRoster.notEnrolled)
        let enrolment = MachineEnrolment(setup.machine.announcement, author: setup.parent.id, time: 1_795_000_000)
        try setup.shared.publish(enrolment, signedBy: setup.parent)
        let entry = try #require(setup.entry())
        #expect(entry.isEnrolled && entry.key == setup.machine.key.publicKey && entry.problem == nil)
        #expect(entry.enrolment == enrolment)
        // The file is canonical, strict and round-trips.
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: setup.file)))
        let (parsed, signature) = try MachineEnrolment.parse(bytes)
        #expect(parsed == enrolment && setup.parent.publicKey.verifies(signature, of: parsed))
        #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("{\"author\":\"\(setup.parent.id)\","))
    }

    @Test func forgedTamperedUntrustedRevokedAndMisplacedEnrolmentsEnrolNothing() throws {
        let setup = try Setup()
        defer { setup.cleanUp() }
        let enrolment = MachineEnrolment(setup.machine.announcement, author: setup.parent.id, time: 1_795_000_000)
        func write(_ bytes: [UInt8]) throws { try Data(bytes).write(to: URL(fileURLWithPath: setup.file)) }
        try FileManager.default.createDirectory(atPath: setup.shared.enrolmentsPath, withIntermediateDirectories: true)

        // Signed by a key this computer does not trust (the machine's own key, say).
        let stranger = SigningKey()
        let byStranger = MachineEnrolment(setup.machine.announcement, author: stranger.id, time: 1_795_000_000)
        try write(try stranger.signedFile(byStranger))
        #expect(setup.entry()?.problem == "not enrolled: enrolled by key \(stranger.id), which is not trusted here")
        // Names the trusted parent as author but another key signed it.
        try write(enrolment.fileBytes(signature: try stranger.sign(enrolment.signingBytes)))
        #expect(setup.entry()?.problem == "not enrolled: enrolment's signature does not verify with key \(setup.parent.id)")
        // A signature of another document kind (a confirmation's domain) over the same payload.
        let wrongDomain = try setup.parent.sign(Array("curfew-confirmation-v1\n".utf8) + enrolment.signedPayload.canonicalBytes)
        try write(enrolment.fileBytes(signature: wrongDomain))
        #expect(setup.entry()?.isEnrolled == false)
        // A genuine enrolment whose key was swapped afterwards.
        var swapped = enrolment
        let other = SigningKey()
        swapped.publicKey = other.publicKey.base64
        swapped.keyId = other.id
        let genuineSignature = try setup.parent.sign(enrolment.signingBytes)
        try write(swapped.fileBytes(signature: genuineSignature))
        #expect(setup.entry()?.isEnrolled == false)
        // A genuine enrolment of another computer copied under this computer's name.
        var otherMachine = enrolment
        otherMachine.machine = "den-pc"
        try write(try setup.parent.signedFile(otherMachine))
        #expect(setup.entry()?.problem == "not enrolled: enrolment names another machine than its path")
        // Not canonical, or an unknown field.
        try write(Array((String(decoding: try setup.parent.signedFile(enrolment), as: UTF8.self) + "\n").utf8))
        #expect(setup.entry()?.problem == "not enrolled: enrolment: enrolment is not in canonical form")
        // A symlink to a genuine one is not followed.
        let elsewhere = "\(setup.root)/genuine.json"
        try Data(try setup.parent.signedFile(enrolment)).write(to: URL(fileURLWithPath: elsewhere))
        try FileManager.default.removeItem(atPath: setup.file)
        try FileManager.default.createSymbolicLink(atPath: setup.file, withDestinationPath: elsewhere)
        #expect(setup.entry()?.isEnrolled == false)
        try FileManager.default.removeItem(atPath: setup.file)

        // Genuine: enrolled; then the parent key is revoked here and the enrolment counts no more.
        try setup.shared.publish(enrolment, signedBy: setup.parent)
        #expect(setup.entry()?.isEnrolled == true)
        try setup.ring.revoke(KeyRevocation(key: setup.parent.id, time: 1_795_000_100, versions: [:], records: []))
        #expect(
            setup.entry()?.problem
                == "not enrolled: enrolled by revoked key \(setup.parent.id) (enrol it again: curfew sync enrol kids-pc)")
    }

    @Test func aComputerWithAParentKeyEnrolsItselfOnceAndAgainWithANewKey() throws {
        let setup = try Setup()
        defer { setup.cleanUp() }
        // The machine's state directory holds no parent key: nothing is written.
        let alone = SharedDirectory(path: setup.shared.path, trust: KeyRing(stateDirectory: "\(setup.root)/pc"))
        #expect(try alone.enrolWithOwnParentKey(setup.machine, now: Instant(seconds: 1_795_000_000)) == nil)
        #expect(!FileManager.default.fileExists(atPath: setup.file))
        // With the parent's key ring: enrolled once, not rewritten while the key is the same.
        #expect(try setup.shared.enrolWithOwnParentKey(setup.machine, now: Instant(seconds: 1_795_000_000)) == setup.parent.id)
        #expect(try setup.shared.enrolWithOwnParentKey(setup.machine, now: Instant(seconds: 1_795_000_060)) == nil)
        #expect(setup.entry()?.key == setup.machine.key.publicKey)
        // A new machine key (a reinstalled computer) is enrolled again.
        let renewed = MachineIdentity(id: "kids-pc", host: "kids", key: SigningKey())
        try setup.shared.publish(renewed.announcement)
        #expect(try setup.shared.enrolWithOwnParentKey(renewed, now: Instant(seconds: 1_795_000_120)) == setup.parent.id)
        #expect(setup.entry()?.key == renewed.key.publicKey && setup.entry()?.problem == nil)
    }

    @Test func confirmationsVerifyWithTheEnrolledKeyOnly() throws {
        let setup = try Setup()
        defer { setup.cleanUp() }
        let store = ConfirmationStore(shared: setup.shared, machine: setup.machine)
        let record = String(repeating: "a", count: 64) + ".json"
        let confirmation = Confirmation(
            machine: "kids-pc", host: setup.machine.host, key: setup.machine.key.id, record: record, user: "kid", outcome: .applied,
            reason: nil, enforcedVersion: 2, time: 1_795_000_000)
        #expect(store.write([confirmation]).failure == nil)
        #expect(setup.shared.confirmations(for: record).map(\.problem) == [MachineRoster.notEnrolled])
        try setup.shared.publish(MachineEnrolment(setup.machine.announcement, author: setup.parent.id, time: 0), signedBy: setup.parent)
        let readings = setup.shared.confirmations(for: record)
        #expect(readings.map(\.confirmation) == [confirmation])
        #expect(readings.first?.claimedKey == setup.machine.key.id)
    }
}
