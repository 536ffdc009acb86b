import CurfewPOSIX
import CurfewLinux
import Foundation
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// How fast the real `curfewd` kills a blocked app: from just before the app is spawned (through
/// setpriv, as the bench account) to its death (waitpid), over many launches, for the process connector, for polling at
/// the agent's default 100 ms, and for a polling design at Timekpr-nExT's 3-second interval; with the
/// connector and polling, also the game started by the dynamic loader and an appended-byte copy.
func runEnforcementBenchmarks(root: String, launches: Int) throws {
    print("enforcement: exec of a blocked app -> its death, \(launches) launches each (real curfewd, release build)")
    let account = try BenchAccount.resolve()
    guard account.switchesUser else {
        print("  skipped: needs root (the blocked app must run as another user than the agent's)")
        return
    }
    // The exec guard denies the exec before the game runs (to the exit of setpriv, whose exec failed);
    // the other modes turn it off and measure the game's death.
    let modes: [(label: String, arguments: [String], variants: Bool)] = [
        ("exec guard (fanotify), exec denied", ["--exec-guard", "on"], false),
        ("process connector", ["--exec-guard", "off"], true),
        ("polling /proc every 100 ms (curfewd without the connector)", ["--exec-guard", "off", "--no-process-connector"], true),
        (
            "polling every 3 s (Timekpr-nExT's interval; reference)",
            ["--exec-guard", "off", "--no-process-connector", "--tick", "3", "--enforcement-poll", "3"], false
        ),
    ]
    // The bypasses of a block: the game started by the dynamic loader, and a copy with a byte appended
    // under another name in /dev/shm (same build-id, another content hash).
    let launchKinds: [(label: String, command: BlockedAppProbe.Launch)] = [
        ("", .direct), (", started by the loader (ld.so GAME)", .loader), (", copy with a byte appended in /dev/shm", .appendedCopy),
    ]
    var index = 0
    for mode in modes {
        for kind in launchKinds where kind.command == .direct || mode.variants {
            index += 1
            let directory = "\(root)/enforcement-\(index)"
            let result = try BlockedAppProbe(account: account, directory: directory).run(
                launches: launches, agentArguments: mode.arguments, launch: kind.command)
            switch result {
            case .unavailable(let why):
                print("  \(mode.label)\(kind.label): not measured: \(why)")
            case .measured(let latencies, let survivors, let denied):
                let sorted = latencies.sorted()
                print(
                    "  \(mode.label)\(kind.label): p50 \(format(percentile(sorted, 0.5))) ms, p99 \(format(percentile(sorted, 0.99))) ms, max \(format(sorted.last ?? .nan)) ms"
                        + " (\(denied) denied before running, \(latencies.count - denied) stopped after starting)"
                        + (survivors > 0 ? "; \(survivors) launches still alive after 10 s" : ""))
            }
        }
    }
    print("  targets: p99 under 100 ms with the process connector, under 1000 ms with polling")
    try runExecCostBenchmark(root: root, account: account)
    try runGuardFloodBenchmark(root: root, account: account)
}

/// What the exec guard costs everyone else: the median of `posix_spawn` + `waitpid` of /bin/true by
/// root (whom nothing is denied) while the bench account has a blocked app, with the guard on and off.
func runExecCostBenchmark(root: String, account: BenchAccount, runs: Int = 4000) throws {
    var medians: [String: Double] = [:]
    for mode in ["off", "on"] {
        let probe = BlockedAppProbe(account: account, directory: "\(root)/exec-cost-\(mode)")
        let result = try probe.withAgent(agentArguments: ["--exec-guard", mode]) {
            var durations: [Double] = []
            durations.reserveCapacity(runs)
            for index in 0..<(runs + 200) {
                let before = clock.now
                guard spawnTrue() else { return [] }
                // The first 200 warm up (caches, and the guard's ignore marks).
                if index >= 200 { durations.append(milliseconds(clock.now - before) * 1000) }
            }
            return durations
        }
        switch result {
        case .unavailable(let why):
            print("  exec of /bin/true with the exec guard \(mode): not measured: \(why)")
            return
        case .measured(let durations, _, _):
            let sorted = durations.sorted()
            medians[mode] = percentile(sorted, 0.5)
            print(
                "  exec of /bin/true by root, exec guard \(mode): median \(format(percentile(sorted, 0.5))) us, p99 \(format(percentile(sorted, 0.99))) us over \(sorted.count) execs")
        }
    }
    if let on = medians["on"], let off = medians["off"], off > 0 {
        print("  the guard's cost for everyone: \(String(format: "%+.1f", (on - off) / off * 100)) % on the median exec (target: under 5 %)")
    }
}

