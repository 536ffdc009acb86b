import CurfewLinux
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// How long `curfew check-login` (the built binary, run as pam_exec runs it: as root, the user in
/// PAM_USER) takes for an unmanaged user and for a managed one, with the real `curfewd` idle, under
/// a child's attack on its socket, frozen (SIGSTOP: it accepts nothing and answers nothing), frozen
/// with its backlog full (connect itself waits), and stopped. docs/security.md: whatever a child does, a login decision takes at most 2 s.
func runLoginBenchmarks(root: String, runs: Int) throws {
    print("login: curfew check-login as PAM runs it, real curfewd, \(runs) runs each (p50 / max, wall time from spawn to exit)")
    let account = try BenchAccount.resolve()
    guard geteuid() == 0, account.switchesUser else {
        print("  skipped: needs root (check-login is root's, and the attack must come from another account)")
        return
    }
    let bench = try LoginBench(account: account, directory: "\(root)/login")
    let agent = try bench.startAgent()
    var agentRunning = true
    defer { if agentRunning { bench.stop(agent) } }

    bench.measure("agent idle", runs: runs)

    let attacker = try bench.startAttack(connections: 300)
    bench.measure("under the socket attack", runs: runs)
    let attack = bench.attackReport()
    kill(attacker, SIGKILL)
    waitForExit(attacker)
    children.remove(attacker)
    print("    the attack, by \(account.name): one connection sending a byte every 1.5 s, 300 more held and reopened when closed: \(attack)")

    // Frozen: the connection waits in the backlog for an answer that never comes; then with the
    // backlog full, connect itself waits. Fewer runs: each takes the client's whole second.
    kill(agent, SIGSTOP)
    bench.measure("agent frozen (SIGSTOP)", runs: max(1, runs / 5))
    let filler = try bench.startAttack(connections: 600) { report in
        report.split(separator: " ").contains { $0.hasPrefix("full=") && $0 != "full=0" }
    }
    bench.measure("agent frozen, its backlog full", runs: max(1, runs / 5))
    let filled = bench.attackReport()
    kill(filler, SIGKILL)
    waitForExit(filler)
    children.remove(filler)
    print("    the backlog (512) filled by \(account.name) while the agent was frozen: \(filled)")
    kill(agent, SIGCONT)

    bench.stop(agent)
    agentRunning = false
    bench.measure("agent stopped", runs: runs)
    print("  target: max under 2000 ms in every case (the agent gets 1 s, then the records on disk decide)")
}

private struct LoginBench {
    let account: BenchAccount
    let directory: String
    let socket: String
    let environment: [String: String]
    let curfew = "\(binDirectory)/curfew"

