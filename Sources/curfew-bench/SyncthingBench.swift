import CurfewCore
import CurfewSync
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One change through two real Syncthing instances (Debian's, own homes, on the loopback) and two real
/// agents, set up with `curfew sync setup --syncthing`: the time from publishing on one computer until
/// that computer sees the other's confirmation (the figure `curfew limit` prints as "applied in").
func runSyncthingBenchmarks(root: String, changes: Int) throws {
    print("syncthing (two real Syncthing instances on 127.0.0.1, watcher delay 1 s, two real curfewd)")
    guard access("/usr/bin/syncthing", X_OK) == 0 else { throw BenchFailure("syncthing is not installed (apt-get install syncthing)") }
    guard geteuid() == 0 else { throw BenchFailure("the syncthing section runs as root (sync setup needs Syncthing as root)") }
    let computers = try ["x", "y"].map { try BenchComputer(name: $0, root: "\(root)/syncthing-\($0)") }
    let (x, y) = (computers[0], computers[1])
    for (computer, other) in [(x, y), (y, x)] {
        _ = try computer.api().request("DELETE", "/rest/config/folders/default")
        try computer.api().call(
            "POST", "/rest/config/devices",
            sending: SyncthingObjects.Device(
                deviceID: other.deviceID, name: other.name, addresses: ["tcp://127.0.0.1:\(other.listenPort)"]))
        try KeyRing(stateDirectory: computer.state).trust(try KeyRing(stateDirectory: other.state).loadSigningKey().publicKey)
        let setup = computer.curfew(["sync", "setup", "--syncthing", "--folder", computer.folder])
        guard setup.status == 0 else { throw BenchFailure("curfew sync setup failed: \(setup.output)") }
    }
    for computer in computers {
        try computer.api().call(
            "PATCH", "/rest/config/folders/curfew",
            sending: SyncthingObjects.FolderDevices(devices: computers.map { .init(deviceID: $0.deviceID) }))
    }
    let deadline = clock.now + .seconds(120)
    while !(Files.exists("\(x.folder)/enrolments/pc-y.json") && Files.exists("\(y.folder)/enrolments/pc-x.json")) {
        guard clock.now < deadline else { throw BenchFailure("the two folders did not sync within 120 s") }
        usleep(100_000)
    }
    for computer in computers { try computer.startAgent() }
    let first = x.curfew(["user", "add", "benchsynckid", "--wait", "60"])
    guard first.status == 0 else { throw BenchFailure("curfew user add: \(first.output)") }
    var seconds: [Double] = []
    for index in 0..<changes {
        let result = x.curfew(["limit", "benchsynckid", "\(30 + 15 * (index % 2))m", "--wait", "60", "--json"])
        guard result.status == 0, let data = result.output.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let answers = object["computers"] as? [[String: Any]],
            let other = answers.first(where: { $0["machine"] as? String == "pc-y" }), let ms = other["milliseconds"] as? Int
        else { throw BenchFailure("change \(index + 1) was not confirmed by the other computer: \(result.output)") }
        seconds.append(Double(ms) / 1000)
    }
    print(
        "  one change, published on x until x sees y's confirmation (this computer's clock), \(changes) changes: "
            + "p50 \(format(percentile(seconds, 0.5))) s, max \(format(seconds.max() ?? 0)) s (target < 3 s)")
}

private final class BenchComputer {
    let name: String
    let state: String
    let home: String
    let folder: String
    let guiPort: UInt16
    let listenPort: UInt16
    var deviceID = ""

    init(name: String, root: String) throws {
        self.name = name
        try? FileManager.default.removeItem(atPath: root)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        state = "\(root)/state"
        home = "\(root)/syncthing"
        folder = "\(root)/folder"
        guiPort = try freeLoopbackPort()
        listenPort = try freeLoopbackPort()
        guard run("/usr/bin/syncthing", ["-generate=\(home)"]) == 0 else { throw BenchFailure("syncthing -generate failed") }
        var config = try String(contentsOfFile: "\(home)/config.xml", encoding: .utf8)
        let listen = try NSRegularExpression(pattern: "(\\s*<listenAddress>[^<]*</listenAddress>)+")
        config = listen.stringByReplacingMatches(
            in: config, range: NSRange(config.startIndex..., in: config),
            withTemplate: "\n        <listenAddress>tcp://127.0.0.1:\(listenPort)</listenAddress>")
        for (from, to) in [
            ("<globalAnnounceEnabled>true", "<globalAnnounceEnabled>false"), ("<localAnnounceEnabled>true", "<localAnnounceEnabled>false"),
            ("<relaysEnabled>true", "<relaysEnabled>false"), ("<natEnabled>true", "<natEnabled>false"),
            ("<urAccepted>0<", "<urAccepted>-1<"), ("<autoUpgradeIntervalH>12<", "<autoUpgradeIntervalH>0<"),
        ] {
            config = config.replacingOccurrences(of: from, with: to)
        }
        try config.write(toFile: "\(home)/config.xml", atomically: true, encoding: .utf8)
        guard curfew(["init"]).status == 0 else { throw BenchFailure("curfew init failed") }
        let pid: pid_t
        switch spawnChild(
            "/usr/bin/syncthing", ["-home", home, "-no-browser", "-no-restart", "-gui-address", "127.0.0.1:\(guiPort)"],
            environment: childEnvironment(["HOME": root, "STNOUPGRADE": "1"]), output: "\(root)/syncthing.log", processGroup: 0)
        {
        case .success(let started): pid = started
        case .failure(let error): throw error
        }
        children.add(pid, stopSignal: SIGKILL)
        let deadline = clock.now + .seconds(30)
        while true {
            if case .object(let status)? = try? api().call("GET", "/rest/system/status"), case .string(let id)? = status["myID"] {
                deviceID = id
                break
            }
            guard clock.now < deadline else { throw BenchFailure("Syncthing \(name) did not answer") }
            usleep(100_000)
        }
    }

    func api() throws -> SyncthingAPI {
        guard var config = try SyncthingConfig.load(home: home)?.config else { throw BenchFailure("no config.xml in \(home)") }
        config.guiAddress = "127.0.0.1:\(guiPort)"
        return try SyncthingAPI(config: config)
    }

    var environment: [String: String] {
        childEnvironment(
            [
                "CURFEW_STATE_DIR": state, "CURFEW_SYNCTHING_HOME": home, "CURFEW_MACHINE_ID": "pc-\(name)",
                "CURFEW_SYSTEMD_DIR": "\(state)/../systemd", "CURFEW_CATALOG_DIRS": "\(packageRoot)/policies/apps", "TZ": "UTC",
            ], unset: ["CURFEW_SHARED_DIR", "CURFEW_SOCKET"])
    }

    func curfew(_ arguments: [String]) -> (status: Int32, output: String) {
        capture("\(binDirectory)/curfew", arguments, fullEnvironment: environment, in: Files.parentDirectory(of: state))
    }

    func startAgent() throws {
        let log = "\(Files.parentDirectory(of: state))/curfewd.log"
        var environment = self.environment
        environment["CURFEW_LOG"] = "stderr"
        for key in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] { environment.removeValue(forKey: key) }
        switch spawnChild(
            "\(binDirectory)/curfewd",
            ["--logind-bus", "none", "--socket", "\(state)/s.sock", "--machine-id", "pc-\(name)", "--no-process-connector", "--rescan", "1"],
            environment: environment, output: log, processGroup: 0)
        {
        case .success(let pid): children.add(pid, stopSignal: SIGTERM)
        case .failure(let error): throw error
        }
        let deadline = clock.now + .seconds(30)
        while !(readText(log) ?? "").contains("curfewd ready") {
            guard clock.now < deadline else { throw BenchFailure("curfewd \(name) did not start: \(readText(log) ?? "")") }
            usleep(20_000)
        }
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on now.
private func freeLoopbackPort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw BenchFailure("cannot find a free port") }
    return UInt16(bigEndian: address.sin_port)
}
