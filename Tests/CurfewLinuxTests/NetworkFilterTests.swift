import CLinux
import CurfewCore
import Foundation
import Glibc
import Testing

@testable import CurfewLinux

@Suite struct NetworkFilterTests {
    @Test func theRuleSetReplacesTheTableWholeAndNeverNamesRoot() throws {
        let rules = NetworkFilter.ruleset([
            NetworkFilter.Blocked(uid: 1002, user: "sis"), NetworkFilter.Blocked(uid: 0, user: "root"),
            NetworkFilter.Blocked(uid: 1001, user: "kid"),
        ])
        let text = String(decoding: rules.canonicalBytes, as: UTF8.self)
        #expect(!text.contains(#""right":0"#), "root never gets a rule: \(text)")
        guard case .object(let top) = rules, case .array(let commands)? = top["nftables"] else {
            Issue.record("no nftables list: \(text)")
            return
        }
        // add table, delete table, add table, add chain, loopback first, then one rule per uid, sorted.
        #expect(commands.count == 7)
        let verbs = commands.compactMap { command -> String? in
            guard case .object(let object) = command, let verb = object.keys.first, case .object(let inner)? = object[verb] else { return nil }
            return "\(verb) \(inner.keys.first ?? "")"
        }
        #expect(verbs == ["add table", "delete table", "add table", "add chain", "add rule", "add rule", "add rule"])
        #expect(text.contains(#""key":"oif""#) && text.contains(#""right":"lo""#))
        #expect(text.range(of: #""right":1001"#)!.lowerBound < text.range(of: #""right":1002"#)!.lowerBound)
        // Nobody: the table is removed (and never left empty).
        let none = NetworkFilter.ruleset([NetworkFilter.Blocked(uid: 0, user: "root")])
        guard case .object(let emptyTop) = none, case .array(let removal)? = emptyTop["nftables"] else {
            Issue.record("no nftables list")
            return
        }
        #expect(removal.count == 2)
    }

    /// Applied and read back with the real nft in a network namespace of the test's own.
    @Test(
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/nft")
                && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip"), "needs root, ip and nft"))
    func appliedAndReadBackInANamespace() throws {
        let namespace = "cfnft\(String(UUID().uuidString.prefix(6)).lowercased())"
        #expect(try run("/usr/sbin/ip", ["netns", "add", namespace]) == 0)
        defer { _ = try? run("/usr/sbin/ip", ["netns", "del", namespace]) }
        let filter = NetworkFilter(command: ["/usr/sbin/ip", "netns", "exec", namespace, "/usr/sbin/nft"])
        #expect(try filter.blockedUIDs() == [], "no table yet")
        // Another program's table with a rule of the same shape is not ours.
        let nft = ["netns", "exec", namespace, "/usr/sbin/nft"]
        #expect(try run("/usr/sbin/ip", nft + ["add", "table", "inet", "other"]) == 0)
        #expect(try run("/usr/sbin/ip", nft + ["add", "chain", "inet", "other", NetworkFilter.chain, "{ type filter hook output priority 0; }"]) == 0)
        #expect(try run("/usr/sbin/ip", nft + ["add", "rule", "inet", "other", NetworkFilter.chain, "meta", "skuid", "1003", "drop"]) == 0)
        #expect(try filter.blockedUIDs() == [], "only the curfew table counts")
        try filter.apply([NetworkFilter.Blocked(uid: 1001, user: "kid"), NetworkFilter.Blocked(uid: 1002, user: "sis")])
        #expect(try filter.blockedUIDs() == [1001, 1002])
        try filter.apply([NetworkFilter.Blocked(uid: 1002, user: "sis")])
        #expect(try filter.blockedUIDs() == [1002])
        try filter.apply([])
        #expect(try filter.blockedUIDs() == [])
        #expect(try run("/usr/sbin/ip", ["netns", "exec", namespace, "/usr/sbin/nft", "list", "table", "inet", "curfew"]) != 0, "no table left")
        // A failing nft changes nothing and says why.
        try filter.apply([NetworkFilter.Blocked(uid: 1001, user: "kid")])
        let broken = NetworkFilter(command: ["/usr/sbin/ip", "netns", "exec", namespace, "/usr/sbin/nft", "--no-such-option"])
        #expect(throws: LinuxError.self) { try broken.apply([]) }
        #expect(try filter.blockedUIDs() == [1001])
        try filter.apply([])
    }

    func run(_ path: String, _ arguments: [String]) throws -> Int32 {
        let pid = try spawnProcess(path, arguments, options: SpawnOptions(output: "/dev/null"))
        guard let status = reap(pid) else { return -1 }
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    }
}
