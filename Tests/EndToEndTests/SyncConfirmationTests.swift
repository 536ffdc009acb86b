import CurfewCore
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Three agents (own state directories and machine ids) on one shared directory, with the parent's
/// key trusted by all; the parent runs the built `curfew`.
@Suite(.serialized) struct SyncConfirmationTests {
    struct Family {
        let parent: CurfewRunner
        let shared: String
        let agents: [(id: String, runner: CurfewRunner)]

        init() throws {
            parent = try CurfewRunner()
            shared = parent.root.appendingPathComponent("shared").path
            var agents: [(String, CurfewRunner)] = []
            for id in ["pc-a", "pc-b", "pc-c"] { agents.append((id, try CurfewRunner())) }
            self.agents = agents
            try parent.ok(["init", "--shared-dir", shared])
            try parent.ok(["user", "add", "synckid", "--shared-dir", shared])
            let trusted = "\(parent.stateDir)/keys/trusted"
            for (_, runner) in agents {
                let target = "\(runner.stateDir)/keys/trusted"
                try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
                for name in try FileManager.default.contentsOfDirectory(atPath: trusted) where name.hasSuffix(".pub") {
                    try FileManager.default.copyItem(atPath: "\(trusted)/\(name)", toPath: "\(target)/\(name)")
                }
            }
        }

        func start(_ index: Int) throws -> AgentProcess {
            try AgentProcess(
                agents[index].runner, arguments: ["--shared-dir", shared, "--machine-id", agents[index].id, "--rescan", "1"])
        }

        func records() -> Set<String> {
            Set(((try? FileManager.default.contentsOfDirectory(atPath: "\(shared)/records")) ?? []).filter { $0.hasSuffix(".json") })
        }

        /// Runs a parent's command and returns the record it published.
        func change(_ arguments: [String]) throws -> String {
            let before = records()
            try parent.ok(arguments + ["--shared-dir", shared])
            let new = records().subtracting(before)
            guard new.count == 1, let id = new.first else { throw TestFailure("expected one new record, got \(new)") }
            return id
        }

        func confirmation(_ machine: String, _ record: String) -> CurfewCore.Confirmation? {
            guard let data = FileManager.default.contents(atPath: "\(shared)/confirmations/\(machine)/\(record)") else { return nil }
            return try? CurfewCore.Confirmation.parse(Array(data)).confirmation
        }

        func cleanUp() {
            parent.cleanUp()
            for (_, runner) in agents { runner.cleanUp() }
        }
    }

    @Test func aChangeIsAppliedAndConfirmedByEveryAgent() throws {
        let family = try Family()
        defer { family.cleanUp() }
        let agents = try (0..<3).map { try family.start($0) }
        defer { for agent in agents { agent.killHard() } }
        let record = try family.change(["limit", "synckid", "1h"])
        let published = Date()
        try waitUntil(seconds: 2, "three applied confirmations") {
            family.agents.allSatisfy { family.confirmation($0.id, record)?.outcome == .applied }
        }
        let elapsed = Date().timeIntervalSince(published)
        #expect(elapsed < 2)
        for (id, _) in family.agents {
            let answer = try #require(family.confirmation(id, record))
            #expect(answer.machine == id && answer.user == "synckid" && answer.enforcedVersion == 2)
            #expect(FileManager.default.fileExists(atPath: "\(family.shared)/machines/\(id).json"))
        }
    }

    @Test func anAgentStoppedDuringThreeChangesCatchesUpOnStart() throws {
        let family = try Family()
        defer { family.cleanUp() }
        var agents = try (0..<3).map { try family.start($0) }
        defer { for agent in agents { agent.killHard() } }
        #expect(agents[2].stop() == 0)
        let changes = try ["1h", "2h", "3h"].map { try family.change(["limit", "synckid", $0]) }
        try waitUntil(seconds: 2, "the running agents' confirmations") {
            (0..<2).allSatisfy { family.confirmation(family.agents[$0].id, changes[2])?.outcome == .applied }
        }
        #expect(family.confirmation("pc-c", changes[2]) == nil)

        let started = Date()
        agents[2] = try family.start(2)
        try waitUntil(seconds: 2, "pc-c's confirmations") {
            family.confirmation("pc-c", changes[2])?.outcome == .applied
                && changes.dropLast().allSatisfy { family.confirmation("pc-c", $0)?.outcome == .superseded }
        }
        #expect(Date().timeIntervalSince(started) < 2)
        let last = try #require(family.confirmation("pc-c", changes[2]))
        #expect(last.enforcedVersion == 4)
        for earlier in changes.dropLast() {
            #expect(family.confirmation("pc-c", earlier)?.reason == "a newer version is in force")
        }
    }
}
