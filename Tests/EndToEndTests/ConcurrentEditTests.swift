import CurfewCore
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Two parents (own state directories and keys, each trusting the other) edit the same version of a
/// user at once; real agents receive the three record files in every possible order, one file at a
/// time as a sync tool delivers them, and all end enforcing the same merged policy.
@Suite(.serialized) struct ConcurrentEditTests {
    /// Parents `a` and `b` under one runner, each with a shared directory of its own.
    struct Parents {
        let runner: CurfewRunner
        var root: String { runner.root.path }
        func state(_ who: String) -> String { "\(root)/\(who)" }
        func shared(_ who: String) -> String { "\(root)/shared-\(who)" }

        init() throws {
            runner = try CurfewRunner()
            for who in ["a", "b"] { try ok(who, ["init"]) }
            try ok("a", ["key", "export", "--output", "\(root)/a.pub"])
            try ok("b", ["key", "export", "--output", "\(root)/b.pub"])
            try ok("a", ["key", "trust", "\(root)/b.pub"])
            try ok("b", ["key", "trust", "\(root)/a.pub"])
        }

        @discardableResult
        func ok(_ who: String, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> CurfewRunner.Result {
            let result = try runner.run(arguments + ["--shared-dir", shared(who)], stateDir: state(who))
            #expect(result.status == 0, "\(who): curfew \(arguments.joined(separator: " ")): \(result)", sourceLocation: sourceLocation)
            return result
        }

        func records(_ who: String) throws -> Set<String> {
            Set(try FileManager.default.contentsOfDirectory(atPath: "\(shared(who))/records").filter { $0.hasSuffix(".json") })
        }

        /// `who` imports `policy` (JSON) without waiting; the record it published.
        func edit(_ who: String, _ policy: String) throws -> String {
            let file = "\(root)/\(who)-edit.json"
            try Data(policy.utf8).write(to: URL(fileURLWithPath: file))
            let before = try records(who)
            try ok(who, ["policy", "import", file, "--no-wait"])
            let new = try records(who).subtracting(before)
            guard new.count == 1, let id = new.first else { throw TestFailure("expected one new record from \(who), got \(new)") }
            return "\(shared(who))/records/\(id)"
        }

        /// The parents' keys, as an agent's `keys/trusted/` holds them.
        var trustedKeys: [String] {
            let directory = "\(state("a"))/keys/trusted"
            return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".pub") }
                .map { "\(directory)/\($0)" }
        }
    }

    /// One computer: its own state directory and machine id, on a shared directory it may share.
    struct Computer {
        let id: String
        let runner: CurfewRunner
        let shared: String
        let agent: AgentProcess

        init(id: String, shared: String, trusting keys: [String]) throws {
            self.id = id
            self.shared = shared
            let runner = try CurfewRunner()
            self.runner = runner
            let trusted = "\(runner.stateDir)/keys/trusted"
            try FileManager.default.createDirectory(atPath: trusted, withIntermediateDirectories: true)
            for key in keys {
                try FileManager.default.copyItem(atPath: key, toPath: "\(trusted)/\(URL(fileURLWithPath: key).lastPathComponent)")
            }
            agent = try AgentProcess(runner, arguments: ["--shared-dir", shared, "--machine-id", id, "--rescan", "1"])
        }

        func confirmation(_ record: String) -> CurfewCore.Confirmation? {
            guard let data = FileManager.default.contents(atPath: "\(shared)/confirmations/\(id)/\(record)") else { return nil }
            return try? CurfewCore.Confirmation.parse(Array(data)).confirmation
        }

        /// The policy the agent keeps as enforced (version and policy, canonical JSON), from its database.
        func enforcedPolicy() throws -> String {
            try CurfewRunner.capture(
                "/usr/bin/sqlite3",
                ["-readonly", "\(runner.stateDir)/curfew.db", "SELECT value FROM agent_state WHERE key = 'last-good-policy:synckid'"]
            ).trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func stop() {
            agent.killHard()
            runner.cleanUp()
        }
    }

    /// Copies `file` into `shared`'s records/ the way Syncthing does: a temporary name, then a rename.
    static func deliver(_ file: String, to shared: String) throws {
        let name = URL(fileURLWithPath: file).lastPathComponent
        let temporary = "\(shared)/records/.syncthing.\(name).tmp"
        try FileManager.default.copyItem(atPath: file, toPath: temporary)
        guard rename(temporary, "\(shared)/records/\(name)") == 0 else { throw TestFailure("rename \(temporary): errno \(errno)") }
    }

    /// a and b both edit version 1 (b a second later, so b's record is the later one): a sets the
    /// limit to 1h and the lockout to lock, b the limit to 3h and bedtime to 21:30-07:00. For each
    /// of the 6 orders of the 3 record files, three agents on one shared directory get the files one
    /// at a time, each file answered by all three before the next arrives. Every one of the 18
    /// agents ends enforcing version 2 with a's lockout, b's bedtime and b's (later) limit, and
    /// confirms both edits as `merged` with `dailyLimitMinutes` in conflict.
    @Test func concurrentEditsEndInTheSamePolicyOnEveryAgentWhateverTheOrder() throws {
        let parents = try Parents()
        defer { parents.runner.cleanUp() }
        try parents.ok("a", ["user", "add", "synckid"])
        let baseID = try #require(try parents.records("a").first)
        let base = "\(parents.shared("a"))/records/\(baseID)"
        try FileManager.default.copyItem(atPath: base, toPath: "\(parents.shared("b"))/records/\(baseID)")
        let fromA = try parents.edit("a", #"{"user": "synckid", "dailyLimitMinutes": 60, "lockout": "lock"}"#)
        // Record times are whole seconds.
        Thread.sleep(forTimeInterval: 1.1)
        let fromB = try parents.edit(
            "b", #"{"user": "synckid", "dailyLimitMinutes": 180, "bedtime": {"start": "21:30", "end": "07:00"}}"#)
        let files = [base, fromA, fromB]
        let names = files.map { URL(fileURLWithPath: $0).lastPathComponent }
        let keys = parents.trustedKeys
        #expect(keys.count == 2)

        let orders = allOrders(Array(files.indices))
        #expect(orders.count == 6)
        var computers: [[Computer]] = []
        defer { for group in computers { for computer in group { computer.stop() } } }
        for index in orders.indices {
            let shared = "\(parents.root)/order-\(index)"
            try FileManager.default.createDirectory(atPath: "\(shared)/records", withIntermediateDirectories: true)
            computers.append(try ["pc-a", "pc-b", "pc-c"].map { try Computer(id: $0, shared: shared, trusting: keys) })
        }
        for step in files.indices {
            for (index, order) in orders.enumerated() { try Self.deliver(files[order[step]], to: computers[index][0].shared) }
            for (index, order) in orders.enumerated() {
                let name = names[order[step]]
                try waitUntil(seconds: 10, "order \(order): every agent's answer to file \(order[step])") {
                    computers[index].allSatisfy { $0.confirmation(name) != nil }
                }
            }
        }
        let all = computers.flatMap { $0 }
        try waitUntil(seconds: 10, "every agent's final confirmations") {
            all.allSatisfy { computer in
                computer.confirmation(names[0])?.outcome == .superseded && computer.confirmation(names[1])?.outcome == .merged
                    && computer.confirmation(names[2])?.outcome == .merged
            }
        }
        for (index, group) in computers.enumerated() {
            for computer in group {
                let context = "order \(orders[index]), \(computer.id)"
                for name in names.dropFirst() {
                    let answer = try #require(computer.confirmation(name), "\(context)")
                    #expect(answer.conflicts == ["dailyLimitMinutes"], "\(context): \(answer)")
                    #expect(answer.reason == "merged with a concurrent edit of version 1", "\(context): \(answer)")
                    #expect(answer.enforcedVersion == 2 && answer.user == "synckid", "\(context): \(answer)")
                }
                let superseded = try #require(computer.confirmation(names[0]), "\(context)")
                #expect(superseded.reason == "a newer version is in force" && superseded.enforcedVersion == 2, "\(context)")
                let status = try computer.runner.ok(["status", "synckid", "--json", "--socket", computer.agent.socketPath]).stdout
                #expect(status.contains("\"limitMinutes\": 180,"), "\(context): \(status)")
            }
        }
        let enforced = try all.map { try $0.enforcedPolicy() }
        #expect(Set(enforced).count == 1, "\(enforced)")
        let kept = try #require(
            try JSONSerialization.jsonObject(with: Data(enforced[0].utf8)) as? [String: Any], "\(enforced[0])")
        #expect(kept["version"] as? Int == 2)
        let policy = try #require(kept["policy"] as? [String: Any], "\(kept)")
        #expect(policy["dailyLimitMinutes"] as? Int == 180, "\(policy)")
        #expect(policy["lockout"] as? String == "lock", "\(policy)")
        #expect(policy["bedtime"] as? [String: String] == ["start": "21:30", "end": "07:00"], "\(policy)")
        #expect(policy["warnMinutes"] as? [Int] == [15, 5, 1], "\(policy)")
        // The parents' own CLI folds the same policy from a shared directory the agents used.
        let shown = try parents.runner.run(
            ["policy", "show", "synckid", "--json", "--shared-dir", computers[5][0].shared], stateDir: parents.state("b"))
        #expect(shown.status == 0, "\(shown)")
        let shownPolicy = try #require(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? NSDictionary)
        #expect(shownPolicy == policy as NSDictionary, "\(shown.stdout)")
    }
}

/// Every ordering of a short list.
private func allOrders<T>(_ items: [T]) -> [[T]] {
    guard items.count > 1 else { return [items] }
    return items.indices.flatMap { index in
        var rest = items
        let item = rest.remove(at: index)
        return allOrders(rest).map { [item] + $0 }
    }
}
