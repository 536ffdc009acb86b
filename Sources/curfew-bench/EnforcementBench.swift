import CurfewLinux
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// How fast the real `curfewd` kills a blocked app: from just before the app is spawned (through
/// setpriv, as the bench account) to its death (waitpid), over many launches, for the process connector, for polling at
/// the agent's default 100 ms, and for a polling design at Timekpr-nExT's 3-second interval; with the
/// connector and polling, also the game started by the dynamic loader and an appended-byte copy (issue 14).
func runEnforcementBenchmarks(root: String, launches: Int) throws {
    print("enforcement: exec of a blocked app -> its death, \(launches) launches each (real curfewd, release build)")
    let account = try BenchAccount.resolve()
    guard account.switchesUser else {
        print("  skipped: needs root (the blocked app must run as another user than the agent's)")
        return
    }
    let modes: [(label: String, arguments: [String])] = [
        ("process connector", []),
        ("polling /proc every 100 ms (curfewd without the connector)", ["--no-process-connector"]),
        ("polling every 3 s (Timekpr-nExT's interval; reference)", ["--no-process-connector", "--tick", "3", "--enforcement-poll", "3"]),
    ]
    // Issue 14's bypasses: the game started by the dynamic loader, and a copy with a byte appended
    // under another name in /dev/shm (same build-id, another content hash).
    let launchKinds: [(label: String, command: BlockedAppProbe.Launch)] = [
        ("", .direct), (", started by the loader (ld.so GAME)", .loader), (", copy with a byte appended in /dev/shm", .appendedCopy),
    ]
    var index = 0
    for mode in modes {
        for kind in launchKinds where kind.command == .direct || mode.arguments.count <= 1 {
            index += 1
            let directory = "\(root)/enforcement-\(index)"
            let result = try BlockedAppProbe(account: account, directory: directory).run(
                launches: launches, agentArguments: mode.arguments, launch: kind.command)
            switch result {
            case .unavailable(let why):
                print("  \(mode.label)\(kind.label): not measured: \(why)")
            case .measured(let latencies, let survivors):
                let sorted = latencies.sorted()
                print(
                    "  \(mode.label)\(kind.label): p50 \(format(percentile(sorted, 0.5))) ms, p99 \(format(percentile(sorted, 0.99))) ms, max \(format(sorted.last ?? .nan)) ms"
                        + (survivors > 0 ? "; \(survivors) launches still alive after 10 s" : ""))
            }
        }
    }
    print("  targets: p99 under 100 ms with the process connector, under 1000 ms with polling")
}

struct BlockedAppProbe {
    enum Result {
        case measured(latenciesMilliseconds: [Double], survivors: Int)
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
        let curfew = "\(binDirectory)/curfew"
        let curfewd = "\(binDirectory)/curfewd"
        try FileManager.default.createDirectory(atPath: "\(directory)/apps", withIntermediateDirectories: true)
        chmod(directory, 0o755)
        let game = "\(directory)/benchgame"
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
        var command = [game, "600"]
        switch launch {
        case .direct: break
        case .loader: command = ["/lib64/ld-linux-x86-64.so.2", game, "600"]
        case .appendedCopy:
            let copy = "/dev/shm/curfew-bench-\(getpid())-copy"
            var bytes = try Data(contentsOf: URL(fileURLWithPath: game))
            bytes.append(0x2a)
            try bytes.write(to: URL(fileURLWithPath: copy))
            chmod(copy, 0o755)
            command = [copy, "600"]
        }
        defer { if launch == .appendedCopy { _ = unlink(command[0]) } }
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
        if agentArguments.isEmpty, (readText(log) ?? "").contains("process connector unavailable") {
            return .unavailable("the kernel's process connector does not answer here (not the initial PID namespace)")
        }
        usleep(500_000)

        // Launches 40 ms apart, each watched until it dies; a launch is never waited for before the
        // next, so a 3-second poll does not make the run take 200 x 1.5 s.
        var started: [pid_t: ContinuousClock.Instant] = [:]
        var latencies: [Double] = []
        var nextLaunch = clock.now
        var launched = 0
        let giveUp = Duration.seconds(10)
        while launched < launches || !started.isEmpty {
            let now = clock.now
            if launched < launches && now >= nextLaunch {
                // setpriv changes to the account and execs the game in place. Timed from before the
                // spawn (setpriv's own exec adds a millisecond or two, never less); not through
                // spawnProcess(uid:), which waits for the exec and would hold up this loop.
                let before = clock.now
                let pid = try spawnProcess(
                    "/usr/bin/setpriv",
                    ["--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--"] + command,
                    options: SpawnOptions(environment: ["PATH": "/usr/bin:/bin"], output: "/dev/null"))
                started[pid] = before
                children.add(pid)
                launched += 1
                nextLaunch = nextLaunch + .milliseconds(40)
            }
            for (pid, since) in started {
                if waitpid(pid, nil, WNOHANG) == pid {
                    latencies.append(milliseconds(clock.now - since))
                    started[pid] = nil
                    children.remove(pid)
                } else if clock.now - since > giveUp {
                    kill(pid, SIGKILL)
                    waitForExit(pid)
                    started[pid] = nil
                    children.remove(pid)
                }
            }
            usleep(500)
        }
        return .measured(latenciesMilliseconds: latencies, survivors: launches - latencies.count)
    }
}
