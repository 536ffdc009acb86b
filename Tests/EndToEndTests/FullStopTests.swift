import CurfewLinux
import CurfewTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Stops that leave nothing running, end to end with the real agent (no logind) and the real test
/// account: a fork-hopper under a `logout` lockout, and a blocked game that ignores SIGTERM.
extension EnforcementEndToEndTests {
    /// The whole of a file, by read(2): the reaper's log, growing while it is read.
    static func readAll(_ path: String) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &buffer, buffer.count)
            guard count > 0 else { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A fork-hopper: each generation ignores SIGTERM, starts a new session, forks the next generation
    /// and exits within 20 ms, so no sample of /proc holds a process for long. Under a `logout`
    /// lockout without logind every process of the child ends, this one too, within the grace (1 s
    /// here) and a pass of the enforcement: 5 s at most after the agent is ready, on a loaded machine.
    @Test func aForkHopperIsGoneSoonAfterALogoutLockout() throws {
        let (runner, account, _, _) = try setUp(limit: "15m")
        defer { runner.cleanUp() }
        try seedUsage(runner, user: account.name, milliseconds: 15 * 60 * 1000)
        let marker = "hopper-\(getpid())"
        let script = """
            import os, signal, time
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                if os.fork():
                    os._exit(0)
                os.setsid()
                time.sleep(0.02)
            """
        // The orphaned generations need an init that reaps them, as systemd does; this machine's PID 1
        // may not, so a process of root's adopts and reaps them (PR_SET_CHILD_SUBREAPER) and starts the
        // first generation as the child.
        let reaper = """
            import ctypes, os, sys, time
            ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
            uid, gid, script, marker = sys.argv[1:5]
            if os.fork() == 0:
                os.execv("/usr/bin/setpriv", ["setpriv", "--reuid=" + uid, "--regid=" + gid, "--clear-groups", "--",
                    "/usr/bin/python3", "-c", script, marker])
            while True:
                try:
                    pid, status = os.wait()
                    print("%.3f %d %d" % (time.time(), pid, status), flush=True)
                except ChildProcessError:
                    time.sleep(0.01)
            """
        let log = runner.root.appendingPathComponent("reaped.log").path
        let adopter = try spawnLogged(
            "/usr/bin/python3", ["-c", reaper, "\(account.uid)", "\(account.gid)", script, marker],
            environment: ["PATH": "/usr/bin:/bin"], log: log)
        defer {
            // Whatever is left of the hopper, as the child would end it: kill -9 -1 as the child.
            _ = try? CurfewRunner.runTool(
                "/usr/bin/setpriv", ["--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--", "/bin/kill", "-9", "-1"])
            kill(adopter, SIGKILL)
            _ = waitForExit(adopter)
        }
        // Each generation that ends is reaped and logged: "time pid status" (listing /proc cannot tell,
        // a generation lives shorter than a listing takes).
        func reaped() -> [(time: Double, status: Int)] {
            Self.readAll(log).split(separator: "\n").compactMap { line in
                let fields = line.split(separator: " ")
                guard fields.count == 3, let time = Double(fields[0]), let status = Int(fields[2]) else { return nil }
                return (time, status)
            }
        }
        try waitUntil(seconds: 15, "the hopper's generations") { reaped().count >= 20 }
        // With the process connector, as the agent runs by default: each generation's fork and exit
        // reach the agent as events. The lockout begins at the agent's first pass, once it is ready.
        let agent = try AgentProcess(runner, extraEnvironment: ["TZ": "UTC"], logindBus: "none", arguments: ["--stop-grace", "1"])
        defer { _ = agent.stop() }
        let started = Date()
        // Gone: no generation ended for a second (one lives about 20 ms).
        var gone: Double? = nil
        while Date().timeIntervalSince(started) < 20 {
            usleep(50_000)
            guard let last = reaped().last else { continue }
            if Date().timeIntervalSince1970 - last.time > 1 {
                gone = last.time - started.timeIntervalSince1970
                break
            }
        }
        let all = reaped()
        print("fork-hopper: \(all.count) generations reaped, \(all.filter { $0.status == 9 }.count) killed by SIGKILL")
        print("fork-hopper gone \(gone.map { String(format: "%.3f", $0) } ?? "never (still running after 20 s)") s after the agent was ready")
        #expect(gone != nil && gone! < 5, "the fork-hopper outlived the lockout")
    }

    /// `trap '' TERM; exec game`: a blocked game that ignores SIGTERM is dead within a second of each
    /// launch, whatever the stop grace (the default 2 s here): a blocked app gets SIGKILL at once.
    @Test func aBlockedGameThatIgnoresSIGTERMDiesWithinASecondOfEachLaunch() throws {
        let (runner, account, game, _) = try setUp(game: ["block", TestAccount.enforced, "testgame"])
        defer { runner.cleanUp() }
        let agent = try AgentProcess(
            runner, extraEnvironment: ["TZ": "UTC"], logindBus: "none", arguments: ["--no-process-connector", "--stop-grace", "2"])
        defer { _ = agent.stop() }
        var lifetimes: [Double] = []
        for index in 0..<6 {
            let pid = try base.runAs(account, "/bin/sh", ["-c", "trap '' TERM; exec \(game) 600"])
            let started = Date()
            guard death(of: pid, within: 5) != nil else {
                kill(pid, SIGKILL)
                _ = waitForExit(pid)
                Issue.record("launch \(index) still ran after 5 s\n\(agent.log)")
                continue
            }
            lifetimes.append(Date().timeIntervalSince(started))
        }
        print("trap '' TERM; exec testgame: lifetimes \(lifetimes.map { String(format: "%.3f", $0) }) s")
        #expect(lifetimes.count == 6)
        #expect((lifetimes.max() ?? 99) < 1.0, "lifetimes: \(lifetimes.map { String(format: "%.3f", $0) })")
    }
}