    init(account: BenchAccount, directory: String) throws {
        self.account = account
        self.directory = directory
        socket = "\(directory)/run/curfewd.sock"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: "\(directory)/run", withIntermediateDirectories: true)
        // The attacker reaches the socket through these.
        chmod(directory, 0o755)
        chmod("\(directory)/run", 0o755)
        var environment = childEnvironment(
            ["CURFEW_STATE_DIR": "\(directory)/state", "CURFEW_LOG": "stderr", "TZ": "UTC"],
            unset: ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "CURFEW_DEBUG", "CURFEW_SHARED_DIR", "CURFEW_SOCKET"])
        if (environment["CURFEW_CATALOG_DIRS"] ?? "").isEmpty {
            environment["CURFEW_CATALOG_DIRS"] = "\(packageRoot)/policies/apps"
        }
        self.environment = environment
        // Managed, with no limit: the agent enforces nothing on the attacker, and the login is allowed.
        for arguments in [
            ["init"], ["user", "add", account.name], ["limit", account.name, "unlimited"], ["bedtime", account.name, "off"],
        ] {
            let result = capture(curfew, arguments, fullEnvironment: environment, in: directory)
            guard result.status == 0 else {
                throw BenchFailure("curfew \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.output)")
            }
        }
    }

    func startAgent() throws -> pid_t {
        let curfewd = "\(binDirectory)/curfewd"
        guard access(curfewd, X_OK) == 0 else {
            throw BenchFailure("\(curfewd) not found; build it first (swift build -c release --product curfewd)")
        }
        let log = "\(directory)/curfewd.log"
        let pid: pid_t
        switch spawnChild(
            curfewd, ["--logind-bus", "none", "--socket", socket], environment: environment, output: log, processGroup: 0)
        {
        case .success(let started): pid = started
        case .failure(let error): throw error
        }
        children.add(pid, stopSignal: SIGTERM)
        let deadline = clock.now + .seconds(20)
        while !(FileManager.default.fileExists(atPath: socket) && (readText(log) ?? "").contains("curfewd ready")) {
            guard clock.now < deadline, waitpid(pid, nil, WNOHANG) == 0 else {
                throw BenchFailure("curfewd did not start: \(readText(log) ?? "")")
            }
            usleep(20_000)
        }
        return pid
    }

    func stop(_ agent: pid_t) {
        kill(agent, SIGCONT)
        kill(agent, SIGTERM)
        waitForExit(agent)
        children.remove(agent)
    }

    var attackLog: String { "\(directory)/attack.log" }

    /// The attacker's last report line.
    func attackReport() -> String {
        (readText(attackLog) ?? "").split(separator: "\n").last.map(String.init) ?? "(no report)"
    }

    /// Starts the attack as the bench account; returns once its report says `ready` (by default:
    /// once it opened connections) and 2 s more have passed.
    func startAttack(connections: Int, ready: (String) -> Bool = { $0.contains("opened=") }) throws -> pid_t {
        unlink(attackLog)
        let pid: pid_t
        switch spawnChild(
            "/usr/bin/setpriv",
            [
                "--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--", "/usr/bin/python3", "-c",
                socketAttack, socket, "\(connections)",
            ], environment: ["PATH": "/usr/bin:/bin"], output: attackLog, processGroup: 0)
        {
        case .success(let started): pid = started
        case .failure(let error): throw error
        }
        children.add(pid)
        let deadline = clock.now + .seconds(10)
        while !ready(attackReport()) {
            guard clock.now < deadline, waitpid(pid, nil, WNOHANG) == 0 else {
                throw BenchFailure("the attack did not start: \(readText(attackLog) ?? "")")
            }
            usleep(20_000)
        }
        // Let the slow connection send a byte or two.
        usleep(2_000_000)
        return pid
    }

    /// `runs` check-logins of an unmanaged user (daemon) and of the managed account, alternating.
    func measure(_ label: String, runs: Int) {
        var times: [String: [Double]] = ["daemon": [], account.name: []]
        var unexpected: [String] = []
        var checkEnvironment = environment
        checkEnvironment["PAM_SERVICE"] = "sshd"
        for _ in 0..<runs {
            for user in ["daemon", account.name] {
                checkEnvironment["PAM_USER"] = user
                let started = clock.now
                let status = run(curfew, ["check-login", "--socket", socket], fullEnvironment: checkEnvironment)
                times[user, default: []].append(milliseconds(clock.now - started))
                if status != 0 { unexpected.append("\(user): exit \(status)") }
            }
        }
        func figures(_ values: [Double]) -> String { "p50 \(format(percentile(values, 0.5))) ms, max \(format(values.max() ?? .nan)) ms" }
        print(
            "  \(label): unmanaged user \(figures(times["daemon"] ?? [])); managed user \(figures(times[account.name] ?? []))"
                + (unexpected.isEmpty ? "" : "; unexpected: \(Set(unexpected).sorted().joined(separator: ", "))"))
    }
}

/// The attack of the end-to-end test (Tests/Bench/socket_attack.py), passed to python3 -c so the
/// attacker needs no access to the checkout.
private let socketAttack: String = {
    let path = "\(packageRoot)/Tests/Bench/socket_attack.py"
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { fatalError("cannot read \(path)") }
    return text
}()
