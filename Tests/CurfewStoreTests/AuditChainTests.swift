import CurfewCore
import Foundation
import GRDB
import Testing

@testable import CurfewStore

/// The audit log's hash chain: appends chain, writers on several threads and connections never fork
/// it, edits and removals are found, the v5 migration chains older events, and summarising old events
/// keeps the chain verifiable.
@Suite struct AuditChainTests {
    func temporaryDirectory() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-audit-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    func event(_ time: Int64, _ kind: String = "warning", user: String? = "kid", _ message: String = "m") -> AgentEvent {
        AgentEvent(time: Instant(milliseconds: time), user: user, kind: EventKind(rawValue: kind), message: message)
    }

    @Test func appendsChainAndVerify() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try StateStore(path: "\(directory)/curfew.db", concurrentReaders: true)
        #expect(try store.read { try AuditChain.verify($0) } == AuditChain.Verification())
        try store.write { db in
            try EventLog.append(event(1_000, "agent-started", user: nil), db)
            try EventLog.append(
                AgentEvent(time: Instant(milliseconds: 2_000), user: "kid", kind: .policyLoaded, message: "v2", data: .object(JSONObject([("version", .int(2))]))), db)
        }
        // Outside a transaction append makes one of its own.
        try store.writer.writeWithoutTransaction { db in _ = try EventLog.append(event(3_000), db) }
        let rows = try store.read { try Row.fetchAll($0, sql: "SELECT prev_hash, hash FROM events ORDER BY id") }
        #expect(rows.count == 3)
        #expect(rows[0]["prev_hash"] as String == AuditChain.genesis)
        #expect(rows[1]["prev_hash"] as String == rows[0]["hash"] as String)
        #expect(rows[2]["prev_hash"] as String == rows[1]["hash"] as String)
        let expectedFirst = AuditChain.eventHash(
            previous: AuditChain.genesis, time: 1_000, user: nil, kind: "agent-started", message: "m", data: nil)
        #expect(rows[0]["hash"] as String == expectedFirst)
        let result = try store.read { try AuditChain.verify($0) }
        #expect(result.broken == nil)
        #expect(result.events == 3)
        #expect(result.head == rows[2]["hash"] as String)
    }

    @Test func concurrentWritersOnThreadsAndConnectionsNeverForkTheChain() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = "\(directory)/curfew.db"
        let pool = try StateStore(path: path, concurrentReaders: true)
        // A second connection stands in for another process (the CLI's check-login next to the agent).
        let other = try StateStore(path: path)
        let threads = 6
        let perThread = 150
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            let store = thread % 2 == 0 ? pool : other
            for index in 0..<perThread {
                try! store.write { db in
                    _ = try EventLog.append(AgentEvent(time: Instant(milliseconds: Int64(index)), user: "kid", kind: EventKind(rawValue: "t\(thread)"), message: "\(index)"), db)
                }
            }
        }
        let result = try pool.read { try AuditChain.verify($0) }
        #expect(result.broken == nil)
        #expect(result.events == threads * perThread)
        let forks = try pool.read {
            try Int.fetchOne($0, sql: "SELECT count(*) FROM (SELECT prev_hash FROM events GROUP BY prev_hash HAVING count(*) > 1)")
        }
        #expect(forks == 0)
    }

    @Test func anEditedRemovedOrSmuggledEventIsTheFirstBrokenLink() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try StateStore(path: "\(directory)/curfew.db")
        try store.write { db in for time in 1...6 { try EventLog.append(event(Int64(time) * 1_000, "lockout", "no time left \(time)"), db) } }

        try store.write { try $0.execute(sql: "UPDATE events SET message = 'nothing happened' WHERE id = 3") }
        var broken = try #require(try store.read { try AuditChain.verify($0) }.broken)
        #expect(broken.entry == "event" && broken.id == 3)
        #expect(broken.problem.hasPrefix("its content does not match its hash"))
        try store.write { try $0.execute(sql: "UPDATE events SET message = 'no time left 3' WHERE id = 3") }
        #expect(try store.read { try AuditChain.verify($0) }.broken == nil)

        // Recomputing the edited event's own hash moves the break to the next link.
        try store.write { db in
            let previous = try String.fetchOne(db, sql: "SELECT prev_hash FROM events WHERE id = 2")!
            let forged = AuditChain.eventHash(previous: previous, time: 2_000, user: "kid", kind: "lockout", message: "forged", data: nil)
            try db.execute(sql: "UPDATE events SET message = 'forged', hash = ? WHERE id = 2", arguments: [forged])
        }
        broken = try #require(try store.read { try AuditChain.verify($0) }.broken)
        #expect(broken.id == 3)
        #expect(broken.problem.contains("the entry before it has hash"))

        let fresh = try StateStore(path: "\(directory)/fresh.db")
        try fresh.write { db in for time in 1...6 { try EventLog.append(event(Int64(time) * 1_000), db) } }
        try fresh.write { try $0.execute(sql: "DELETE FROM events WHERE id = 4") }
        broken = try #require(try fresh.read { try AuditChain.verify($0) }.broken)
        #expect(broken.id == 5)
        #expect(broken.problem.hasSuffix("(events 4 to 4 are missing)"))

        let smuggled = try StateStore(path: "\(directory)/smuggled.db")
        try smuggled.write { db in for time in 1...2 { try EventLog.append(event(Int64(time) * 1_000), db) } }
        try smuggled.write { try $0.execute(sql: "INSERT INTO events (time_ms, user, kind, message) VALUES (5, 'kid', 'allowed-again', 'x')") }
        try smuggled.write { try EventLog.append(event(9_000), $0) }
        broken = try #require(try smuggled.read { try AuditChain.verify($0) }.broken)
        #expect(broken.id == 3)
        #expect(broken.problem.hasPrefix("it has no hash"))
    }

    @Test func theMigrationChainsEventsWrittenBeforeIt() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = "\(directory)/curfew.db"
        do {
            let queue = try DatabaseQueue(path: path)
            try StateStore.migrator.migrate(queue, upTo: "v4-confirmations")
            try queue.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO events (time_ms, user, kind, message, data) VALUES (1000, NULL, 'agent-started', 'started', NULL);
                        INSERT INTO events (time_ms, user, kind, message, data) VALUES (2000, 'kid', 'policy-loaded', 'v1', '{"version":1}');
                        INSERT INTO events (time_ms, user, kind, message, data) VALUES (3000, 'kid', 'extra-time-granted', '30m', '{"record":"abc"}');
                        """)
            }
        }
        let store = try StateStore(path: path)
        let result = try store.read { try AuditChain.verify($0) }
        #expect(result.broken == nil)
        #expect(result.events == 3)
        let first = try store.read { try String.fetchOne($0, sql: "SELECT hash FROM events WHERE id = 1") }
        #expect(first == AuditChain.eventHash(previous: AuditChain.genesis, time: 1000, user: nil, kind: "agent-started", message: "started", data: nil))
        try store.write { try EventLog.append(event(4_000), $0) }
        #expect(try store.read { try AuditChain.verify($0) }.broken == nil)
    }

    @Test func summarisingOldEventsKeepsTheChainAndTheCounts() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try StateStore(path: "\(directory)/curfew.db")
        let utc = ZoneRules.utc
        let day: Int64 = 86_400_000
        let start: Int64 = 1_794_787_200_000  // 2026-11-16T00:00:00Z
        try store.write { db in
            try EventLog.append(event(start + 1_000, "warning"), db)
            try EventLog.append(event(start + 2_000, "warning"), db)
            try EventLog.append(event(start + 3_000, "lockout"), db)
            try EventLog.append(event(start + day, "warning", user: "teen"), db)
            try EventLog.append(
                AgentEvent(
                    time: Instant(milliseconds: start + day + 5), user: "kid", kind: .extraTimeGranted, message: "30m",
                    data: .object(JSONObject([("record", .string("grant-1"))]))), db)
            try EventLog.append(event(start + 3 * day, "warning"), db)  // kept
            try EventLog.append(event(start + 1_500, "clock-jump"), db)  // older, but after a kept one: kept
        }
        let replaced = try store.write { try AuditChain.summarise(before: Instant(milliseconds: start + 2 * day), zone: utc, $0) }
        #expect(replaced == 5)
        let summaries = try store.read { try AuditChain.summaries(user: nil, since: nil, $0) }
        #expect(summaries.map { "\($0.day) \($0.user ?? "-") \($0.kind) \($0.count)" } == [
            "2026-11-16 kid lockout 1", "2026-11-16 kid warning 2", "2026-11-17 kid extra-time-granted 1", "2026-11-17 teen warning 1",
        ])
        #expect(summaries.allSatisfy { $0.firstEvent == 1 && $0.lastEvent == 5 })
        #expect(try store.read { try Int64.fetchAll($0, sql: "SELECT id FROM events ORDER BY id") } == [6, 7])
        var result = try store.read { try AuditChain.verify($0) }
        #expect(result.broken == nil)
        #expect(result.events == 2 && result.summaryRows == 4 && result.summarisedEvents == 5)
        // The grant stays announced; new events chain on; a second summary chains from the first.
        #expect(try store.read { try EventLog.grantsAnnounced($0) } == ["grant-1"])
        try store.write { try EventLog.append(event(start + 4 * day), $0) }
        #expect(try store.write { try AuditChain.summarise(before: Instant(milliseconds: start + 5 * day), zone: utc, $0) } == 3)
        result = try store.read { try AuditChain.verify($0) }
        #expect(result.broken == nil)
        #expect(result.events == 0 && result.summarisedEvents == 8)
        try store.write { try EventLog.append(event(start + 6 * day), $0) }
        #expect(try store.read { try AuditChain.verify($0) }.broken == nil)

        // An edited count is found; a broken chain is never summarised.
        try store.write { try $0.execute(sql: "UPDATE event_summaries SET count = 1 WHERE id = 2") }
        let broken = try #require(try store.read { try AuditChain.verify($0) }.broken)
        #expect(broken.entry == "summary" && broken.id == 2)
        #expect(throws: AuditChain.BrokenChainError.self) {
            try store.write { try AuditChain.summarise(before: Instant(milliseconds: start + 10 * day), zone: utc, $0) }
        }
        #expect(try store.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM events") } == 1)
    }
}
