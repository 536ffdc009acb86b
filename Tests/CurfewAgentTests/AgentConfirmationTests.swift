import CurfewCore
import CurfewStore
import CurfewSync
import Foundation
import Logging
import Testing

@testable import CurfewAgent
@testable import CurfewSync

#if canImport(Glibc)
    import Glibc
#endif

/// The agent answers every record of the shared directory with a signed confirmation.
@Suite struct AgentConfirmationTests {
    struct Fixture {
        let root: String
        let state: String
        let shared: SharedDirectory
        let key: SigningKey
        let machineID = "test-pc"

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-agent-confirm-\(UUID().uuidString)").path
            state = "\(root)/state"
            let ring = KeyRing(stateDirectory: state)
            // The agent's state directory holds the parent key: it enrols itself with it.
            shared = SharedDirectory(path: "\(root)/shared", trust: ring)
            try shared.create()
            key = try ring.createSigningKeyIfMissing().key
            try ring.trust(key.publicKey)
        }

        func record(_ version: Int, limit: Int) -> PolicyRecord {
            var policy = Policy.defaults(for: "synckid")
            policy.bedtime = nil
            policy.dailyLimit = .minutes(limit)
            return PolicyRecord(
                user: "synckid", version: version, baseVersion: version - 1, author: key.id,
                time: 1_790_000_000 + Int64(version), policy: policy)
        }

        func agent() throws -> Agent {
            var configuration = AgentConfiguration(
                stateDirectory: state, sharedDirectory: shared.path, socketPath: "\(root)/run/curfewd.sock",
                catalogDirectories: [], logindBusAddress: "none", useProcessConnector: false)
            configuration.machineID = machineID
            return try Agent(configuration: configuration, logger: Logger(label: "test"))
        }

        var directory: String { shared.confirmationsPath(of: machineID) }

        func confirmation(_ record: String) -> CurfewCore.Confirmation? {
            shared.confirmations(for: record).first { $0.machine == machineID }?.confirmation
        }

        func confirmationFiles() -> [String: Int64] {
            var result: [String: Int64] = [:]
            for name in (try? Files.list(directory)) ?? [] {
                result[name] = try? Files.identity("\(directory)/\(name)").0.mtimeNanoseconds
            }
            return result
        }

        /// Bytes written under `name` in records/ as they are (no temporary name).
        func put(_ bytes: [UInt8], as name: String) throws {
            try Data(bytes).write(to: URL(fileURLWithPath: "\(shared.recordsPath)/\(name)"))
        }

