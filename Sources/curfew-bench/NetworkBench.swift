import CurfewLinux
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The `network` lockout with the real `curfewd` in a network namespace of the benchmark's own
/// (a veth pair to a second one with a UDP echo server; documentation addresses, nothing leaves):
///
/// - zero -> dropped: the child (the bench account, no logind: time counts while it has processes) has
///   used 5 h; a policy record lowering the limit to what is used (minus the grants so far) puts it at
///   zero. From the record file's time (its mtime, written just before the rename the agent's inotify
///   sees) to the first UDP ping of the child's that the kernel refuses (a probe pings every 2 ms).
/// - grant -> back: `curfew grant USER 15m`; from the grant file's time to the first echo.
/// - the rules' cost: a loopback TCP transfer by an unmanaged user, and one over the veth pair, with the
///   table holding a rule for the child and without it, alternating.
func runNetworkBenchmarks(root: String, rounds: Int) throws {
    print("network lockout: zero -> the child's traffic dropped, grant -> back, \(rounds) rounds (real curfewd in a network namespace, nft)")
    guard geteuid() == 0 else {
        print("  skipped: needs root (network namespaces, nftables, a child account)")
        return
    }
    for tool in ["/usr/sbin/ip", "/usr/sbin/nft", "/usr/bin/python3", "/usr/sbin/runuser", "/usr/bin/sqlite3"]
    where access(tool, X_OK) != 0 {
        print("  skipped: \(tool) is missing (make deps)")
        return
    }
    let account = try BenchAccount.resolve()
    let peerName = "curfewbenchpeer"
    if Accounts.account(named: peerName) == nil {
        _ = run("/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", peerName])
    }
    guard Accounts.account(named: peerName) != nil else { throw BenchFailure("cannot create the account \(peerName)") }
    let directory = "\(root)/network"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    chmod(root, 0o755)
    chmod(directory, 0o755)

    let tag = String(getpid() % 100_000)
    let near = "cfbnear\(tag)"
    let far = "cfbfar\(tag)"
    let ip = "/usr/sbin/ip"
    let steps: [[String]] = [
        ["netns", "add", near], ["netns", "add", far],
        ["link", "add", "cfba\(tag)", "type", "veth", "peer", "name", "cfbb\(tag)"],
        ["link", "set", "cfba\(tag)", "netns", near], ["link", "set", "cfbb\(tag)", "netns", far],
        ["-n", near, "addr", "add", "192.0.2.1/24", "dev", "cfba\(tag)"],
        ["-n", far, "addr", "add", "192.0.2.2/24", "dev", "cfbb\(tag)"],
        ["-n", near, "link", "set", "cfba\(tag)", "up"], ["-n", far, "link", "set", "cfbb\(tag)", "up"],
        ["-n", near, "link", "set", "lo", "up"], ["-n", far, "link", "set", "lo", "up"],
    ]
    children.atExit(order: 50) {
        _ = run("/usr/sbin/ip", ["netns", "del", near])
        _ = run("/usr/sbin/ip", ["netns", "del", far])
    }
    defer {
        _ = run(ip, ["netns", "del", near])
        _ = run(ip, ["netns", "del", far])
    }
    for step in steps where run(ip, step) != 0 {
        throw BenchFailure("ip \(step.joined(separator: " ")) failed")
    }
    try Data(networkBenchServer.utf8).write(to: URL(fileURLWithPath: "\(directory)/server.py"))
    try Data(networkBenchProbe.utf8).write(to: URL(fileURLWithPath: "\(directory)/probe.py"))
    try Data(networkBenchThroughput.utf8).write(to: URL(fileURLWithPath: "\(directory)/throughput.py"))
    let plain = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"]
    func background(_ arguments: [String], output: String, environment: [String: String] = plain) throws -> pid_t {
        switch spawnChild(ip, arguments, environment: environment, output: output, processGroup: 0) {
        case .success(let pid):
            children.add(pid)
            return pid
        case .failure(let error): throw error
        }
    }
    var stopped = Set<pid_t>()
    func stop(_ pid: pid_t, signal: Int32 = SIGKILL) {
        guard stopped.insert(pid).inserted else { return }
        kill(pid, signal)
        waitForExit(pid)
        children.remove(pid)
    }
    let server = try background(["netns", "exec", far, "/usr/bin/python3", "\(directory)/server.py"], output: "\(directory)/server.log")
    defer { stop(server) }

    // The parent's side, in the agent's namespace.
    let curfew = "\(binDirectory)/curfew"
    let curfewd = "\(binDirectory)/curfewd"
    let state = "\(directory)/state"
    let socket = "\(directory)/s.sock"
    let log = "\(directory)/curfewd.log"
    let environment = childEnvironment(
        ["CURFEW_STATE_DIR": state, "CURFEW_LOG": "stderr", "CURFEW_CATALOG_DIRS": "\(packageRoot)/policies/apps", "TZ": "UTC"],
        unset: ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "CURFEW_DEBUG", "CURFEW_SHARED_DIR", "CURFEW_SOCKET"])
    func curfewCommand(_ arguments: [String]) throws {
        let result = capture(curfew, arguments, fullEnvironment: environment, in: directory)
        guard result.status == 0 else {
            throw BenchFailure("curfew \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.output)")
        }
    }
    for arguments in [
        ["init"], ["user", "add", account.name], ["timezone", account.name, "UTC"], ["limit", account.name, "8h"],
        ["bedtime", account.name, "off"], ["lockout", account.name, "network"],
    ] {
        try curfewCommand(arguments + (arguments == ["init"] ? [] : ["--no-wait"]))
    }
    // 5 hours used today.
    let day = ZoneClock.utcDate()
    let seeded = run(
        "/usr/bin/sqlite3",
        ["\(state)/curfew.db", "INSERT INTO usage (user, day, hour, app, milliseconds) VALUES ('\(account.name)', '\(day)', 0, '', \(5 * 3_600_000 + 5_000));"])
    guard seeded == 0 else { throw BenchFailure("cannot seed the usage (sqlite3 exit \(seeded))") }

    let agent = try background(
        ["netns", "exec", near, curfewd, "--logind-bus", "none", "--socket", socket, "--no-process-connector"], output: log,
        environment: environment)
    children.add(agent, stopSignal: SIGTERM)
    defer { stop(agent) }
    let ready = clock.now + .seconds(20)
    while !(FileManager.default.fileExists(atPath: socket) && (readText(log) ?? "").contains("curfewd ready")) {
        guard clock.now < ready, waitpid(agent, nil, WNOHANG) == 0 else {
            throw BenchFailure("curfewd not ready: \((readText(log) ?? "").suffix(400))")
        }
        usleep(20_000)
    }
    let probeLog = "\(directory)/probe.log"
    let probe = try background(
        ["netns", "exec", near, "/usr/sbin/runuser", "-u", account.name, "--", "/usr/bin/python3", "\(directory)/probe.py"],
        output: probeLog)
    defer { stop(probe) }

    /// The probe's state changes so far: (up, time).
    func changes() -> [(up: Bool, time: Double)] {
        (readText(probeLog) ?? "").split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 2, let time = Double(parts[1]) else { return nil }
            return (parts[0] == "up", time)
        }
    }
    func waitFor(up: Bool, after count: Int) throws -> Double {
        let deadline = clock.now + .seconds(30)
        while clock.now < deadline {
            let seen = changes()
            if seen.count > count, let change = seen[count...].first(where: { $0.up == up }) { return change.time }
            usleep(1_000)
        }
        throw BenchFailure("the child's traffic did not go \(up ? "up" : "down") within 30 s; curfewd: \((readText(log) ?? "").suffix(600))")
    }
    _ = try waitFor(up: true, after: 0)
    let shared = "\(state)/shared"
    var dropped: [Double] = []
    var back: [Double] = []
    for round in 0..<rounds {
        // The limit at what is used, less the grants so far: zero.
        let before = changes().count
        try curfewCommand(["limit", account.name, TimeAllowanceText.minutes(300 - 15 * round), "--no-wait"])
        let zero = newestFileTime(in: shared)
        dropped.append((try waitFor(up: false, after: before) - zero) * 1000)
        let beforeGrant = changes().count
        try curfewCommand(["grant", account.name, "15m"])
        let granted = newestFileTime(in: shared)
        back.append((try waitFor(up: true, after: beforeGrant) - granted) * 1000)
    }
    for (label, values) in [("zero -> dropped", dropped), ("grant -> back", back)] {
        let sorted = values.sorted()
        print("  \(label): p50 \(format(percentile(sorted, 0.5))) ms, max \(format(sorted.last ?? .nan)) ms (\(values.count) rounds)")
    }

    // The rules' cost for an unmanaged user, with the agent gone (the table alternately set by hand).
    stop(probe)
    stop(agent, signal: SIGTERM)
    let filter = NetworkFilter(command: [ip, "netns", "exec", near, "/usr/sbin/nft"])
    // Pairs of runs back to back, one with the table and one without (which first alternates): the
    // median of each pair's ratio stands up to the load of a shared machine better than the medians.
    let pairs = 20
    for (label, target) in [("loopback", "127.0.0.1"), ("veth", "192.0.2.2")] {
        var with: [Double] = []
        var without: [Double] = []
        var ratios: [Double] = []
        for pair in 0..<pairs {
            var rates: [Bool: Double] = [:]
            for rules in pair % 2 == 0 ? [true, false] : [false, true] {
                try filter.apply(rules ? [NetworkFilter.Blocked(uid: account.uid, user: account.name)] : [])
                let result = capture(
                    ip,
                    ["netns", "exec", near, "/usr/sbin/runuser", "-u", peerName, "--", "/usr/bin/python3", "\(directory)/throughput.py", target],
                    fullEnvironment: plain, in: directory)
                guard result.status == 0, let rate = Double(result.output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                    throw BenchFailure("throughput.py failed (\(result.status)): \(result.output)")
                }
                rates[rules] = rate
            }
            with.append(rates[true]!)
            without.append(rates[false]!)
            ratios.append(rates[true]! / rates[false]!)
        }
        try filter.apply([])
        let sortedRatios = ratios.sorted()
        print(
            "  \(label) TCP of an unmanaged user (256 MiB a run, \(pairs) pairs): median \(format(percentile(without.sorted(), 0.5))) MiB/s "
                + "without the table, \(format(percentile(with.sorted(), 0.5))) MiB/s with a child's rule; with/without per pair: "
                + "median \(format(percentile(sortedRatios, 0.5))), p25-p75 \(format(percentile(sortedRatios, 0.25)))-\(format(percentile(sortedRatios, 0.75)))")
    }
}

