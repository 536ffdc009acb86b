import CurfewCore
import Foundation
import GRDB
import Testing

@testable import CurfewStore

@Suite struct RequestTableTests {
    func temporaryDirectory() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-requests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory.path
    }

    @Test func requestsAreAnsweredOnceAndNotifiedOnce() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try StateStore(path: "\(directory)/curfew.db")
        let first = try store.write { try RequestTable.add(user: "kid", minutes: 30, reason: "homework", now: Instant(milliseconds: 1_000), $0) }
        let second = try store.write { try RequestTable.add(user: "sis", minutes: 15, reason: nil, now: Instant(milliseconds: 2_000), $0) }
        #expect(first.id == 1 && second.id == 2)
        #expect(try store.read { try RequestTable.pending($0) } == [first, second])
        #expect(try store.read { try RequestTable.all(user: "sis", $0) } == [second])
        let approved = try store.write {
            try RequestTable.answer(id: first.id, status: .approved, minutes: 45, by: "0123456789abcdef", now: Instant(milliseconds: 3_000), $0)
        }
        #expect(approved.status == .approved)
        #expect(approved.grantedMinutes == 45)
        #expect(approved.answered == Instant(milliseconds: 3_000))
        #expect(approved.answeredBy == "0123456789abcdef")
        #expect(try store.read { try RequestTable.pending($0) } == [second])
        // An answered request cannot be answered again; an unknown one cannot be answered at all.
        #expect(throws: RequestError.alreadyAnswered(id: first.id, status: .approved)) {
            try store.write { try RequestTable.answer(id: first.id, status: .denied, minutes: nil, by: nil, now: Instant(milliseconds: 4_000), $0) }
        }
        #expect(throws: RequestError.unknown(id: 99)) {
            try store.write { try RequestTable.answer(id: 99, status: .denied, minutes: nil, by: nil, now: Instant(milliseconds: 4_000), $0) }
        }
        let denied = try store.write {
            try RequestTable.answer(id: second.id, status: .denied, minutes: 10, by: nil, now: Instant(milliseconds: 5_000), $0)
        }
        #expect(denied.grantedMinutes == nil)
        #expect(try store.read { try RequestTable.unnotifiedAnswers($0) }.map(\.id) == [first.id, second.id])
        try store.write { try RequestTable.markNotified(ids: [first.id], $0) }
        #expect(try store.read { try RequestTable.unnotifiedAnswers($0) }.map(\.id) == [second.id])
        #expect(try store.read { try RequestTable.all($0) }.map(\.notified) == [true, false])
        // The table refuses amounts outside the rules.
        #expect(throws: (any Error).self) {
            try store.write { try RequestTable.add(user: "kid", minutes: 481, reason: nil, now: Instant(milliseconds: 6_000), $0) }
        }
    }

    @Test func upgradingForgetsInvalidVerdictsSoGrantFilesAreCheckedAgain() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = "\(directory)/curfew.db"
        let queue = try DatabaseQueue(path: path)
        try StateStore.migrator.migrate(queue, upTo: "v2-usage-events")
        try queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO record_index VALUES ('a.json', 1, 2, 3, 4, 5, 'valid', NULL, 'kid', 1, 0, '0123456789abcdef', 10, 0);
                    INSERT INTO record_index VALUES ('g.json', 1, 3, 3, 4, 5, 'invalid', 'record field "kind" must be "policy"',
                        NULL, NULL, NULL, NULL, NULL, NULL);
                    """)
        }
        try queue.close()
        let store = try StateStore(path: path)
        let index = try store.read { try RecordIndex.all($0) }
        #expect(index.keys.sorted() == ["a.json"])
        guard case .valid(let summary)? = index["a.json"]?.verdict else {
            Issue.record("the policy row did not survive: \(String(describing: index["a.json"]))")
            return
        }
        #expect(summary.version == 1)
    }
}
