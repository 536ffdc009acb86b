import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A child attacks their own login check (docs/security.md): a screen locker's PAM stack runs
/// `curfew check-login` as the child, so the child can flood the socket first, stop the agent from
/// answering, or ask about others. The check never lets a managed child in without an answer, and
/// never tells a child who else is managed.
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: real child accounts"))
struct LoginCheckAttackTests {
    /// Holds COUNT connections to SOCKET open without asking anything, reopening each as soon as the
    /// agent closes it (at its 1 s deadline) or turns it away; prints how many it holds (open for
    /// 0.1 s and not turned away).
    static let hold = """
        import socket, sys, time
        path, count = sys.argv[1], int(sys.argv[2])
        held = []  # (socket, when opened)
        last = -1
        while True:
            alive = []
            for s, opened in held:
                try:
                    s.recv(4096)  # the agent's busy line, or the end: closed either way
                    s.close()
                except BlockingIOError:
                    alive.append((s, opened))
                except OSError:
                    s.close()
            held = alive
            # Held: open for 0.1 s without being turned away (a refusal comes within milliseconds).
            now = time.monotonic()
            holding = sum(1 for _, opened in held if now - opened > 0.1)
            if holding != last:
                print("held=%d" % holding, flush=True)
                last = holding
            while len(held) < count:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.setblocking(False)
                try:
                    s.connect(path)
                except OSError:
                    s.close()
                    break
                held.append((s, time.monotonic()))
            time.sleep(0.005)
        """

    /// In the child's user namespace (root there, their subordinate uids outside): WORKERS processes,
    /// each as namespace uid 1..WORKERS, each holding COUNT connections as `hold` does; prints how many
    /// they hold together, and the most seen at once after the first 2 s (the test counts what the
    /// agent holds from its descriptors: a starved worker sees a refusal late).
    static let holdAsSubordinates = """
        import os, select, socket, sys, time
        path, workers, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
        pipes = []
        for n in range(1, workers + 1):
            r, w = os.pipe()
            if os.fork() == 0:
                os.close(r)
                parent = os.getppid()
                os.setgid(n); os.setuid(n)
                held, last = [], -1
                while True:
                    # The test kills the parent: a worker must not outlive it (it would spin for ever).
                    if os.getppid() != parent: os._exit(0)
                    alive = []
                    for s, opened in held:
                        try:
                            s.recv(4096); s.close()
                        except BlockingIOError:
                            alive.append((s, opened))
                        except OSError:
                            s.close()
                    held = alive
                    now = time.monotonic()
                    holding = sum(1 for _, opened in held if now - opened > 0.1)
                    if holding != last:
                        os.write(w, b"%d\\n" % holding); last = holding
                    while len(held) < count:
                        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        s.setblocking(False)
                        try:
                            s.connect(path)
                        except OSError:
                            s.close(); break
                        held.append((s, time.monotonic()))
                    time.sleep(0.005)
            os.close(w)
            pipes.append(r)
        counts = {r: 0 for r in pipes}
        start = time.monotonic(); most = 0; next_report = start
        while True:
            ready, _, _ = select.select(pipes, [], [], 0.1)
            for r in ready:
                data = os.read(r, 4096).split()
                if data: counts[r] = int(data[-1])
            total = sum(counts.values())
            now = time.monotonic()
            if now - start > 2: most = max(most, total)
            if now >= next_report:
                print("total=%d most=%d" % (total, most), flush=True); next_report = now + 0.25
        """

    /// A runner whose children reach the socket under it, with `children` managed (name: limit).
    func setUp(_ children: [(String, String)], lockoutApps: [String] = []) throws -> CurfewRunner {
        let runner = try CurfewRunner()
        chmod(runner.root.path, 0o755)
        try runner.ok(["init"])
        for (name, limit) in children {
            try runner.ok(["user", "add", name])
            try runner.ok(["timezone", name, "UTC"])
            try runner.ok(["bedtime", name, "off"])
            try runner.ok(["limit", name, limit])
        }
        // Stops no python: the child's flood goes on at zero, as a child's would under `apps`.
        for name in lockoutApps { try runner.ok(["lockout", name, "apps"]) }
        return runner
    }

