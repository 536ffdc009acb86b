import CurfewCore
import Foundation
import Testing

@testable import CurfewSync

#if canImport(Glibc)
    import Glibc
#endif

/// `curfew sync prune` removes only what can never be used again, and only once it is a day old.
@Suite struct PruneTests {
    @Test func confirmationsOfGoneRecordsRejectedFilesAndLeftoversOlderThanADayAreRemoved() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-prune-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let shared = SharedDirectory(path: root)
        try shared.create()
        let now: Int64 = 1_795_000_000
        func age(_ path: String, seconds: Int64) {
            var times = [timespec(tv_sec: Int(now - seconds), tv_nsec: 0), timespec(tv_sec: Int(now - seconds), tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0)
        }
        let key = SigningKey()
        let stranger = SigningKey()
        func record(_ version: Int, by signer: SigningKey) throws -> String {
            try shared.publish(
                PolicyRecord(user: "kid", version: version, baseVersion: version - 1, author: signer.id, time: now, policy: Policy.defaults(for: "kid")),
                signedBy: signer)
        }
        let valid = try record(1, by: key)
        let untrusted = try record(2, by: stranger)
        // Tampered copies: bytes that no longer match their names (one old, one young).
        let validBytes = try Files.readRegularFile("\(shared.recordsPath)/\(valid)", maxBytes: 1 << 20)
        let tamperedOld = String(repeating: "1", count: 64) + ".json"
        let tamperedYoung = String(repeating: "2", count: 64) + ".json"
        for name in [tamperedOld, tamperedYoung] {
            try Data(validBytes).write(to: URL(fileURLWithPath: "\(shared.recordsPath)/\(name)"))
        }
        let leftover = "\(shared.recordsPath)/.tmp-\(valid)-123-456"
        try Data("partial".utf8).write(to: URL(fileURLWithPath: leftover))
        let machine = "\(shared.confirmationsPath)/pc-a"
        try FileManager.default.createDirectory(atPath: machine, withIntermediateDirectories: true)
        let goneOld = String(repeating: "3", count: 64) + ".json"
        let goneYoung = String(repeating: "4", count: 64) + ".json"
        for name in [valid, untrusted, goneOld, goneYoung] {
            try Data("{}".utf8).write(to: URL(fileURLWithPath: "\(machine)/\(name)"))
        }
        for path in ["\(shared.recordsPath)/\(valid)", "\(shared.recordsPath)/\(untrusted)", "\(shared.recordsPath)/\(tamperedOld)", leftover]
            + [valid, untrusted, goneOld].map({ "\(machine)/\($0)" })
        {
            age(path, seconds: 2 * 86400)
        }
        age("\(shared.recordsPath)/\(tamperedYoung)", seconds: 3600)
        age("\(machine)/\(goneYoung)", seconds: 3600)

        let plan = shared.prunePlan(trusted: [key.id: key.publicKey], now: Instant(seconds: now))
        #expect(
            plan.items == [
                .init(path: leftover, reason: "a temporary file left by an interrupted write"),
                .init(path: "\(shared.recordsPath)/\(tamperedOld)", reason: "rejected: content does not match its name (hash)"),
                .init(path: "\(machine)/\(goneOld)", reason: "confirms record 333333333333, which is no longer in records/"),
            ])
        #expect(shared.prune(plan).isEmpty)
        let left = Set(try FileManager.default.contentsOfDirectory(atPath: shared.recordsPath))
        #expect(left == [valid, untrusted, tamperedYoung])
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: machine)) == [valid, untrusted, goneYoung])
        #expect(shared.prunePlan(trusted: [key.id: key.publicKey], now: Instant(seconds: now)).items.isEmpty)
        // A day later the young ones go too; the untrusted record stays (another computer may trust it).
        let later = shared.prunePlan(trusted: [key.id: key.publicKey], now: Instant(seconds: now + 86400)).items.map(\.path)
        #expect(later == ["\(shared.recordsPath)/\(tamperedYoung)", "\(machine)/\(goneYoung)"])
    }
}