/// posix_spawn(3) of /bin/true and waitpid(2); false if it could not be started or failed.
func spawnTrue() -> Bool {
    var pid: pid_t = 0
    let path = strdup("/bin/true")
    defer { free(path) }
    var argv: [UnsafeMutablePointer<CChar>?] = [path, nil]
    guard posix_spawn(&pid, "/bin/true", nil, nil, &argv, environ) == 0 else { return false }
    var status: Int32 = 0
    _ = valueOrErrno { waitpid(pid, &status, 0) }
    return status == 0
}

struct BlockedAppProbe {
    enum Result {
        /// `denied`: launches whose exec failed (setpriv exited) rather than being killed.
        case measured(latenciesMilliseconds: [Double], survivors: Int, denied: Int)
        case unavailable(String)
    }

    /// How the blocked game is started.
    enum Launch {
        case direct
        /// `/lib64/ld-linux-x86-64.so.2 GAME`.
        case loader
        /// A copy with one byte appended, under another name in /dev/shm.
        case appendedCopy
    }

    let account: BenchAccount
    let directory: String

    func run(launches: Int, agentArguments: [String], launch: Launch = .direct) throws -> Result {
        var command = [gamePath, "600"]
        switch launch {
        case .direct: break
        case .loader: command = ["/lib64/ld-linux-x86-64.so.2", gamePath, "600"]
        case .appendedCopy:
            let copy = "/dev/shm/curfew-bench-\(getpid())-copy"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            _ = unlink(gamePath)
            try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: gamePath)
            var bytes = try Data(contentsOf: URL(fileURLWithPath: gamePath))
            bytes.append(0x2a)
            try bytes.write(to: URL(fileURLWithPath: copy))
            chmod(copy, 0o755)
            command = [copy, "600"]
        }
        defer { if launch == .appendedCopy { _ = unlink(command[0]) } }
        var denied = 0
        let result = try withAgent(agentArguments: agentArguments) { () -> [Double] in
            let (latencies, deniedCount) = try launchAndWatch(launches: launches, command: command)
            denied = deniedCount
            return latencies
        }
        if case .measured(let latencies, _, _) = result {
            return .measured(latenciesMilliseconds: latencies, survivors: launches - latencies.count, denied: denied)
        }
        return result
    }

    var gamePath: String { "\(directory)/benchgame" }

    /// Sets up the catalog (benchgame, a copy of sleep, blocked for the account), starts curfewd with
    /// `agentArguments`, runs `body` while it runs, and stops it.
    func withAgent(agentArguments: [String], _ body: () throws -> [Double]) throws -> Result {
        let curfew = "\(binDirectory)/curfew"
        let curfewd = "\(binDirectory)/curfewd"
        try FileManager.default.createDirectory(atPath: "\(directory)/apps", withIntermediateDirectories: true)
        chmod(directory, 0o755)
        let game = gamePath
        _ = unlink(game)
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: game)
        try Data(
            """
            {"name": "benchgame", "displayName": "Bench Game", "category": "game", "match": {"executablePaths": ["\(game)"]}}
            """.utf8
        ).write(to: URL(fileURLWithPath: "\(directory)/apps/benchgame.json"))
        // The catalog's interpreter and loader lists, so `ld.so GAME` is the game.
        _ = unlink("\(directory)/apps/interpreters.json")
        try FileManager.default.copyItem(
            atPath: "\(packageRoot)/policies/apps/interpreters.json", toPath: "\(directory)/apps/interpreters.json")
        let state = "\(directory)/state"
        let socket = "\(directory)/s.sock"
        let log = "\(directory)/curfewd.log"
        let environment = childEnvironment(
            ["CURFEW_STATE_DIR": state, "CURFEW_LOG": "stderr", "CURFEW_CATALOG_DIRS": "\(directory)/apps"],
            unset: ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "CURFEW_DEBUG", "CURFEW_SHARED_DIR", "CURFEW_SOCKET"])
        for arguments in [
            ["init"], ["user", "add", account.name], ["limit", account.name, "unlimited"], ["bedtime", account.name, "off"],
            ["app", "block", account.name, "benchgame"],
        ] {
            let result = capture(curfew, arguments, fullEnvironment: environment, in: directory)
            guard result.status == 0 else {
                throw BenchFailure("curfew \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.output)")
            }
        }
        let agent: pid_t
        switch spawnChild(
            curfewd, ["--logind-bus", "none", "--socket", socket, "--stop-grace", "1"] + agentArguments,
            environment: environment, output: log, processGroup: 0)
        {
        case .success(let pid): agent = pid
        case .failure(let error): throw error
        }
        children.add(agent, stopSignal: SIGTERM)
        defer {
            kill(agent, SIGTERM)
            waitForExit(agent)
            children.remove(agent)
        }
        let deadline = clock.now + .seconds(20)
        while !(FileManager.default.fileExists(atPath: socket) && (readText(log) ?? "").contains("curfewd ready")) {
            guard clock.now < deadline, waitpid(agent, nil, WNOHANG) == 0 else {
                throw BenchFailure("curfewd not ready: \((readText(log) ?? "").suffix(400))")
            }
            usleep(20_000)
        }
        if !agentArguments.contains("--no-process-connector"), (readText(log) ?? "").contains("process connector unavailable") {
            return .unavailable("the kernel's process connector does not answer here (not the initial PID namespace)")
        }
        if agentArguments.contains("on") {
            if let line = (readText(log) ?? "").split(separator: "\n").first(where: { $0.contains("exec.guard=off") }) {
                return .unavailable("the exec guard is not available here: \(line)")
            }
            while !(readText(log) ?? "").contains("exec guard on:") {
                guard clock.now < deadline else { throw BenchFailure("the exec guard did not start: \((readText(log) ?? "").suffix(400))") }
                usleep(20_000)
            }
        }
        usleep(500_000)
        let values = try body()
        return .measured(latenciesMilliseconds: values, survivors: 0, denied: 0)
    }

    /// Launches `command` as the account `launches` times, 40 ms apart, each watched until it ends:
    /// the latencies (ms) and how many ended by exiting (their exec was denied) rather than by a signal.
    func launchAndWatch(launches: Int, command: [String]) throws -> ([Double], Int) {

        // Launches 40 ms apart, each watched until it dies; a launch is never waited for before the
        // next, so a 3-second poll does not make the run take 200 x 1.5 s. Each is watched on its
        // pidfd (readable when it exits), so its end is seen when it happens.
        var started: [pid_t: (since: ContinuousClock.Instant, exit: FileDescriptor?)] = [:]
        defer { for (_, launch) in started { try? launch.exit?.close() } }
        var latencies: [Double] = []
        var nextLaunch = clock.now
        var launched = 0
        var denied = 0
        let giveUp = Duration.seconds(10)
        while launched < launches || !started.isEmpty {
            if launched < launches && clock.now >= nextLaunch {
                // setpriv changes to the account and execs the game in place. Timed from before the
                // spawn (setpriv's own exec adds a millisecond or two, never less); not through
                // spawnProcess(uid:), which waits for the exec and would hold up this loop.
                let before = clock.now
                let pid = try spawnProcess(
                    "/usr/bin/setpriv",
                    ["--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--"] + command,
                    options: SpawnOptions(environment: ["PATH": "/usr/bin:/bin"], output: "/dev/null"))
                started[pid] = (before, exitDescriptor(ofChild: pid))
                children.add(pid)
                launched += 1
                nextLaunch = nextLaunch + .milliseconds(40)
            }
            for (pid, launch) in started {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid {
                    if status & 0x7f == 0 { denied += 1 }
                    latencies.append(milliseconds(clock.now - launch.since))
                } else if clock.now - launch.since > giveUp {
                    kill(pid, SIGKILL)
                    waitForExit(pid)
                } else {
                    continue
                }
                try? launch.exit?.close()
                started[pid] = nil
                children.remove(pid)
            }
            // Until one of them ends, the next launch is due, or the oldest is given up on.
            var until = started.values.map { $0.since + giveUp }.min() ?? clock.now
            if launched < launches { until = started.isEmpty ? nextLaunch : min(until, nextLaunch) }
            let left = milliseconds(until - clock.now)
            let pids = Array(started.keys)
            if left > 0 { _ = Readiness.wait(pids.map { started[$0]?.exit }, timeoutMilliseconds: Int64(left.rounded(.up))) }
        }
        return (latencies, denied)
    }
}
