import CurfewCore
import CurfewSync
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

        func start(_ index: Int, launcher: [String] = []) throws -> AgentProcess {
            let agent = try AgentProcess(
                agents[index].runner, arguments: ["--shared-dir", shared, "--machine-id", agents[index].id, "--rescan", "1"],
                launcher: launcher)
            try enrol(index)
            return agent
        }

        /// The agents hold no parent key, so they cannot enrol themselves: once an agent has announced
        /// itself, the parent enrols it (the key it announced) unless it is enrolled already.
        func enrol(_ index: Int) throws {
            let id = agents[index].id
            guard !FileManager.default.fileExists(atPath: "\(shared)/enrolments/\(id).json") else { return }
            try waitUntil(seconds: 10, "\(id) announced") { FileManager.default.fileExists(atPath: "\(shared)/machines/\(id).json") }
            let enrolled = try parent.ok(["sync", "enrol", id, "--yes", "--shared-dir", shared])
            #expect(enrolled.stdout.contains("enrolled computer \(id) with parent key "), "\(enrolled)")
            // The fingerprint shown is the one `curfew key show --machine` gives on that computer.
            let shown = try agents[index].runner.ok(["key", "show", "--machine"]).stdout
            let fingerprint = try #require(shown.split(separator: "\n").first { $0.hasPrefix("fingerprint: ") }, "\(shown)")
            #expect(enrolled.stdout.contains("  \(fingerprint)\n"), "\(enrolled) / \(shown)")
        }

        func records() -> Set<String> {
            Set(((try? FileManager.default.contentsOfDirectory(atPath: "\(shared)/records")) ?? []).filter { $0.hasSuffix(".json") })
        }

        /// Runs a parent's command and returns the record it published.
        func change(_ arguments: [String]) throws -> String {
            let before = records()
            try parent.ok(arguments + ["--shared-dir", shared, "--no-wait"])
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

    /// Editing commands wait for every computer that announced itself and say what each did; one
    /// that does not answer in time makes the command exit 75. `curfew sync status` shows the same.
    @Test func editingCommandsWaitForEveryComputerAndSayWhatEachDid() throws {
        let family = try Family()
        defer { family.cleanUp() }
        var agents = try (0..<3).map { try family.start($0) }
        defer { for agent in agents { agent.killHard() } }
        try waitUntil(seconds: 3, "three machines announced") {
            ((try? FileManager.default.contentsOfDirectory(atPath: "\(family.shared)/machines")) ?? []).count == 3
        }
        let all = try family.parent.run(["limit", "synckid", "1h", "--shared-dir", family.shared])
        #expect(all.status == 0, "\(all)")
        let lines = all.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("published version 2 as record ") }, "\(all.stdout)")
        #expect(lines.filter { $0.contains(": applied v2 in ") && $0.hasSuffix(" s") }.count == 3, "\(all.stdout)")

        #expect(agents[2].stop() == 0)
        let partial = try family.parent.run(["limit", "synckid", "2h", "--shared-dir", family.shared, "--wait", "1"])
        #expect(partial.status == 75, "\(partial)")
        let partialLines = partial.stdout.split(separator: "\n").map(String.init)
        #expect(partialLines.filter { $0.contains(": applied v3 in ") }.count == 2, "\(partial.stdout)")
        #expect(partialLines.filter { $0.hasSuffix(": not yet") }.count == 1, "\(partial.stdout)")
        #expect(partial.stderr.hasPrefix("curfew: not confirmed within 1 s by "), "\(partial.stderr)")
        #expect(partial.stderr.hasSuffix("(version 3 is published; they apply it when they next read the shared directory)\n"))

        let status = try family.parent.ok(["sync", "status", "--json", "--shared-dir", family.shared]).stdout
        guard let computers = try JSONSerialization.jsonObject(with: Data(status.utf8)) as? [[String: Any]] else {
            throw TestFailure("bad sync status: \(status)")
        }
        #expect(computers.count == 3, "\(status)")
        for computer in computers {
            let enforced = computer["enforced"] as? [String: Int]
            let pending = computer["pending"] as? [String] ?? []
            if computer["machine"] as? String == "pc-c" {
                #expect(enforced?["synckid"] == 2 && pending.count == 1, "\(computer)")
            } else {
                #expect(enforced?["synckid"] == 3 && pending.isEmpty, "\(computer)")
            }
        }
        // The stopped computer catches up when it starts.
        agents[2] = try family.start(2)
        let after = try family.parent.ok(["sync", "status", "--shared-dir", family.shared]).stdout
        #expect(after.contains("pc-c"), "\(after)")

        // A removal leaves no version in force: each computer says the child is no longer managed.
        let removed = try family.parent.ok(["user", "remove", "synckid", "--yes", "--shared-dir", family.shared]).stdout
        let removedLines = removed.split(separator: "\n").map(String.init)
        #expect(removedLines.filter { $0.contains(": applied (no longer managed) in ") }.count == 3, "\(removed)")
        #expect(!removed.contains("?"), "\(removed)")
    }

    /// The default wait covers the local Syncthing's watcher delay on folder `curfew` (read from its
    /// config.xml) on the way out and back: twice the delay plus 3 s, never under 5 s.
    @Test func theDefaultWaitCoversSyncthingsWatcherDelay() throws {
        let family = try Family()
        defer { family.cleanUp() }
        let agent = try family.start(0)
        #expect(agent.stop() == 0)
        let home = family.parent.root.appendingPathComponent("syncthing").path
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        func configure(delay: Int) throws {
            try """
                <configuration version="36">
                    <folder id="curfew" path="\(family.shared)" type="sendreceive" rescanIntervalS="3600" fsWatcherEnabled="true" fsWatcherDelayS="\(delay)" ignorePerms="false"></folder>
                    <gui enabled="true" tls="false"><address>127.0.0.1:1</address><apikey>k</apikey></gui>
                </configuration>
                """.write(toFile: "\(home)/config.xml", atomically: true, encoding: .utf8)
        }
        try configure(delay: 2)
        let started = Date()
        let slow = try family.parent.run(
            ["limit", "synckid", "1h", "--shared-dir", family.shared], environment: ["CURFEW_SYNCTHING_HOME": home])
        #expect(slow.status == 75, "\(slow)")
        #expect(slow.stderr.hasPrefix("curfew: not confirmed within 7 s by "), "\(slow)")
        #expect(Date().timeIntervalSince(started) >= 7)
        try configure(delay: 1)
        let quick = try family.parent.run(
            ["limit", "synckid", "2h", "--shared-dir", family.shared], environment: ["CURFEW_SYNCTHING_HOME": home])
        #expect(quick.stderr.hasPrefix("curfew: not confirmed within 5 s by "), "\(quick)")
        // --wait still wins.
        let asked = try family.parent.run(
            ["limit", "synckid", "3h", "--shared-dir", family.shared, "--wait", "1"], environment: ["CURFEW_SYNCTHING_HOME": home])
        #expect(asked.stderr.hasPrefix("curfew: not confirmed within 1 s by "), "\(asked)")
    }

    /// `sync status` warns about two computers under one machine id, a synced folder a child could
    /// reach, and a Syncthing delay longer than the usual wait; `sync prune` asks, then removes.
    @Test func syncStatusWarnsAndPruneRemovesWhatItShowed() throws {
        let family = try Family()
        defer { family.cleanUp() }
        let agent = try family.start(0)
        let record = try family.change(["limit", "synckid", "1h"])
        try waitUntil(seconds: 5, "pc-a's confirmation") { family.confirmation("pc-a", record)?.outcome == .applied }
        #expect(agent.stop() == 0)
        // A clone: another computer with pc-a's machine id answers the first record with its own key.
        let clone = MachineIdentity(id: "pc-a", host: "clone", key: SigningKey())
        let first = try #require(family.records().subtracting([record]).first)
        try ConfirmationStore(shared: SharedDirectory(path: family.shared), machine: clone).write([
            CurfewCore.Confirmation(
                machine: "pc-a", host: "clone", key: clone.key.id, record: first, user: "synckid", outcome: .superseded,
                reason: "x", enforcedVersion: 2, time: 1_795_000_000)
        ]).failure.map { throw $0 }
        // The parent's shared directory is a link to a folder with a loose mode, synced with a 10 s delay.
        let home = family.parent.root.appendingPathComponent("syncthing").path
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        try """
            <configuration version="36">
                <folder id="curfew" path="\(family.shared)" type="sendreceive" rescanIntervalS="3600" fsWatcherEnabled="true" fsWatcherDelayS="10" ignorePerms="false"></folder>
                <gui enabled="true" tls="false"><address>127.0.0.1:1</address><apikey>k</apikey></gui>
            </configuration>
            """.write(toFile: "\(home)/config.xml", atomically: true, encoding: .utf8)
        chmod(family.shared, 0o755)
        let status = try family.parent.run(["sync", "status", "--shared-dir", family.shared], environment: ["CURFEW_SYNCTHING_HOME": home])
        #expect(status.status == 0, "\(status)")
        let agentKey = try #require(SharedDirectory(path: family.shared).announcement("pc-a")?.1.id)
        #expect(
            status.stderr.contains(
                "curfew: warning: two computers write as machine id pc-a (confirmations signed by keys \([agentKey, clone.key.id].sorted().joined(separator: ", "))): a clone?"),
            "\(status)")
        #expect(
            status.stderr.contains(
                "curfew: warning: the shared folder \(family.shared) has mode 0755, not 0700 (Syncthing does not sync the folder's mode: chmod 0700 \(family.shared))\n"),
            "\(status)")
        #expect(
            status.stderr.contains(
                "curfew: warning: Syncthing's watcher delay on folder curfew is 10 s, longer than a 5 s wait allows: editing commands wait 23 s by default (curfew sync setup --syncthing sets 1 s)\n"),
            "\(status)")

        // Prune: the confirmation of a deleted record, a day old, goes; asked first.
        try FileManager.default.removeItem(atPath: "\(family.shared)/records/\(first)")
        let stale = "\(family.shared)/confirmations/pc-a/\(first)"
        var times = [timespec(tv_sec: time(nil) - 2 * 86400, tv_nsec: 0), timespec(tv_sec: time(nil) - 2 * 86400, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, stale, &times, 0) == 0)
        let refused = try family.parent.run(["sync", "prune", "--shared-dir", family.shared], stdin: "n\n")
        #expect(refused.status == 1 && refused.stderr.contains("not confirmed; nothing removed"), "\(refused)")
        #expect(refused.stdout == "\(stale): confirms record \(first.prefix(12)), which is no longer in records/\n", "\(refused)")
        #expect(FileManager.default.fileExists(atPath: stale))
        let pruned = try family.parent.run(["sync", "prune", "--yes", "--shared-dir", family.shared])
        #expect(pruned.status == 0 && pruned.stdout.hasSuffix("removed 1 of 1 files\n"), "\(pruned)")
        #expect(!FileManager.default.fileExists(atPath: stale) && family.confirmation("pc-a", record) != nil)
        #expect(try family.parent.ok(["sync", "prune", "--shared-dir", family.shared]).stdout == "nothing to prune in \(family.shared)\n")
    }

    /// The agent runs in a mount namespace of its own, where the test turns `confirmations/` into a
    /// read-only bind mount (root ignores file modes, not a read-only mount) or a full 64 KiB tmpfs.
    /// A change still reaches enforcement at once; its confirmation waits, and is written at a
    /// rescan once the directory takes files again.
    @Test(
        .enabled(if: getuid() == 0, "needs root: a mount namespace and mounts"),
        arguments: ["read-only", "full"])
    func anUnwritableSharedDirectoryHoldsUpConfirmationsButNotEnforcement(_ trouble: String) throws {
        let family = try Family()
        defer { family.cleanUp() }
        let agent = try family.start(0, launcher: ["/usr/bin/unshare", "--mount", "--propagation", "private", "--"])
        defer { agent.killHard() }
        let first = try family.change(["limit", "synckid", "1h"])
        try waitUntil(seconds: 3, "the first confirmation") { family.confirmation("pc-a", first)?.outcome == .applied }
        let directory = "\(family.shared)/confirmations"
        /// Runs a shell command in the agent's mount namespace; its exit status.
        func inAgentsNamespace(_ command: String) throws -> Int32 {
            try CurfewRunner.runTool("/usr/bin/nsenter", ["-t", "\(agent.pid)", "-m", "--", "/bin/sh", "-c", command])
        }
        // What the agent sees (the test's own view of the directory is untouched).
        let agentsView = "/proc/\(agent.pid)/root\(directory)/pc-a"
        func confirmation(_ record: String) -> CurfewCore.Confirmation? {
            guard let data = FileManager.default.contents(atPath: "\(agentsView)/\(record)") else { return nil }
            return try? CurfewCore.Confirmation.parse(Array(data)).confirmation
        }
        if trouble == "read-only" {
            #expect(try inAgentsNamespace("mount --bind '\(directory)' '\(directory)' && mount -o remount,bind,ro '\(directory)'") == 0)
        } else {
            // The tmpfs hides what was written before; fill it, keeping the (empty) machine directory.
            #expect(
                try inAgentsNamespace(
                    "mount -t tmpfs -o size=64k,mode=755 curfew-full '\(directory)' && mkdir '\(directory)/pc-a' && "
                        + "{ dd if=/dev/zero of='\(directory)/filler' bs=4k 2>/dev/null; true; }") == 0)
        }
        let probe = "\(directory)/pc-a/.probe"
        #expect(
            try inAgentsNamespace("dd if=/dev/zero of='\(probe)' bs=1k count=1 2>/dev/null; failed=$?; rm -f '\(probe)'; exit $failed") != 0,
            "the agent's confirmations directory still takes files")

        let second = try family.change(["limit", "synckid", "3h"])
        try waitUntil(seconds: 3, "the agent enforcing version 3") {
            let status = try? family.agents[0].runner.run(["status", "synckid", "--json", "--socket", agent.socketPath])
            return status?.stdout.contains("\"limitMinutes\": 180,") == true
        }
        // Two rescans later: still no answer, and the agent says why and runs on.
        try waitUntil(seconds: 5, "the agent's warning") {
            agent.log.components(separatedBy: "cannot write confirmations; they stay pending").count >= 3
        }
        #expect(confirmation(second) == nil)
        #expect(family.confirmation("pc-a", second) == nil)
        #expect(kill(agent.pid, 0) == 0)
        let status = try family.agents[0].runner.ok(["status", "synckid", "--json", "--socket", agent.socketPath]).stdout
        #expect(status.contains("\"limitMinutes\": 180,"), "\(status)")

        if trouble == "read-only" {
            #expect(try inAgentsNamespace("mount -o remount,bind,rw '\(directory)'") == 0)
        } else {
            #expect(try inAgentsNamespace("rm '\(directory)/filler'") == 0)
        }
        try waitUntil(seconds: 3, "the confirmations written once the directory takes files") {
            confirmation(second)?.outcome == .applied && confirmation(first)?.outcome == .superseded
        }
        #expect(confirmation(second)?.enforcedVersion == 3)
        #expect(confirmation(first)?.reason == "a newer version is in force")
        #expect(kill(agent.pid, 0) == 0)
    }
}
