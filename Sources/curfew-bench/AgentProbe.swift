import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The real `curfewd` of this build, started against a private state directory, watched from the
/// outside through /proc: its RSS and its CPU time.
struct AgentProbe {
    struct Figures {
        /// VmRSS, its anonymous and file-backed parts, and VmHWM at the end, in KiB.
        var rssKiB: Int
        var anonymousRSSKiB: Int
        var fileRSSKiB: Int
        var peakRSSKiB: Int
        /// Resident KiB by mapped file (or `[heap]`, `[anon]`, ...), largest first.
        var residentByMapping: [(name: String, kib: Int)]
        /// CPU from start until the measured window began (startup and first listing), ms.
        var startupCPUMilliseconds: Double
        /// utime + stime over the window, ms (clock-tick resolution: 10 ms; it includes threads that
        /// ended during the window, which a sum over /proc/PID/task would miss).
        var windowCPUMilliseconds: Double
        var windowSeconds: Double
        var threads: Int
        /// PIDs the kernel handed out machine-wide during the window (processes and threads started
        /// by anyone): the process connector reports each of them to the agent.
        var tasksStarted: Int?
        var exitStatus: Int32
        var logProblems: [String]
        /// Voluntary context switches of all its threads over the window (each is the thread
        /// blocking, so one wake-up later): per thread from /proc/PID/task/*/status, a thread started
        /// in the window counting from 0 (one that ended in it is not seen).
        var voluntarySwitches: Int = 0
        /// Those of libdispatch's manager thread (the one in epoll_wait), whose workqueue monitor
        /// wakes once a second in every Swift program that uses concurrency on Linux.
        var dispatchManagerSwitches: Int = 0

        var cpuShare: Double { windowCPUMilliseconds / (windowSeconds * 1000) }
        var wakeupsPerSecond: Double { Double(voluntarySwitches) / windowSeconds }
    }

    let account: BenchAccount
    let directory: String
    let guardian: Guardian?

    /// `curfew init`, `curfew user add <account>`, then `curfewd --logind-bus none --socket ...`
    /// (plus `extraArguments`); waits until it is ready, lets it settle for `warmUp` seconds, measures
    /// for `seconds`, then stops it with SIGTERM. With `churnPerSecond`, that many short processes of
    /// the account (`/bin/true`) start and end each second of the window, as on a busy desktop.
    /// `churnOfOthers`: the short processes are the benchmark's own (root's, not managed), as on a
    /// machine where something else builds or runs scripts. `extraSetup`: more `curfew` commands after
    /// the account's (an app blocked, say).
    func run(
        seconds: Double, warmUp: Double = 2, extraArguments: [String] = [], churnPerSecond: Int = 0, churnOfOthers: Bool = false,
        extraSetup: [[String]] = []
    ) throws -> Figures {
        let curfew = "\(binDirectory)/curfew"
        let curfewd = "\(binDirectory)/curfewd"
        guard access(curfewd, X_OK) == 0 else {
            throw BenchFailure("\(curfewd) not found; build it first (swift build -c release --product curfewd)")
        }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let state = "\(directory)/state"
        let socket = "\(directory)/s.sock"
        let log = "\(directory)/curfewd.log"
        // Not under systemd's eyes (no sd_notify, no watchdog), logging to the file below.
        var environment = childEnvironment(
            ["CURFEW_STATE_DIR": state, "CURFEW_LOG": "stderr"],
            unset: ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "CURFEW_DEBUG", "CURFEW_SHARED_DIR", "CURFEW_SOCKET"])
        if (environment["CURFEW_CATALOG_DIRS"] ?? "").isEmpty {
            environment["CURFEW_CATALOG_DIRS"] = "\(packageRoot)/policies/apps"
        }

        // Unrestricted: the agent enforces what it manages, and the figures are about tracking.
        for arguments in [
            ["init"], ["user", "add", account.name], ["limit", account.name, "unlimited"], ["bedtime", account.name, "off"],
        ] + extraSetup {
            let result = capture(curfew, arguments, fullEnvironment: environment, in: directory)
            guard result.status == 0 else {
                throw BenchFailure("curfew \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.output)")
            }
        }

