import CurfewCore
import Foundation
import GRDB
import Testing

@testable import CurfewStore

@Suite struct RecordIndexTests {
    func temporaryDatabase() throws -> (StateStore, String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("curfew.db").path
        return (try StateStore(path: path), directory.path)
    }

    /// What a grant lifts survives the index; without it a command reading the cached verdict would
    /// lose the app's extra time, the moved window or the ended break.
    @Test func grantLiftsRoundTrip() throws {
        let (store, directory) = try temporaryDatabase()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let identity = FileIdentity(device: 1, inode: 2, size: 3, mtimeNanoseconds: 4, ctimeNanoseconds: 5)
        func grant(_ name: String, _ lift: GrantLift) -> IndexedRecord {
            IndexedRecord(
                name: name, identity: identity,
                verdict: .validGrant(
                    GrantSummary(
                        id: name, user: "kid", date: try! LocalDate.parse("2026-11-25"), extraMinutes: 0, bedtimeDelayMinutes: 0,
                        author: "0123456789abcdef", time: 1_700_000_000, requestId: 4, lift: lift)))
        }
        let entries = [
            grant("app.json", GrantLift(app: .init(app: "minecraft", minutes: 30))),
            grant("window.json", GrantLift(downtime: .init(window: "school", delayMinutes: 45))),
            grant("break.json", GrantLift(endsBreak: true)),
            grant("plain.json", GrantLift()),
        ]
        try store.write { try RecordIndex.save(entries, $0) }
        let loaded = try store.read { try RecordIndex.all($0) }
        for entry in entries { #expect(loaded[entry.name] == entry, "\(entry.name)") }
    }

    @Test func databaseIsWALWithTheMigrationsApplied() throws {
        let (store, directory) = try temporaryDatabase()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let mode = try store.read { try String.fetchOne($0, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
        let migrations = try store.read { try String.fetchAll($0, sql: "SELECT identifier FROM grdb_migrations") }
        #expect(
            migrations == [
                "v1-record-index", "v2-usage-events", "v3-grants-requests", "v4-confirmations", "v5-audit-chain",
                "v6-remote-usage", "v7-record-index-incomplete", "v8-request-cause-grant-lifts",
            ])
        let integrity = try store.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") }
        #expect(integrity == "ok")
        // Opening again is idempotent.
        _ = try StateStore(path: "\(directory)/curfew.db", concurrentReaders: true)
    }

    @Test func entriesRoundTripAndVanishedOnesAreRemoved() throws {
        let (store, directory) = try temporaryDatabase()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let identity = FileIdentity(device: 1, inode: 2, size: 3, mtimeNanoseconds: 4, ctimeNanoseconds: 5)
        let summary = RecordSummary(
            id: "a.json", user: "kid", version: 3, baseVersion: 2, author: "0123456789abcdef", time: 1_700_000_000,
            removesUser: false)
        let entries = [
            IndexedRecord(name: "a.json", identity: identity, verdict: .valid(summary)),
            IndexedRecord(name: "b.json", identity: identity, verdict: .invalid(reason: "signature does not verify")),
        ]
        try store.write { try RecordIndex.save(entries, $0) }
        let loaded = try store.read { try RecordIndex.all($0) }
        #expect(loaded["a.json"] == entries[0])
        #expect(loaded["b.json"] == entries[1])
        // Saving again replaces.
        var changed = entries[1]
        changed.identity.size = 99
        try store.write { try RecordIndex.save([changed], $0) }
        #expect(try store.read { try RecordIndex.all($0) }["b.json"]?.identity.size == 99)
        try store.write { try RecordIndex.remove(names: ["a.json"], $0) }
        #expect(try store.read { try RecordIndex.all($0) }.keys.sorted() == ["b.json"])
    }

    @Test func aFailedTransactionWritesNothing() throws {
        let (store, directory) = try temporaryDatabase()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        struct Stop: Error {}
        let identity = FileIdentity(device: 1, inode: 2, size: 3, mtimeNanoseconds: 4, ctimeNanoseconds: 5)
        #expect(throws: Stop.self) {
            try store.write { db in
                try RecordIndex.save([IndexedRecord(name: "x.json", identity: identity, verdict: .invalid(reason: "r"))], db)
                throw Stop()
            }
        }
        #expect(try store.read { try RecordIndex.all($0) }.isEmpty)
    }
}