/// The newest modification time (seconds since the epoch) of a file under `directory`.
func newestFileTime(in directory: String) -> Double {
    var newest = 0.0
    guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return newest }
    while let relative = enumerator.nextObject() as? String {
        var status = stat()
        guard stat("\(directory)/\(relative)", &status) == 0, status.st_mode & S_IFMT == S_IFREG else { continue }
        newest = max(newest, Double(status.st_mtim.tv_sec) + Double(status.st_mtim.tv_nsec) / 1e9)
    }
    return newest
}

enum ZoneClock {
    /// Today in UTC, `YYYY-MM-DD`.
    static func utcDate() -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        return String(format: "%04d-%02d-%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday))
    }
}

enum TimeAllowanceText {
    static func minutes(_ minutes: Int) -> String { "\(minutes)m" }
}

let networkBenchServer = """
    import socket, threading, time
    def udp():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", 18081))
        while True:
            data, peer = s.recvfrom(512)
            s.sendto(data, peer)
    def sink():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", 18082))
        s.listen(8)
        while True:
            c, _ = s.accept()
            threading.Thread(target=drain, args=(c,), daemon=True).start()
    def drain(c):
        while c.recv(1 << 20):
            pass
        c.sendall(b"k")
        c.close()
    for target in (udp, sink):
        threading.Thread(target=target, daemon=True).start()
    time.sleep(3600)
    """