        let pid: pid_t
        switch spawnChild(
            curfewd, ["--logind-bus", "none", "--socket", socket] + extraArguments, environment: environment, output: log,
            processGroup: 0)
        {
        case .success(let started): pid = started
        case .failure(let error): throw error
        }
        children.add(pid, stopSignal: SIGTERM)
        guardian?.watch(group: pid)
        var stopped = false
        defer {
            if !stopped {
                kill(pid, SIGKILL)
                waitForExit(pid)
                children.remove(pid)
            }
        }

        // Ready: the socket is there and the tracker logged that it starts (its first listing follows).
        let deadline = clock.now + .seconds(20)
        while !(FileManager.default.fileExists(atPath: socket) && (readText(log) ?? "").contains("curfewd ready")) {
            if waitpid(pid, nil, WNOHANG) == pid {
                stopped = true
                children.remove(pid)
                throw BenchFailure("curfewd exited at start: \(tail(readText(log) ?? ""))")
            }
            guard clock.now < deadline else { throw BenchFailure("curfewd not ready after 20 s: \(tail(readText(log) ?? ""))") }
            usleep(20_000)
        }
        usleep(UInt32(warmUp * 1_000_000))

        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard let startTicks = Self.cpuTicks(pid) else { throw BenchFailure("curfewd exited: \(tail(readText(log) ?? ""))") }
        let startPid = Self.lastPid()
        let startSwitches = Self.voluntarySwitches(pid)
        let start = clock.now
        if churnPerSecond > 0 {
            churn(perSecond: churnPerSecond, ofAccount: !churnOfOthers, until: start + .milliseconds(Int(seconds * 1000)))
        } else {
            usleep(UInt32(seconds * 1_000_000))
        }
        guard let endTicks = Self.cpuTicks(pid) else { throw BenchFailure("curfewd exited: \(tail(readText(log) ?? ""))") }
        let endPid = Self.lastPid()
        let endSwitches = Self.voluntarySwitches(pid)
        let manager = Self.dispatchManagerThread(pid)
        let window = milliseconds(clock.now - start) / 1000
        let status = Self.status(pid)
        let mappings = Self.residentByMapping(pid)

        kill(pid, SIGTERM)
        let exitStatus = waitForExit(pid)
        stopped = true
        children.remove(pid)

