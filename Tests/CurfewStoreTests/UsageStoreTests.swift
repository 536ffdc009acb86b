import CurfewCore
import Foundation
import GRDB
import Testing

@testable import CurfewStore

@Suite struct UsageStoreTests {
    func temporaryStore() throws -> (StateStore, String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-usage-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return (try StateStore(path: "\(directory)/curfew.db", concurrentReaders: true), directory)
    }

    @Test func usageAddsUpPerBucketAndDayTotalsSumHours() throws {
        let (store, directory) = try temporaryStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let day = LocalDate(year: 2026, month: 11, day: 21)!
        let screen9 = UsageKey(user: "kid", day: day, hour: 9, app: UsageKey.screen)
        let screen10 = UsageKey(user: "kid", day: day, hour: 10, app: UsageKey.screen)
        let game = UsageKey(user: "kid", day: day, hour: 9, app: "minecraft")
        let other = UsageKey(user: "teen", day: day, hour: 9, app: UsageKey.screen)
        try store.write { try UsageTable.add([screen9: 1_500, game: 1_000, other: 7], $0) }
        try store.write { try UsageTable.add([screen9: 500, screen10: 60_000], $0) }
        let totals = try store.read { try UsageTable.dayTotals(user: "kid", day: day, $0) }
        #expect(totals == [UsageKey.screen: 62_000, "minecraft": 1_000])
        let rows = try store.read { try UsageTable.rows(user: "kid", from: day, through: day.adding(days: 1), $0) }
        #expect(rows.map(\.hour) == [9, 9, 10])
        #expect(try store.read { try UsageTable.dayTotals(user: "kid", day: day.adding(days: 1), $0) }.isEmpty)
    }

    @Test func eventsAreAppendedInOrderAndFilteredByUserAndTime() throws {
        let (store, directory) = try temporaryStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try store.write { db in
            try EventLog.append(AgentEvent(time: Instant(milliseconds: 1_000), kind: .agentStarted, message: "started"), db)
            try EventLog.append(
                AgentEvent(time: Instant(milliseconds: 2_000), user: "kid", kind: .policyLoaded, message: "v2", data: .object(JSONObject([("version", .int(2))]))), db)
            try EventLog.append(AgentEvent(time: Instant(milliseconds: 3_000), user: "teen", kind: .policyLoaded, message: "v1"), db)
        }
        let kid = try store.read { try EventLog.list(user: "kid", since: nil, $0) }
        #expect(kid.map(\.kind.rawValue) == ["agent-started", "policy-loaded"])
        #expect(kid[1].data == .object(JSONObject([("version", .int(2))])))
        let recent = try store.read { try EventLog.list(user: nil, since: Instant(milliseconds: 2_500), $0) }
        #expect(recent.map(\.user) == ["teen"])
    }

    @Test func aDamagedDatabaseIsMovedAsideAndReplaced() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-corrupt-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = "\(directory)/curfew.db"
        try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: path))
        let (store, corruption) = try StateStore.openChecked(path: path, now: Instant(seconds: 1_790_000_000))
        #expect(corruption?.movedTo == "\(path).corrupt-1790000000")
        #expect(FileManager.default.fileExists(atPath: "\(path).corrupt-1790000000"))
        #expect(try store.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") } == "ok")
        // A healthy database is kept as it is.
        let (_, again) = try StateStore.openChecked(path: path, now: Instant(seconds: 1_790_000_001))
        #expect(again == nil)
    }
}

@Suite struct RemoteUsageTableTests {
    @Test func theLatestSummaryOfEachComputerAndDayIsKeptAndOlderCopiesChangeNothing() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-remote-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try StateStore(path: "\(directory)/curfew.db", concurrentReaders: true)
        let day = LocalDate(year: 2026, month: 11, day: 23)!
        func summary(_ machine: String, _ screen: Int64, time: Int64, day: LocalDate = day) -> UsageSummary {
            UsageSummary(
                machine: machine, host: "\(machine)-host", key: "", user: "kid", day: day,
                buckets: [.init(hour: 9, app: "", milliseconds: screen), .init(hour: 9, app: "vlc", milliseconds: 1_000)],
                time: time)
        }
        #expect(try store.write { try RemoteUsageTable.keep(summary("den", 60_000, time: 100), $0) })
        #expect(try store.write { try RemoteUsageTable.keep(summary("den", 120_000, time: 200), $0) })
        // An older copy put back, or the same one again: nothing changes.
        #expect(try !store.write { try RemoteUsageTable.keep(summary("den", 60_000, time: 100), $0) })
        #expect(try !store.write { try RemoteUsageTable.keep(summary("den", 120_000, time: 200), $0) })
        try store.write { try RemoteUsageTable.keep(summary("attic", 5_000, time: 150), $0) }
        try store.write { try RemoteUsageTable.keep(summary("den", 9_000, time: 50, day: day.adding(days: -1)), $0) }
        let kept = try store.read { try RemoteUsageTable.summaries(user: "kid", from: day, through: day, $0) }
        #expect(kept.map(\.machine) == ["attic", "den"])
        #expect(kept.map(\.screenMilliseconds) == [5_000, 120_000])
        #expect(kept[1].totals == ["": 120_000, "vlc": 1_000] && kept[1].host == "den-host" && kept[1].time == 200)
        #expect(try store.read { try RemoteUsageTable.summaries(user: "teen", from: day, through: day, $0) }.isEmpty)
    }
}