let networkBenchProbe = """
    import socket, time
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.05)
    state = None
    end = time.time() + 1800
    while time.time() < end:
        try:
            s.sendto(b"p", ("192.0.2.2", 18081))
            up = s.recvfrom(16)[0] == b"p"
        except OSError:
            up = False
        if up != state:
            state = up
            print("up" if up else "down", repr(time.time()), flush=True)
        time.sleep(0.002)
    """

/// 2 x 128 MiB over TCP to `argv[1]` (the loopback sink of its own, or the far namespace's); MiB/s.
let networkBenchThroughput = """
    import socket, sys, threading, time
    target = sys.argv[1]
    port = 18082
    if target.startswith("127."):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((target, 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        def serve():
            while True:
                c, _ = listener.accept()
                while c.recv(1 << 20):
                    pass
                c.sendall(b"k")
                c.close()
        threading.Thread(target=serve, daemon=True).start()
    chunk = b"x" * (1 << 18)
    total = 0
    start = time.perf_counter()
    for _ in range(2):
        c = socket.create_connection((target, port))
        for _ in range(512):
            c.sendall(chunk)
        c.shutdown(socket.SHUT_WR)
        c.recv(1)
        c.close()
        total += 512 * len(chunk)
    print(total / (1 << 20) / (time.perf_counter() - start))
    """