        let problems = (readText(log) ?? "").split(separator: "\n").map(String.init).filter {
            $0.contains("error") || $0.contains("warning") || $0.contains("critical")
        }
        return Figures(
            rssKiB: status["VmRSS"] ?? 0, anonymousRSSKiB: status["RssAnon"] ?? 0, fileRSSKiB: status["RssFile"] ?? 0,
            peakRSSKiB: status["VmHWM"] ?? 0, residentByMapping: mappings,
            startupCPUMilliseconds: Double(startTicks) * 1000 / ticksPerSecond,
            windowCPUMilliseconds: Double(endTicks - startTicks) * 1000 / ticksPerSecond,
            windowSeconds: window, threads: status["Threads"] ?? 0,
            tasksStarted: startPid.flatMap { begin in
                endPid.map { end in end >= begin ? end - begin : end + (readNumber("/proc/sys/kernel/pid_max") ?? 0) - begin }
            },
            exitStatus: exitStatus, logProblems: problems,
            voluntarySwitches: endSwitches.reduce(0) { $0 + $1.value - (startSwitches[$1.key] ?? 0) },
            dispatchManagerSwitches: manager.map { (endSwitches[$0] ?? 0) - (startSwitches[$0] ?? 0) } ?? 0)
    }

    /// Starts `/bin/true` as the account `perSecond` times a second until `deadline`, reaping each.
    private func churn(perSecond: Int, ofAccount: Bool = true, until deadline: ContinuousClock.Instant) {
        let interval = Duration.nanoseconds(1_000_000_000 / perSecond)
        var next = clock.now
        let environment = ["PATH": "/usr/bin:/bin"]
        let setpriv = "/usr/bin/setpriv"
        while next < deadline {
            let started =
                account.switchesUser && ofAccount
                ? spawnChild(
                    setpriv, ["--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--", "/bin/true"],
                    environment: environment)
                : spawnChild("/bin/true", [], environment: environment)
            if case .success(let pid) = started {
                children.add(pid)
                waitForExit(pid)
                children.remove(pid)
            }
            next += interval
            let now = clock.now
            if next > now { usleep(UInt32(milliseconds(next - now) * 1000)) }
        }
    }

    private func tail(_ text: String) -> String {
        text.split(separator: "\n").suffix(5).joined(separator: " | ")
    }

    /// `voluntary_ctxt_switches` of each thread of `pid`, by thread id.
    static func voluntarySwitches(_ pid: pid_t) -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
            guard let tid = Int(task) else { continue }
            for line in (readText("/proc/\(pid)/task/\(task)/status") ?? "").split(separator: "\n")
            where line.hasPrefix("voluntary_ctxt_switches:") {
                counts[tid] = Int(line.split(whereSeparator: { $0 == "\t" || $0 == " " }).last ?? "")
            }
        }
        return counts
    }

    /// The thread of `pid` blocked in epoll_wait (x86_64 232 or epoll_pwait 281, aarch64 22):
    /// libdispatch's manager thread; the agent's loops wait in poll(2) or on futexes.
    static func dispatchManagerThread(_ pid: pid_t) -> Int? {
        #if arch(x86_64)
            let epollCalls: Set<Substring> = ["232", "281"]
        #else
            let epollCalls: Set<Substring> = ["22"]
        #endif
        for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
            if let number = readText("/proc/\(pid)/task/\(task)/syscall")?.split(separator: " ").first, epollCalls.contains(number) {
                return Int(task)
            }
        }
        return nil
    }

    /// The last PID handed out (the fifth field of /proc/loadavg).
    static func lastPid() -> Int? {
        readText("/proc/loadavg")?.split(whereSeparator: { $0 == " " || $0 == "\n" }).dropFirst(4).first.flatMap { Int($0) }
    }

    /// utime + stime of the whole process (fields 14 and 15 of /proc/PID/stat, after the `)` of comm).
    static func cpuTicks(_ pid: pid_t) -> Int? {
        guard let text = readText("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state): field N is fields[N - 3].
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return user + system
    }

    /// Sums the `Rss:` of /proc/PID/smaps by the file each mapping is of (its last path component;
    /// anonymous mappings as `[anon]`).
    static func residentByMapping(_ pid: pid_t) -> [(name: String, kib: Int)] {
        var totals: [String: Int] = [:]
        var current = "[anon]"
        for line in (readText("/proc/\(pid)/smaps") ?? "").split(separator: "\n") {
            if line.hasPrefix("Rss:") {
                let value = line.dropFirst(4).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) } ?? 0
                totals[current, default: 0] += value
            } else {
                // A mapping starts with `start-end perms offset dev inode [path]`; the lines after it
                // are `Key: value`.
                let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
                guard fields.count >= 5, fields[0].contains("-"), fields[0].allSatisfy({ $0.isHexDigit || $0 == "-" })
                else { continue }
                let path = fields.count == 6 ? fields[5].trimmingCharacters(in: .whitespaces) : ""
                current = path.isEmpty ? "[anon]" : (path.hasPrefix("[") ? path : String(path.split(separator: "/").last ?? ""))
            }
        }
        return totals.map { (name: $0.key, kib: $0.value) }.sorted { $0.kib > $1.kib }
    }

    /// The numeric `Key:  value kB` lines of /proc/PID/status.
    static func status(_ pid: pid_t) -> [String: Int] {
        var values: [String: Int] = [:]
        for line in (readText("/proc/\(pid)/status") ?? "").split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, let number = Int(parts[1].split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") else { continue }
            values[String(parts[0])] = number
        }
        return values
    }
}
