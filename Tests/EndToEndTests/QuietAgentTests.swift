import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The agent sleeps until something happens (issue 13): with a managed user who has no process and
/// no logind, nothing happens, and its threads together wake less than once a second.
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: a test account of its own"))
struct QuietAgentTests {
    /// An account no other suite starts processes of, so it is idle unless this suite says so.
    static let account = "curfewquiet"

    /// Voluntary context switches (a thread blocking, i.e. waking later) of each thread of `pid`, by
    /// thread id, from /proc/PID/task/*/status.
    static func voluntarySwitches(of pid: Int32) -> [Int32: Int] {
        var counts: [Int32: Int] = [:]
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for task in tasks {
            guard let tid = Int32(task),
                let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("voluntary_ctxt_switches:") }),
                let count = Int(line.split(separator: "\t").last?.trimmingCharacters(in: .whitespaces) ?? "")
            else { continue }
            counts[tid] = count
        }
        return counts
    }

    /// The thread of `pid` blocked in epoll_wait: libdispatch's manager thread (the agent's own loops
    /// wait in poll(2) or on futexes). On Linux libdispatch arms a 1 s timer there (its workqueue
    /// monitor, `_dispatch_workq_monitor_pools`) as soon as a job runs on a global queue; the agent runs
    /// Swift concurrency on its own executor (QuietGlobalExecutor), so that thread must stay asleep.
    static func dispatchManagerThread(of pid: Int32) -> Int32? {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        // x86_64: 232 epoll_wait, 281 epoll_pwait; aarch64 has only epoll_pwait, 22.
        #if arch(x86_64)
            let epollCalls: Set<Substring> = ["232", "281"]
        #else
            let epollCalls: Set<Substring> = ["22"]
        #endif
        for task in tasks {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/syscall", encoding: .utf8),
                let number = text.split(separator: " ").first, epollCalls.contains(number)
            else { continue }
            return Int32(task)
        }
        return nil
    }

    /// Processes of `uid` in /proc.
    static func processCount(uid: UInt32) -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { Int32($0) != nil }.count {
            var status = stat()
            return stat("/proc/\($0)", &status) == 0 && status.st_uid == uid
        }
    }

    @Test func anIdleAgentWakesLessThanOnceASecondAndStillCounts() throws {
        let account = try TestAccount.ensure(Self.account)
        #expect(Self.processCount(uid: account.uid) == 0, "\(account.name) must have no process for the agent to be idle")
        var runner = try CurfewRunner()
        chmod(runner.root.path, 0o755)
        defer { runner.cleanUp() }
        runner.catalogDirectory = CurfewRunner.repositoryRoot.appendingPathComponent("policies/apps").path
        try runner.ok(["init"])
        try runner.ok(["user", "add", account.name])
        try runner.ok(["limit", account.name, "8h"])
        try runner.ok(["bedtime", account.name, "off"])
        // --tick 0.25 (AgentProcess): an agent that ticked while idle would wake 4 times a second
        // from the tracker alone.
        let agent = try AgentProcess(runner)
        var stopped = false
        defer { if !stopped { agent.killHard() } }

        // Settle: the first ticks, the threads of the service group started and parked.
        usleep(2_000_000)
        // Other tests (and anyone) starting processes as another user (setpriv, runuser) make uid
        // changes, and each wakes the tracker once to see whose process it is: counted here, as the
        // agent's connector sees them, so that they do not make this test fail on a busy machine.
        let others = try ProcessConnector.open()
        defer { others.close() }
        try others.passOnlyUIDChanges(true)
        struct Window {
            var own: Double
            var manager: Double
            var all: Double
            var explained: String
        }
        func measure() throws -> Window {
            // Uid changes before this window are not this window's.
            while let events = try? others.next(timeoutMilliseconds: 0), !events.isEmpty {}
            let before = Self.voluntarySwitches(of: agent.pid)
            let started = Date()
            usleep(8_000_000)
            let after = Self.voluntarySwitches(of: agent.pid)
            let seconds = Date().timeIntervalSince(started)
            var uidChanges = 0
            while true {
                let events = try others.next(timeoutMilliseconds: 0)
                if events.isEmpty { break }
                uidChanges += events.count { if case .uidChange = $0 { true } else { false } }
            }
            // A thread started in the window counts from 0; one that ended in it is not seen.
            let perThread = after.map { tid, count in (tid, count - (before[tid] ?? 0)) }.sorted { $0.0 < $1.0 }
            let total = perThread.reduce(0) { $0 + $1.1 }
            let manager = Self.dispatchManagerThread(of: agent.pid)
            let managerWakeups = perThread.first { $0.0 == manager }?.1 ?? 0
            let explained = "\(total) voluntary context switches in \(seconds) s, \(managerWakeups) of them libdispatch's manager "
                + "thread \(manager.map(String.init) ?? "(not found)"), \(uidChanges) uid changes on the machine meanwhile; "
                + "per thread: \(perThread)\n\(agent.log)"
            return Window(
                own: Double(max(0, total - managerWakeups - uidChanges)) / seconds, manager: Double(managerWakeups) / seconds,
                all: Double(max(0, total - uidChanges)) / seconds, explained: explained)
        }
        // An idle agent's wakeups are its own; a loaded machine (other suites, builds) only adds some,
        // never takes any away: the quietest of up to three windows is the agent's figure.
        var window = try measure()
        for _ in 0..<2 where window.all >= 1.0 {
            let next = try measure()
            if next.all < window.all { window = next }
        }
        // The agent's own loops: main's woke 116 times a second (60 in a release build), a 50 ms spin
        // in every thread and 200-250 ms polls.
        #expect(window.own < 1.0, "\(window.explained)")
        // libdispatch's manager thread: no monitor (it woke once a second before the agent had an
        // executor of its own).
        #expect(window.manager < 0.3, "\(window.explained)")
        // Everything, as the issue counts it: less than one wake-up a second.
        #expect(window.all < 1.0, "\(window.explained)")

        // Asleep is not deaf: a process of the account is counted from its start.
        let processStarted = Date()
        let process = try spawnLogged(
            "/usr/bin/setpriv",
            ["--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--", "/bin/sleep", "30"],
            environment: ["PATH": "/usr/bin:/bin"], log: "/dev/null")
        usleep(3_000_000)
        kill(process, SIGKILL)
        _ = waitForExit(process)
        let truth = Date().timeIntervalSince(processStarted)
        usleep(500_000)

        // A stop wakes every loop at once: graceful and quick, as before.
        let stopping = Date()
        let status = agent.stop()
        stopped = true
        let stopSeconds = Date().timeIntervalSince(stopping)
        #expect(status == 0, "\(agent.log)")
        #expect(stopSeconds < 1.0, "SIGTERM to exit took \(stopSeconds) s")
        #expect(agent.log.contains("stopping"))
        let (screen, _) = try AgentTests().report(runner, account.name)
        #expect(abs(Double(screen) - truth) <= 1.0, "screen \(screen) s, truth \(truth) s\n\(agent.log)")
    }
}