    /// `curfew check-login` run by `runner` as `caller` (nil: root), as a screen locker's PAM stack runs it, timed.
    func check(_ runner: CurfewRunner, _ agent: AgentProcess, user: String, as caller: String?) throws -> (CurfewRunner.Result, Double) {
        let started = Date()
        let result = try runner.run(
            ["check-login", "--user", user, "--socket", agent.socketPath], environment: ["PAM_SERVICE": "i3lock"], asUser: caller)
        return (result, Date().timeIntervalSince(started))
    }

    func spawnAs(_ account: Accounts.Account, _ arguments: [String], log: String) throws -> Int32 {
        try spawnLogged(
            "/usr/bin/setpriv", ["--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--"] + arguments,
            environment: ["PATH": "/usr/bin:/bin"], log: log)
    }

    func lastLine(_ path: String) -> String {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").last.map(String.init) ?? ""
    }

    func end(_ pid: Int32) {
        kill(pid, SIGKILL)
        _ = waitForExit(pid)
    }

    /// The finding: while a child holds their 8 connections, their own check at zero was let in (no
    /// answer, and the state directory is not theirs). Now their check is answered by the agent
    /// whatever they hold (a complete request needs no slot), at zero and with time left.
    @Test func aChildsOwnFloodNeverLetsTheirOwnCheckIn() throws {
        let zero = try TestAccount.ensure("curfewfloodzero")
        let time = try TestAccount.ensure("curfewfloodtime")
        let runner = try setUp([(zero.name, "0"), (time.name, "8h")], lockoutApps: [zero.name])
        defer { runner.cleanUp() }
        let agent = try AgentProcess(runner, extraEnvironment: ["TZ": "UTC"], arguments: ["--no-process-connector"])
        defer { _ = agent.stop() }
        let refusal = "Curfew: \(zero.name) may not log in now: no screen time is allowed today."
        let (idle, _) = try check(runner, agent, user: zero.name, as: zero.name)
        #expect(idle.status == 77 && idle.stdout.hasPrefix(refusal), "\(idle)")

        for child in [zero, time] {
            let log = runner.root.appendingPathComponent("hold-\(child.name).log").path
            let flood = try spawnAs(child, ["/usr/bin/python3", "-c", Self.hold, agent.socketPath, "16"], log: log)
            defer { end(flood) }
            try waitUntil(seconds: 10, "\(child.name) holding 8 connections") {
                ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").contains("held=8")
            }
            var outcomes: [String] = []
            var slowest = 0.0
            for _ in 1...20 {
                let (result, seconds) = try check(runner, agent, user: child.name, as: child.name)
                slowest = max(slowest, seconds)
                outcomes.append("\(result.status) \(result.stdout.split(separator: "\n").first ?? "")")
            }
            let expected = child == zero ? "77 \(refusal.dropLast())" : "0 "
            let matching = outcomes.filter { $0.hasPrefix(expected) }.count
            print("\(child.name)'s own check-login under their own flood: \(matching) of 20 as expected (\(expected)); slowest \(slowest) s; \(Set(outcomes))")
            #expect(matching == 20, "\(child.name): \(outcomes)")
            #expect(slowest < 2.0, "\(child.name): a check took \(slowest) s")
        }
    }