        func setOld(_ name: String) {
            var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 0), timespec(tv_sec: 1_700_000_000, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, "\(shared.recordsPath)/\(name)", &times, 0) == 0)
        }

        func cleanUp() { try? FileManager.default.removeItem(atPath: root) }
    }

    @Test func everyRecordIsAnsweredOnceWithItsOutcome() throws {
        let fixture = try Fixture()
        defer { fixture.cleanUp() }
        let first = try fixture.shared.publish(fixture.record(1, limit: 120), signedBy: fixture.key)
        let second = try fixture.shared.publish(fixture.record(2, limit: 60), signedBy: fixture.key)
        // Tampered: the newest record with a bigger limit, renamed to its new hash.
        let secondBytes = try Files.readRegularFile("\(fixture.shared.recordsPath)/\(second)", maxBytes: 1 << 20)
        let tamperedBytes = Array(
            String(decoding: secondBytes, as: UTF8.self).replacingOccurrences(of: "\"dailyLimitMinutes\":60", with: "\"dailyLimitMinutes\":480").utf8)
        let tampered = "\(sha256Hex(tamperedBytes)).json"
        try fixture.put(tamperedBytes, as: tampered)
        // Forged: signed by a key nobody trusts here.
        let stranger = SigningKey()
        var forgedRecord = fixture.record(9, limit: 480)
        forgedRecord.author = stranger.id
        let forged = try fixture.shared.publish(forgedRecord, signedBy: stranger)
        // A symlink named like a record.
        let link = String(repeating: "e", count: 64) + ".json"
        #expect(symlink("\(fixture.shared.recordsPath)/\(second)", "\(fixture.shared.recordsPath)/\(link)") == 0)

        let agent = try fixture.agent()
        #expect(agent.state.version(of: "synckid") == 2)
        let machine = try #require(fixture.shared.roster().entries[fixture.machineID])
        #expect(machine.isEnrolled && machine.key?.id == agent.machine.key.id)

        let applied = try #require(fixture.confirmation(second))
        #expect(applied.outcome == .applied && applied.reason == nil && applied.enforcedVersion == 2)
        #expect(applied.user == "synckid" && applied.machine == "test-pc" && applied.host == MachineIdentity.hostName())
        let superseded = try #require(fixture.confirmation(first))
        #expect(superseded.outcome == .superseded && superseded.enforcedVersion == 2)
        #expect(superseded.reason == "a newer version is in force")
        let tamperedAnswer = try #require(fixture.confirmation(tampered))
        #expect(tamperedAnswer.outcome == .rejected)
        #expect(tamperedAnswer.reason == "signature does not verify with key \(fixture.key.id)")
        let forgedAnswer = try #require(fixture.confirmation(forged))
        #expect(forgedAnswer.outcome == .rejected && forgedAnswer.reason == "signed by key \(stranger.id), which is not trusted here")
        let linkAnswer = try #require(fixture.confirmation(link))
        #expect(linkAnswer.outcome == .rejected && linkAnswer.reason == "not a regular file")
        #expect(Set(fixture.confirmationFiles().keys) == [first, second, tampered, forged, link])

        // Nothing changed: nothing is written again.
        let before = fixture.confirmationFiles()
        let machineFile = try Files.identity("\(fixture.shared.machinesPath)/test-pc.json").0
        try agent.reloadPolicies()
        #expect(fixture.confirmationFiles() == before)
        #expect(try Files.identity("\(fixture.shared.machinesPath)/test-pc.json").0 == machineFile)

        // A newer record: the old applied one becomes superseded, the new one applied.
        let third = try fixture.shared.publish(fixture.record(3, limit: 30), signedBy: fixture.key)
        try agent.reloadPolicies()
        #expect(fixture.confirmation(third)?.outcome == .applied)
        #expect(fixture.confirmation(second)?.outcome == .superseded)
        #expect(fixture.confirmation(second)?.enforcedVersion == 3)
        let after = fixture.confirmationFiles()
        #expect(after[first] == before[first] && after[tampered] == before[tampered], "unchanged verdicts are not rewritten")
    }

    @Test func aPartlyWrittenRecordWaitsUntilCompleteOrTooOld() throws {
        let fixture = try Fixture()
        defer { fixture.cleanUp() }
        let first = try fixture.shared.publish(fixture.record(1, limit: 120), signedBy: fixture.key)
        let agent = try fixture.agent()
        #expect(fixture.confirmation(first)?.outcome == .applied)

        // The first half of version 2 under its final name, as a sync tool may leave it for a while.
        let record = fixture.record(2, limit: 60)
        let bytes = record.fileBytes(signature: try fixture.key.sign(record.signingBytes))
        let name = "\(sha256Hex(bytes)).json"
        try fixture.put(Array(bytes.prefix(bytes.count / 2)), as: name)
        try agent.reloadPolicies()
        #expect(fixture.confirmationFiles()[name] == nil)
        #expect(try agent.store.read { try RecordIndex.all($0) }[name] == nil, "no verdict is kept for it")
        #expect(agent.state.version(of: "synckid") == 1)

        // Complete: applied.
        try fixture.put(bytes, as: name)
        try agent.reloadPolicies()
        #expect(fixture.confirmation(name)?.outcome == .applied)
        #expect(fixture.confirmation(first)?.outcome == .superseded)
        #expect(agent.state.version(of: "synckid") == 2)

        // Another partial file, older than ten minutes: rejected.
        let stale = fixture.record(3, limit: 30)
        let staleBytes = stale.fileBytes(signature: try fixture.key.sign(stale.signingBytes))
        let staleName = "\(sha256Hex(staleBytes)).json"
        try fixture.put(Array(staleBytes.prefix(staleBytes.count / 2)), as: staleName)
        try agent.reloadPolicies()
        #expect(fixture.confirmationFiles()[staleName] == nil)
        fixture.setOld(staleName)
        try agent.reloadPolicies()
        let answer = try #require(fixture.confirmation(staleName))
        #expect(answer.outcome == .rejected && answer.reason == "content does not match its name (hash)")
        #expect(agent.state.version(of: "synckid") == 2)
    }

    @Test func anUnwritableConfirmationsDirectoryHoldsNothingUp() throws {
        let fixture = try Fixture()
        defer { fixture.cleanUp() }
        let first = try fixture.shared.publish(fixture.record(1, limit: 120), signedBy: fixture.key)
        let second = try fixture.shared.publish(fixture.record(2, limit: 60), signedBy: fixture.key)
        // Root ignores permissions: a regular file where the machine's directory should be.
        try Data("in the way".utf8).write(to: URL(fileURLWithPath: fixture.directory))
        let agent = try fixture.agent()
        #expect(agent.state.version(of: "synckid") == 2)
        #expect(agent.state.policies["synckid"]?.dailyLimit == .minutes(60))
        #expect(try agent.store.read { try ConfirmationTable.pendingCount(machine: "test-pc", $0) } == 2)

        try agent.reloadPolicies()
        #expect(try agent.store.read { try ConfirmationTable.pendingCount(machine: "test-pc", $0) } == 2)

        try FileManager.default.removeItem(atPath: fixture.directory)
        try agent.reloadPolicies()
        #expect(fixture.confirmation(second)?.outcome == .applied)
        #expect(fixture.confirmation(first)?.outcome == .superseded)
        #expect(try agent.store.read { try ConfirmationTable.pendingCount(machine: "test-pc", $0) } == 0)
    }

    @Test func aRestartRewritesConfirmationsLostFromDisk() throws {
        let fixture = try Fixture()
        defer { fixture.cleanUp() }
        let first = try fixture.shared.publish(fixture.record(1, limit: 120), signedBy: fixture.key)
        _ = try fixture.agent()
        try FileManager.default.removeItem(atPath: "\(fixture.directory)/\(first)")
        _ = try fixture.agent()
        #expect(fixture.confirmation(first)?.outcome == .applied)
    }

    @Test func thePlanAnswersMergedRecordsWithTheirConflictsAndGrantsByTheirUser() {
        func summary(_ id: Character, _ version: Int, time: Int64 = 1) -> RecordSummary {
            RecordSummary(
                id: String(repeating: id, count: 64) + ".json", user: "kid", version: version, baseVersion: version - 1,
                author: "0123456789abcdef", time: time, removesUser: false)
        }
        func grant(_ id: Character, _ user: String) -> GrantSummary {
            GrantSummary(
                id: String(repeating: id, count: 64) + ".json", user: user, date: LocalDate(year: 2026, month: 1, day: 31)!,
                extraMinutes: 30, bedtimeDelayMinutes: 0, author: "0123456789abcdef", time: 1, requestId: nil)
        }
        let old = summary("a", 1)
        let left = summary("b", 2, time: 5)
        let right = summary("c", 2, time: 6)
        var scan = RecordScan(
            valid: [old, left, right], ignored: [IgnoredRecord(name: String(repeating: "d", count: 64) + ".json", reason: "bad", user: nil)],
            newIndexEntries: [], vanished: [])
        scan.grants = [grant("e", "kid"), grant("f", "nobody")]
        let plan = ConfirmationPlan.verdicts(
            valid: scan.valid, grants: scan.grants, ignored: scan.ignored, versions: ["kid": 2], enforcedUsers: ["kid"], removed: [],
            merged: [left.id: ["dailyLimitMinutes"], right.id: ["dailyLimitMinutes"]])
        #expect(plan[old.id]?.outcome == .superseded && plan[old.id]?.reason == ConfirmationPlan.newer)
        #expect(plan[left.id]?.outcome == .merged && plan[left.id]?.conflicts == ["dailyLimitMinutes"])
        #expect(plan[right.id]?.outcome == .merged && plan[right.id]?.enforcedVersion == 2)
        #expect(plan[String(repeating: "d", count: 64) + ".json"]?.outcome == .rejected)
        #expect(plan[String(repeating: "e", count: 64) + ".json"]?.outcome == .applied)
        #expect(plan[String(repeating: "f", count: 64) + ".json"]?.reason == "nobody has no policy on this computer")
        let unmerged = ConfirmationPlan.verdicts(valid: scan.valid, grants: scan.grants, ignored: scan.ignored, versions: ["kid": 2], enforcedUsers: ["kid"], removed: [])
        #expect(unmerged[right.id]?.outcome == .applied && unmerged[left.id]?.reason == ConfirmationPlan.lostTie)
    }
}

