import CurfewCore
import Foundation
import Testing

@testable import CurfewSync

@Suite struct UsageFilesTests {
    static let day = LocalDate(year: 2026, month: 11, day: 23)!

    func summary(_ machine: MachineIdentity, screen: Int64, time: Int64 = 1_795_000_000) -> UsageSummary {
        UsageSummary(
            machine: machine.id, host: machine.host, key: machine.key.id, user: "kid", day: Self.day,
            buckets: [.init(hour: 9, app: "", milliseconds: screen)], time: time)
    }

    @Test func summariesVerifyWithTheComputersEnrolledKeyAndNothingElse() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-usage-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let den = try MachineIdentity.load(stateDirectory: "\(root)/den", override: "den-pc")
        let kids = try MachineIdentity.load(stateDirectory: "\(root)/kids", override: "kids-pc")
        let reader = KeyRing(stateDirectory: "\(root)/reader")
        let (parent, _) = try reader.createSigningKeyIfMissing()
        try reader.trust(parent.publicKey)
        let shared = SharedDirectory(path: "\(root)/shared", trust: reader)
        try shared.create()
        try shared.publish(den.announcement)
        try shared.publish(kids.announcement)
        try shared.publish(summary(den, screen: 60_000), as: den)
        try shared.publish(summary(kids, screen: 30_000), as: kids)

        // Announced but not enrolled: nothing is believed.
        var readings = shared.usageReadings(user: "kid", from: Self.day, through: Self.day)
        #expect(readings.map(\.summary) == [nil, nil])
        #expect(readings.map(\.problem) == [MachineRoster.notEnrolled, MachineRoster.notEnrolled])

        for machine in [den, kids] {
            try shared.publish(MachineEnrolment(machine.announcement, author: parent.id, time: 1_795_000_000), signedBy: parent)
        }
        readings = shared.usageReadings(user: "kid", from: Self.day, through: Self.day)
        #expect(readings.map(\.machine) == ["den-pc", "kids-pc"])
        #expect(readings.map { $0.summary?.screenMilliseconds } == [60_000, 30_000])
        #expect(shared.usageReadings(user: "kid", from: Self.day, through: Self.day, excluding: "kids-pc").map(\.machine) == ["den-pc"])
        #expect(shared.usageReadings(user: "kid", from: Self.day.adding(days: 1), through: Self.day.adding(days: 9)).isEmpty)
        #expect(shared.usageReadings(user: "teen", from: Self.day, through: Self.day).isEmpty)

        // Someone with write access replaces den-pc's announcement and summary with a key of their own.
        let impostor = MachineIdentity(id: "den-pc", host: "den", key: SigningKey())
        try shared.publish(impostor.announcement)
        try shared.publish(summary(impostor, screen: 1_000, time: 1_795_000_600), as: impostor)
        readings = shared.usageReadings(user: "kid", from: Self.day, through: Self.day)
        #expect(readings[0].summary == nil)
        #expect(readings[0].problem == "signature does not verify with the key of machine den-pc")
        #expect(
            shared.roster().entries["den-pc"]?.problem
                == "announces key \(impostor.key.id), but key \(den.key.id) is the one enrolled (a reinstalled computer is enrolled again with curfew sync enrol den-pc)")
        // A reader without a key ring believes no computer at all.
        #expect(SharedDirectory(path: shared.path).usageReadings(user: "kid", from: Self.day, through: Self.day).allSatisfy { $0.summary == nil })
        // A parent who enrols the new key makes it the one.
        try shared.publish(MachineEnrolment(impostor.announcement, author: parent.id, time: 1_795_000_700), signedBy: parent)
        #expect(shared.usageReadings(user: "kid", from: Self.day, through: Self.day)[0].summary?.screenMilliseconds == 1_000)

        // A summary under another computer's or day's path, or signed by another key, is not believed.
        let kidsFile = "\(shared.usageDirectory(machine: "kids-pc", user: "kid"))/\(Self.day).json"
        let moved = "\(shared.usageDirectory(machine: "kids-pc", user: "kid"))/\(Self.day.adding(days: -1)).json"
        try FileManager.default.copyItem(atPath: kidsFile, toPath: moved)
        let yesterday = shared.usageReadings(user: "kid", from: Self.day.adding(days: -1), through: Self.day.adding(days: -1))
        #expect(yesterday.map(\.problem) == ["usage summary names another machine, user or day than its path"])
        let forged = summary(MachineIdentity(id: "kids-pc", host: "kids", key: SigningKey()), screen: 5)
        let signer = SigningKey()
        try Data(forged.fileBytes(signature: try signer.sign(forged.signingBytes))).write(to: URL(fileURLWithPath: kidsFile))
        #expect(shared.usageReadings(user: "kid", from: Self.day, through: Self.day)[1].problem
            == "signature does not verify with the key of machine kids-pc")
        // A confirmation's or record's signature never passes for a summary's: the domains differ.
        let genuine = summary(kids, screen: 30_000)
        let wrongDomain = try kids.key.sign(Array(genuine.signedPayload.canonicalBytes))
        try Data(genuine.fileBytes(signature: wrongDomain)).write(to: URL(fileURLWithPath: kidsFile))
        #expect(shared.usageReadings(user: "kid", from: Self.day, through: Self.day)[1].summary == nil)
    }

    /// Whoever can write to the shared folder cannot point root's writes elsewhere with a symlink.
    @Test func nothingIsWrittenThroughASymlinkInTheSharedDirectory() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-symlink-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let elsewhere = "\(root)/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        let shared = SharedDirectory(path: "\(root)/shared")
        try shared.create()
        let machine = try MachineIdentity.load(stateDirectory: "\(root)/state", override: "pc-one")
        try FileManager.default.createSymbolicLink(atPath: "\(shared.path)/machines", withDestinationPath: elsewhere)
        try FileManager.default.createDirectory(atPath: "\(shared.usagePath)/pc-one", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: "\(shared.usagePath)/pc-one/kid", withDestinationPath: elsewhere)
        #expect(throws: FileError.self) { try shared.publish(machine.announcement) }
        #expect(throws: FileError.self) { try shared.publish(summary(machine, screen: 1_000), as: machine) }
        let records = "\(shared.path)/records"
        try FileManager.default.removeItem(atPath: records)
        try FileManager.default.createSymbolicLink(atPath: records, withDestinationPath: elsewhere)
        let key = SigningKey()
        let record = PolicyRecord(user: "kid", version: 1, baseVersion: 0, author: key.id, time: 0, policy: Policy.defaults(for: "kid"))
        #expect(throws: FileError.self) { try shared.publish(record, signedBy: key) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
        // A real directory takes them.
        try FileManager.default.removeItem(atPath: "\(shared.path)/machines")
        #expect(try shared.publish(machine.announcement))
    }
}
