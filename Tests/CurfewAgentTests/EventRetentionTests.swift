import CurfewCore
import CurfewStore
import CurfewSync
import Foundation
import Logging
import Testing

@testable import CurfewAgent

/// The agent summarises events older than `--event-retention` when it starts, keeps the chain
/// verifiable, and leaves a broken chain alone.
@Suite struct EventRetentionTests {
    func fixture(tamper: Bool) throws -> (AgentConfiguration, String) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-retention-\(UUID().uuidString)").path
        let state = "\(root)/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let now = Instant(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))
        let day = Duration.seconds(86_400)
        let store = try StateStore(path: "\(state)/curfew.db")
        try store.write { db in
            for age in [400, 399, 399, 45, 31] {
                try EventLog.append(AgentEvent(time: now - day * age, user: "kid", kind: .warning, message: "\(age) days ago"), db)
            }
            try EventLog.append(AgentEvent(time: now - day * 2, user: "kid", kind: .lockout, message: "recent"), db)
        }
        if tamper { try store.write { try $0.execute(sql: "UPDATE events SET message = 'edited' WHERE id = 2") } }
        var configuration = AgentConfiguration(
            stateDirectory: state, sharedDirectory: "\(root)/shared", socketPath: "\(root)/run/curfewd.sock",
            catalogDirectories: [], logindBusAddress: "none", useProcessConnector: false)
        configuration.eventRetentionDays = 30
        return (configuration, root)
    }

    @Test func oldEventsBecomeDailyCountsAtStart() throws {
        let (configuration, root) = try fixture(tamper: false)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let agent = try Agent(configuration: configuration, logger: Logger(label: "test"))
        let (events, summaries, verification, retention) = try agent.store.read { db in
            (
                try EventLog.list(user: nil, since: nil, db), try AuditChain.summaries(user: nil, since: nil, db),
                try AuditChain.verify(db),
                try String.fetchOne(db, sql: "SELECT value FROM agent_state WHERE key = ?", arguments: [AgentStateKeys.eventRetentionDays.name])
            )
        }
        #expect(events.map(\.kind.rawValue) == ["lockout", "events-summarised"])
        #expect(events.last?.message == "5 events older than 30 days were replaced by daily counts")
        #expect(summaries.map(\.count).reduce(0, +) == 5)
        #expect(summaries.allSatisfy { $0.kind == "warning" && $0.user == "kid" })
        #expect(verification.broken == nil)
        #expect(verification.summarisedEvents == 5)
        #expect(retention == "30")
    }

    @Test func aBrokenChainIsKeptWhole() throws {
        let (configuration, root) = try fixture(tamper: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let agent = try Agent(configuration: configuration, logger: Logger(label: "test"))
        let (count, summaries, broken) = try agent.store.read { db in
            (
                try EventLog.list(user: nil, since: nil, db).count, try AuditChain.summaries(user: nil, since: nil, db),
                try AuditChain.verify(db).broken
            )
        }
        #expect(count == 6)
        #expect(summaries.isEmpty)
        #expect(broken?.id == 2)
    }
}