    /// The finding: 40 subordinate uids of one child holding 8 connections each took every slot, and
    /// a sibling's `status` and `request` were turned away. A subordinate uid counts as its owner:
    /// the whole namespace holds the child's 8.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/newuidmap"), "needs newuidmap (uidmap)"))
    func aChildsSubordinateUIDsShareTheChildsConnections() throws {
        let flooder = try TestAccount.ensure("curfewsubflood")
        let sibling = try TestAccount.ensure("curfewsubsibling")
        let subuid = (try? String(contentsOfFile: "/etc/subuid", encoding: .utf8)) ?? ""
        if !subuid.split(separator: "\n").contains(where: { $0.hasPrefix("\(flooder.name):") }) {
            let status = try CurfewRunner.runTool(
                "/usr/sbin/usermod", ["--add-subuids", "1600000000-1600065535", "--add-subgids", "1600000000-1600065535", flooder.name])
            #expect(status == 0, "usermod --add-subuids")
        }
        let runner = try setUp([(flooder.name, "8h"), (sibling.name, "8h")])
        defer { runner.cleanUp() }
        let agent = try AgentProcess(runner, extraEnvironment: ["TZ": "UTC"], arguments: ["--no-process-connector"])
        defer { _ = agent.stop() }
        // What the agent holds, as the kernel counts it: its open sockets, less those it had before the flood.
        func descriptors() -> Int {
            let directory = "/proc/\(agent.pid)/fd"
            return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter {
                ((try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\($0)")) ?? "").hasPrefix("socket:")
            }.count
        }
        let baseline = (0..<5).map { _ in
            usleep(50_000)
            return descriptors()
        }.min() ?? 0
        let log = runner.root.appendingPathComponent("subordinates.log").path
        let flood = try spawnAs(
            flooder,
            ["/usr/bin/unshare", "--map-auto", "--setuid", "0", "--setgid", "0", "--", "/usr/bin/python3", "-c", Self.holdAsSubordinates,
             agent.socketPath, "40", "16"], log: log)
        defer { end(flood) }
        try waitUntil(seconds: 10, "the subordinate uids holding connections") { lastLine(log).hasPrefix("total=") }
        var held = 0
        for _ in 0..<25 {
            usleep(100_000)
            held = max(held, descriptors() - baseline)
        }
        for round in 1...3 {
            let started = Date()
            let status = try runner.run(["status", "--json", "--socket", agent.socketPath], asUser: sibling.name)
            let request = try runner.run(
                ["request", "10m", "--reason", "round \(round)", "--socket", agent.socketPath], asUser: sibling.name)
            let seconds = Date().timeIntervalSince(started)
            #expect(status.status == 0 && status.stdout.contains("\"user\": \"\(sibling.name)\""), "round \(round): \(status)\n\(lastLine(log))")
            #expect(request.status == 0, "round \(round): \(request)\n\(lastLine(log))")
            #expect(seconds < 4.0, "round \(round): status and request took \(seconds) s")
            usleep(300_000)
        }
        let report = lastLine(log)
        print("40 subordinate uids of \(flooder.name), 16 connections each: the agent held at most \(held) sockets more than before (the flood's own count: \(report))")
        // The child's 8, and a socket or two of the agent's own besides (a caller turned away between its
        // accept and its close); before subordinate uids counted as their owner, every slot: 256.
        #expect(held >= 8 && held <= 10, "the agent held \(held) sockets more during the flood: \(report)")
    }

    /// The finding: a child's check-login of another account said who is managed (refused for a
    /// managed sibling, let in for anyone else). Now any non-root caller asking about another account
    /// gets one refusal, from the command and from the agent alike.
    @Test func aChildLearnsNothingAboutWhoElseIsManaged() throws {
        let child = try TestAccount.ensure("curfewprober")
        let sibling = try TestAccount.ensure("curfewprobed")
        let stranger = try TestAccount.ensure("curfewstranger")
        let runner = try setUp([(child.name, "8h"), (sibling.name, "8h")])
        defer { runner.cleanUp() }
        let agent = try AgentProcess(runner, extraEnvironment: ["TZ": "UTC"], arguments: ["--no-process-connector"])
        defer { _ = agent.stop() }
        let (managed, _) = try check(runner, agent, user: sibling.name, as: child.name)
        let (unmanaged, _) = try check(runner, agent, user: stranger.name, as: child.name)
        #expect(managed.status == unmanaged.status && managed.stdout == unmanaged.stdout, "managed: \(managed)\nunmanaged: \(unmanaged)")
        // Straight to the socket, as a script of the child's would ask: the same reply for both, but the name.
        let ask = """
            import socket, sys
            for user in sys.argv[2:]:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1])
                s.sendall(b'{"command":"check-login","user":"%s"}\\n' % user.encode())
                print(s.makefile().readline().strip().replace(user, "USER"), flush=True)
            """
        let log = runner.root.appendingPathComponent("probe.log").path
        let probe = try spawnAs(child, ["/usr/bin/python3", "-c", ask, agent.socketPath, sibling.name, stranger.name], log: log)
        #expect(waitForExit(probe) == 0)
        let replies = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(replies.count == 2 && replies[0] == replies[1], "\(replies)")
        // Their own check still answers them, and root's about anyone.
        let (own, _) = try check(runner, agent, user: child.name, as: child.name)
        #expect(own.status == 0 && own.stdout.isEmpty, "\(own)")
        let (byRoot, _) = try check(runner, agent, user: stranger.name, as: nil)
        #expect(byRoot.status == 0 && byRoot.stdout.isEmpty, "\(byRoot)")
    }

    /// The finding's other half: with no answer from the agent (frozen with SIGSTOP, or stopped), a
    /// managed child's own check let them in. Now they are refused within 2 s, saying why; an unmanaged
    /// user and root are let in as before, and root's check of the child is decided by the records.
    @Test func aFrozenOrStoppedAgentRefusesAManagedChildAndLetsOthersIn() throws {
        let child = try TestAccount.ensure("curfewfrozen")
        let stranger = try TestAccount.ensure("curfewstranger")
        let runner = try setUp([(child.name, "8h")])
        defer { runner.cleanUp() }
        let agent = try AgentProcess(runner, extraEnvironment: ["TZ": "UTC"], arguments: ["--no-process-connector"])
        var running = true
        defer { if running { agent.killHard() } }
        let (before, _) = try check(runner, agent, user: child.name, as: child.name)
        #expect(before.status == 0, "\(before)")

        func expectClosedForTheChildOnly(_ why: String) throws {
            let refusal = "Curfew: \(child.name) may not log in now: Curfew's agent \(why), and \(child.name) is managed on this computer. Ask a parent.\n"
            for attempt in 1...3 {
                let (own, ownSeconds) = try check(runner, agent, user: child.name, as: child.name)
                print("\(why): \(child.name)'s own check: exit \(own.status) in \(ownSeconds) s: \(own.stdout)")
                #expect(own.status == 77 && own.stdout == refusal, "\(attempt): \(own)")
                #expect(ownSeconds < 2.0, "\(attempt): \(ownSeconds) s")
                let (other, otherSeconds) = try check(runner, agent, user: stranger.name, as: stranger.name)
                #expect(other.status == 0 && other.stdout.isEmpty && otherSeconds < 2.0, "\(attempt): \(other), \(otherSeconds) s")
                for caller in [nil, stranger.name] {
                    let (root, rootSeconds) = try check(runner, agent, user: "root", as: caller)
                    #expect(root.status == 0 && root.stdout.isEmpty && rootSeconds < 2.0, "\(attempt): root by \(caller ?? "root"): \(root)")
                }
                let (byRoot, byRootSeconds) = try check(runner, agent, user: child.name, as: nil)
                #expect(byRoot.status == 0 && byRootSeconds < 2.0, "\(attempt): the records decide for root: \(byRoot), \(byRootSeconds) s")
            }
        }
        kill(agent.pid, SIGSTOP)
        do {
            defer { kill(agent.pid, SIGCONT) }
            try expectClosedForTheChildOnly("did not answer within 1 s")
        }
        #expect(agent.stop() == 0)
        running = false
        try expectClosedForTheChildOnly("is not running")
    }
}
