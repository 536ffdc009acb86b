import CurfewCore
import CurfewSync
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `curfew sync setup --syncthing`, `curfew pair` and `curfew join` with real Syncthing instances
/// (Debian's `syncthing`), each with its own home, on the loopback.
@Suite(
    .serialized,
    .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/syncthing"), "needs root and syncthing"))
struct SyncthingTests {
    /// A refused setup changes nothing: not in the state directory, not the folder, not systemd's.
    @Test func setupRefusesWithoutARootSyncthingAndChangesNothing() throws {
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        try runner.ok(["init"])
        let folder = runner.root.appendingPathComponent("folder").path
        let systemd = runner.root.appendingPathComponent("systemd").path
        let before = try runner.snapshot()
        let home = runner.root.appendingPathComponent("no-such-home").path
        let refused = try runner.run(
            ["sync", "setup", "--syncthing", "--folder", folder, "--syncthing-home", home], environment: ["CURFEW_SYSTEMD_DIR": systemd])
        #expect(refused.status == 69, "\(refused)")
        // Which one depends on whether another Syncthing runs as root on this machine just now.
        #expect(
            refused.stderr == "curfew: no Syncthing runs as root with home \(home) (syncthing -home \(home)); nothing changed\n"
                || refused.stderr == "curfew: Syncthing is not running as root (systemctl enable --now syncthing@root); nothing changed\n",
            "\(refused)")
        let relative = try runner.run(["sync", "setup", "--syncthing", "--folder", "relative/dir"])
        #expect(relative.status == 64 && relative.stderr == "curfew: the folder must be an absolute path, got \"relative/dir\"\n", "\(relative)")
        let noTool = try runner.run(["sync", "setup", "--folder", folder])
        #expect(noTool.status == 64 && noTool.stderr == "curfew: sync setup needs --syncthing (the only sync tool it sets up)\n")
        #expect(try runner.snapshot() == before)
    }

    /// One computer: a state directory, a Syncthing instance with a home of its own, a synced folder.
    final class Computer {
        let name: String
        let machineID: String
        let runner: CurfewRunner
        let home: String
        let folder: String
        let guiPort: UInt16
        let listenPort: UInt16
        var syncthing: Int32 = 0
        var agent: AgentProcess?
        var deviceID = ""

        init(_ name: String) throws {
            self.name = name
            machineID = "pc-\(name)"
            runner = try CurfewRunner()
            home = runner.root.appendingPathComponent("syncthing").path
            folder = runner.root.appendingPathComponent("folder").path
            guiPort = try freePort()
            listenPort = try freePort()
            #expect(try CurfewRunner.runTool("/usr/bin/syncthing", ["-generate=\(home)"]) == 0)
            // On the loopback only: no discovery, relays, NAT traversal, usage reporting or upgrades.
            var config = try String(contentsOfFile: "\(home)/config.xml", encoding: .utf8)
            // Its listen addresses: "default", or a random port when 22000 was taken at -generate.
            let listen = try NSRegularExpression(pattern: "(\\s*<listenAddress>[^<]*</listenAddress>)+")
            config = listen.stringByReplacingMatches(
                in: config, range: NSRange(config.startIndex..., in: config),
                withTemplate: "\n        <listenAddress>tcp://127.0.0.1:\(listenPort)</listenAddress>")
            for (from, to) in [
                ("<globalAnnounceEnabled>true</globalAnnounceEnabled>", "<globalAnnounceEnabled>false</globalAnnounceEnabled>"),
                ("<localAnnounceEnabled>true</localAnnounceEnabled>", "<localAnnounceEnabled>false</localAnnounceEnabled>"),
                ("<relaysEnabled>true</relaysEnabled>", "<relaysEnabled>false</relaysEnabled>"),
                ("<natEnabled>true</natEnabled>", "<natEnabled>false</natEnabled>"),
                ("<urAccepted>0</urAccepted>", "<urAccepted>-1</urAccepted>"),
                ("<autoUpgradeIntervalH>12</autoUpgradeIntervalH>", "<autoUpgradeIntervalH>0</autoUpgradeIntervalH>"),
                ("<startBrowser>true</startBrowser>", "<startBrowser>false</startBrowser>"),
            ] {
                #expect(config.contains(from), "config.xml of syncthing -generate has no \(from)")
                config = config.replacingOccurrences(of: from, with: to)
            }
            try config.write(toFile: "\(home)/config.xml", atomically: true, encoding: .utf8)
            try runner.ok(["init"])
            try startSyncthing()
        }

        func startSyncthing() throws {
            syncthing = try spawnLogged(
                "/usr/bin/syncthing", ["-home", home, "-no-browser", "-no-restart", "-gui-address", "127.0.0.1:\(guiPort)"],
                environment: ["HOME": runner.root.path, "STNOUPGRADE": "1", "PATH": "/usr/bin:/bin"],
                log: runner.root.appendingPathComponent("syncthing.log").path)
            var status: JSONValue?
            try waitUntil(seconds: 30, "\(name)'s Syncthing answers") {
                status = try? api().call("GET", "/rest/system/status")
                return status != nil
            }
            guard case .object(let object)? = status, case .string(let id)? = object["myID"] else { throw TestFailure("no myID") }
            deviceID = id
        }

        func stopSyncthing() {
            kill(syncthing, SIGKILL)
            _ = waitForExit(syncthing)
        }

        func api() throws -> SyncthingAPI {
            var config = try #require(try SyncthingConfig.load(home: home)).config
            config.guiAddress = "127.0.0.1:\(guiPort)"
            return try SyncthingAPI(config: config)
        }

        /// What this computer's parent runs: its state directory, its Syncthing, its machine id.
        var environment: [String: String] {
            ["CURFEW_SYNCTHING_HOME": home, "CURFEW_MACHINE_ID": machineID, "CURFEW_SYSTEMD_DIR": runner.root.appendingPathComponent("systemd").path]
        }

        func curfew(_ arguments: [String]) throws -> CurfewRunner.Result { try runner.run(arguments, environment: environment) }

        func startAgent() throws {
            agent = try AgentProcess(runner, arguments: ["--machine-id", machineID, "--rescan", "1", "--usage-interval", "1"])
        }

        func stopAgent() {
            agent?.killHard()
            agent = nil
        }

        func confirmation(of machine: String, _ record: String) -> CurfewCore.Confirmation? {
            guard let data = FileManager.default.contents(atPath: "\(folder)/confirmations/\(machine)/\(record)") else { return nil }
            return try? CurfewCore.Confirmation.parse(Array(data)).confirmation
        }

        func records() -> Set<String> {
            Set(((try? FileManager.default.contentsOfDirectory(atPath: "\(folder)/records")) ?? []).filter { $0.hasSuffix(".json") })
        }

        func cleanUp() {
            stopAgent()
            stopSyncthing()
            runner.cleanUp()
        }
    }

    /// Two computers, each with its own Syncthing (on 127.0.0.1, introduced to each other through the
    /// REST API) and its own agent, set up by `curfew sync setup --syncthing` and paired by `curfew pair`
    /// / `curfew join`. A change on either side is confirmed by the other within the default wait;
    /// concurrent edits made while one side's Syncthing is paused converge; a computer that was off
    /// catches up.
    @Test func twoComputersSyncThroughRealSyncthing() throws {
        let x = try Computer("x")
        defer { x.cleanUp() }
        let y = try Computer("y")
        defer { y.cleanUp() }
        for (computer, other) in [(x, y), (y, x)] {
            // The generated default folder is not wanted.
            _ = try computer.api().request("DELETE", "/rest/config/folders/default")
            try computer.api().call(
                "POST", "/rest/config/devices",
                body: .object(
                    JSONObject([
                        ("deviceID", .string(other.deviceID)), ("name", .string(other.name)),
                        ("addresses", .array([.string("tcp://127.0.0.1:\(other.listenPort)")])),
                    ])))
            let setup = try computer.curfew(["sync", "setup", "--syncthing", "--folder", computer.folder])
            #expect(setup.status == 0, "\(setup)")
            #expect(setup.stdout.contains("added folder curfew (\(computer.folder)) to Syncthing: send-receive, watcher on with a 1 s delay"), "\(setup)")
            #expect(setup.stdout.contains("enrolled this computer (\(computer.machineID)) with parent key "), "\(setup)")
            #expect(setup.stdout.contains("this device is \(computer.deviceID)"), "\(setup)")
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: computer.runner.sharedDir) == computer.folder)
            var info = stat()
            #expect(stat(computer.folder, &info) == 0 && info.st_uid == 0 && info.st_mode & 0o777 == 0o700)
            #expect(FileManager.default.fileExists(atPath: "\(computer.folder)/.stfolder"))
            let dropIn = try String(
                contentsOfFile: computer.runner.root.appendingPathComponent("systemd/curfewd.service.d/curfew-syncthing.conf").path, encoding: .utf8)
            #expect(dropIn.contains("[Service]\nReadWritePaths=\(computer.folder)\n"))
            let folder = try #require(try SyncthingConfig.load(home: computer.home)?.config.folder())
            #expect(folder.path == computer.folder && folder.watcherEnabled && folder.watcherDelaySeconds == 1 && !folder.ignorePermissions)
        }
        // What remains after setup: sharing folder curfew with the other device (the parent does it in
        // Syncthing's GUI; the test through the REST API).
        for computer in [x, y] {
            try computer.api().call(
                "PATCH", "/rest/config/folders/curfew",
                body: .object(
                    JSONObject([
                        ("devices", .array([x, y].map { .object(JSONObject([("deviceID", .string($0.deviceID))])) }))
                    ])))
        }
        try waitUntil(seconds: 60, "each folder holds the other's enrolment") {
            FileManager.default.fileExists(atPath: "\(x.folder)/enrolments/pc-y.json")
                && FileManager.default.fileExists(atPath: "\(y.folder)/enrolments/pc-x.json")
        }

        // Pairing: x offers, y joins with the code; each trusts the other's parent key.
        let pairLog = x.runner.root.appendingPathComponent("pair.log").path
        var pairEnvironment = ProcessInfo.processInfo.environment
        pairEnvironment["CURFEW_STATE_DIR"] = x.runner.stateDir
        let pair = try spawnLogged(
            CurfewRunner.binDirectory.appendingPathComponent("curfew").path, ["pair", "--yes", "--timeout", "120"],
            environment: pairEnvironment, log: pairLog)
        var code = ""
        try waitUntil(seconds: 10, "the pairing code") {
            let text = (try? String(contentsOfFile: pairLog, encoding: .utf8)) ?? ""
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("pairing code: ") }) else { return false }
            code = String(line.dropFirst("pairing code: ".count))
            return true
        }
        let join = try y.curfew(["join", code, "--yes", "--timeout", "60"])
        #expect(join.status == 0, "\(join)")
        #expect(waitForExit(pair) == 0, "\((try? String(contentsOfFile: pairLog, encoding: .utf8)) ?? "")")
        let pairText = (try? String(contentsOfFile: pairLog, encoding: .utf8)) ?? ""
        let keyOf = { (computer: Computer) throws -> String in
            try String(#require(try computer.curfew(["key", "show"]).stdout.split(separator: "\n").first).dropFirst("key id: ".count))
        }
        let (keyX, keyY) = (try keyOf(x), try keyOf(y))
        #expect(join.stdout.contains("offers parent key \(keyX)") && join.stdout.contains("trusted parent key \(keyX)"), "\(join)")
        // sync setup enrolled y already: join finds nothing to add.
        #expect(!join.stdout.contains("enrolled this computer"), "\(join)")
        #expect(pairText.contains("answered with parent key \(keyY)") && pairText.contains("trusted parent key \(keyY)"), "\(pairText)")
        #expect(FileManager.default.fileExists(atPath: "\(x.runner.stateDir)/keys/trusted/\(keyY).pub"))
        #expect(FileManager.default.fileExists(atPath: "\(y.runner.stateDir)/keys/trusted/\(keyX).pub"))

        try x.startAgent()
        try y.startAgent()
        // A change on x, confirmed by both agents within the default wait (1 s watcher: 5 s).
        func edit(_ computer: Computer, _ arguments: [String], version: Int) throws -> String {
            let before = computer.records()
            let result = try computer.curfew(arguments)
            #expect(result.status == 0, "\(computer.name): curfew \(arguments): \(result)")
            #expect(result.stdout.components(separatedBy: ": applied v\(version) in ").count - 1 == 2, "\(result)")
            let new = computer.records().subtracting(before)
            return try #require(new.first)
        }
        _ = try edit(x, ["user", "add", "synckid"], version: 1)
        // ... and on y, based on what came from x.
        let fromY = try edit(y, ["limit", "synckid", "1h"], version: 2)
        #expect(x.confirmation(of: "pc-x", fromY)?.outcome == .applied || y.confirmation(of: "pc-x", fromY)?.outcome == .applied)

        // Concurrent edits while x's Syncthing is paused: both made from version 2.
        try x.api().call("POST", "/rest/system/pause")
        let limitOnX = try x.curfew(["limit", "synckid", "2h", "--no-wait"])
        #expect(limitOnX.status == 0, "\(limitOnX)")
        let bedtimeOnY = try y.curfew(["bedtime", "synckid", "21:30-07:00", "--no-wait"])
        #expect(bedtimeOnY.status == 0, "\(bedtimeOnY)")
        try x.api().call("POST", "/rest/system/resume")
        /// The policy the agent enforces (canonical JSON), from its database.
        func enforced(_ computer: Computer) -> String {
            ((try? CurfewRunner.capture(
                "/usr/bin/sqlite3",
                ["-readonly", "\(computer.runner.stateDir)/curfew.db", "SELECT value FROM agent_state WHERE key = 'last-good-policy:synckid'"]
            )) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        }
        try waitUntil(seconds: 60, "both agents enforce the merged policy") {
            [x, y].allSatisfy { enforced($0).contains("\"dailyLimitMinutes\":120") && enforced($0).contains("\"start\":\"21:30\"") }
        }
        #expect(enforced(x) == enforced(y))
        try waitUntil(seconds: 30, "both folders hold the same records") { x.records() == y.records() && x.records().count == 4 }
        for computer in [x, y] {
            let shown = try computer.curfew(["policy", "show", "synckid", "--json"]).stdout
            #expect(shown.contains("\"dailyLimitMinutes\": 120") && shown.contains("\"start\": \"21:30\""), "\(computer.name): \(shown)")
            let names = (try? FileManager.default.subpathsOfDirectory(atPath: computer.folder)) ?? []
            #expect(!names.contains { $0.contains("sync-conflict") }, "\(names)")
        }

        // y is off (agent and Syncthing) while x changes the limit; x's edit is not confirmed by y in time.
        y.stopAgent()
        y.stopSyncthing()
        let before = x.records()
        let offline = try x.curfew(["limit", "synckid", "3h", "--wait", "2"])
        #expect(offline.status == 75, "\(offline)")
        let missed = try #require(x.records().subtracting(before).first)
        try y.startSyncthing()
        try y.startAgent()
        try waitUntil(seconds: 60, "y's confirmation of the change it missed, back on x") {
            x.confirmation(of: "pc-y", missed)?.outcome == .applied
        }
        #expect(x.confirmation(of: "pc-y", missed)?.enforcedVersion == 4)
        let status = try x.curfew(["sync", "status"]).stdout
        #expect(status.contains("(pc-x): last seen") && status.contains("(pc-y): last seen") && !status.contains("not enrolled"), "\(status)")

        // A fake computer: anyone who can write to the folder on x announces one, enrols it with a key
        // of its own and signs it 2 h of the child's use. Syncthing carries it to y, where none of it
        // is believed: an edit on y (counting every computer's time) waits for x and y alone, y's agent
        // ignores the summary, and y's sync status lists it as not enrolled.
        let fake = MachineIdentity(id: "pc-fake", host: "fake-pc", key: SigningKey())
        let onX = SharedDirectory(path: x.folder)
        try onX.publish(fake.announcement)
        try onX.publish(MachineEnrolment(fake.announcement, author: fake.key.id, time: Int64(Date().timeIntervalSince1970)), signedBy: fake.key)
        let day = ZoneRules.system.localTime(at: Int64(Date().timeIntervalSince1970)).date
        try onX.publish(
            UsageSummary(
                machine: "pc-fake", host: "fake-pc", key: fake.key.id, user: "synckid", day: day,
                buckets: [.init(hour: 9, app: "", milliseconds: 2 * 3_600_000)], time: Int64(Date().timeIntervalSince1970)),
            as: fake)
        try waitUntil(seconds: 60, "the fake computer's files on y") {
            FileManager.default.fileExists(atPath: "\(y.folder)/machines/pc-fake.json")
                && FileManager.default.fileExists(atPath: "\(y.folder)/enrolments/pc-fake.json")
                && ((try? FileManager.default.subpathsOfDirectory(atPath: y.folder)) ?? []).contains { $0.hasPrefix("usage/") && $0.contains("pc-fake") }
        }
        let afterFake = try y.curfew(["limit", "synckid", "4h", "--computers", "all"])
        #expect(afterFake.status == 0, "\(afterFake)")
        #expect(afterFake.stdout.components(separatedBy: ": applied v").count - 1 == 2 && !afterFake.stdout.contains("fake-pc"), "\(afterFake)")
        let agentOnY = try #require(y.agent)
        try waitUntil(seconds: 30, "y's agent ignores the fake computer's summary") {
            agentOnY.log.contains("ignoring a usage summary") && agentOnY.log.contains("machine=pc-fake")
        }
        let logOnY = agentOnY.log
        #expect(logOnY.contains("not enrolled: enrolled by key \(fake.key.id), which is not trusted here"), "\(logOnY)")
        let statusOnY = try y.curfew(["sync", "status"]).stdout
        #expect(statusOnY.contains("fake-pc (pc-fake): not enrolled: enrolled by key \(fake.key.id), which is not trusted here"), "\(statusOnY)")
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on now.
func freePort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw TestFailure("cannot find a free port") }
    return UInt16(bigEndian: address.sin_port)
}