extension AgentConfirmationTests {
    /// A grant with a field this agent does not know (one a newer `curfew` wrote, as `app` is to an
    /// agent from before the schedule rules) is answered with a `rejected` confirmation that names the field, so
    /// the parent sees which computer must be updated; what is enforced does not change.
    @Test func aGrantWithAnUnknownFieldIsRejectedNamingTheField() throws {
        let fixture = try Fixture()
        defer { fixture.cleanUp() }
        _ = try fixture.shared.publish(fixture.record(1, limit: 120), signedBy: fixture.key)
        let grant = GrantRecord(
            user: "synckid", date: try LocalDate.parse("2026-11-25"), extraMinutes: 30, bedtimeDelayMinutes: 0, author: fixture.key.id,
            time: 1_790_000_100, nonce: String(repeating: "1f", count: 16))
        guard case .object(var payload) = grant.signedPayload else { Issue.record("not an object"); return }
        payload["appColour"] = .string("green")
        let signature = try fixture.key.sign(Array(RecordFormat.signingDomain.utf8) + JSONValue.object(payload).canonicalBytes)
        payload["signature"] = .string(signature)
        let bytes = JSONValue.object(payload).canonicalBytes
        let name = "\(sha256Hex(bytes)).json"
        try fixture.put(bytes, as: name)

        let agent = try fixture.agent()
        #expect(agent.state.version(of: "synckid") == 1)
        let answer = try #require(fixture.confirmation(name))
        #expect(answer.outcome == .rejected && answer.reason == #"unknown record field "appColour""#, "\(answer)")
        #expect(agent.state.adjustments["synckid"] == nil)
    }
}
