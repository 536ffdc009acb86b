import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Two network namespaces made by a test and joined by a veth pair, with IPv4 and IPv6 addresses
/// (documentation ranges, reachable only between the two): the agent and the child run in `near`,
/// a TCP and UDP server (python3) in `far`. Nothing leaves the namespaces.
final class NetworkPair {
    let near: String
    let far: String
    let root: URL
    var server: Int32 = 0
    static let nearIPv4 = "192.0.2.1"
    static let farIPv4 = "192.0.2.2"
    static let nearIPv6 = "2001:db8:cf::1"
    static let farIPv6 = "2001:db8:cf::2"
    static let tcpPort = 18_080
    static let udpPort = 18_081

    /// `root`: a directory every user can read, for the scripts.
    init(root: URL) throws {
        self.root = root
        let tag = String(UUID().uuidString.prefix(6)).lowercased()
        near = "cfnear\(tag)"
        far = "cffar\(tag)"
        let ip = "/usr/sbin/ip"
        let steps: [[String]] = [
            ["netns", "add", near], ["netns", "add", far],
            ["link", "add", "cfa\(tag)", "type", "veth", "peer", "name", "cfb\(tag)"],
            ["link", "set", "cfa\(tag)", "netns", near], ["link", "set", "cfb\(tag)", "netns", far],
            ["-n", near, "addr", "add", "\(Self.nearIPv4)/24", "dev", "cfa\(tag)"],
            ["-n", far, "addr", "add", "\(Self.farIPv4)/24", "dev", "cfb\(tag)"],
            ["-n", near, "addr", "add", "\(Self.nearIPv6)/64", "dev", "cfa\(tag)", "nodad"],
            ["-n", far, "addr", "add", "\(Self.farIPv6)/64", "dev", "cfb\(tag)", "nodad"],
            ["-n", near, "link", "set", "cfa\(tag)", "up"], ["-n", far, "link", "set", "cfb\(tag)", "up"],
            ["-n", near, "link", "set", "lo", "up"], ["-n", far, "link", "set", "lo", "up"],
        ]
        for step in steps {
            guard try CurfewRunner.runTool(ip, step) == 0 else {
                cleanUp()
                throw TestFailure("ip \(step.joined(separator: " ")) failed")
            }
        }
        try Data(Self.serverScript.utf8).write(to: root.appendingPathComponent("netserver.py"))
        try Data(Self.probeScript.utf8).write(to: root.appendingPathComponent("netprobe.py"))
        server = try spawnLogged(
            ip, ["netns", "exec", far, "/usr/bin/python3", root.appendingPathComponent("netserver.py").path],
            environment: ["PATH": "/usr/bin:/bin"], log: root.appendingPathComponent("netserver.log").path)
        // Ready when a probe from `near` (as root) reaches it.
        try waitUntil(seconds: 15, "the test server") { (try? self.probe(as: nil))?.values.allSatisfy { $0 } == true }
    }

    func cleanUp() {
        if server > 0 {
            kill(server, SIGKILL)
            _ = waitForExit(server)
        }
        _ = try? CurfewRunner.runTool("/usr/sbin/ip", ["netns", "del", near])
        _ = try? CurfewRunner.runTool("/usr/sbin/ip", ["netns", "del", far])
    }

    /// What `user` (nil: root) reaches from `near`: `tcp4`, `tcp6`, `udp4`, `udp6` (the far server),
    /// `lo4`, `lo6` (a TCP listener of the probe's own on 127.0.0.1 and ::1).
    func probe(as user: String?) throws -> [String: Bool] {
        let script = root.appendingPathComponent("netprobe.py").path
        let command = ["netns", "exec", near] + (user.map { ["/usr/sbin/runuser", "-u", $0, "--"] } ?? []) + ["/usr/bin/python3", script]
        let output = try CurfewRunner.capture("/usr/sbin/ip", command)
        guard let object = try? JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Bool] else {
            throw TestFailure("bad probe output: \(output)")
        }
        return object
    }

    /// The nftables table of the agent in `near`.
    var filter: NetworkFilter { NetworkFilter(command: ["/usr/sbin/ip", "netns", "exec", near, "/usr/sbin/nft"]) }

    static let serverScript = """
        import socket, threading, time
        def tcp():
            s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("::", \(tcpPort)))
            s.listen(64)
            while True:
                c, _ = s.accept()
                try:
                    c.sendall(b"ok")
                finally:
                    c.close()
        def udp():
            s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            s.bind(("::", \(udpPort)))
            while True:
                data, peer = s.recvfrom(512)
                s.sendto(data, peer)
        for target in (tcp, udp):
            threading.Thread(target=target, daemon=True).start()
        time.sleep(900)
        """

    static let probeScript = """
        import json, socket, threading
        result = {}
        def tcp(name, family, address):
            try:
                s = socket.socket(family, socket.SOCK_STREAM)
                s.settimeout(1.5)
                s.connect(address)
                result[name] = s.recv(2) == b"ok"
                s.close()
            except OSError:
                result[name] = False
        def udp(name, family, address):
            try:
                s = socket.socket(family, socket.SOCK_DGRAM)
                s.settimeout(1.5)
                s.sendto(b"ping", address)
                result[name] = s.recvfrom(16)[0] == b"ping"
                s.close()
            except OSError:
                result[name] = False
        def loopback(name, family, host):
            try:
                listener = socket.socket(family, socket.SOCK_STREAM)
                listener.bind((host, 0))
                listener.listen(1)
                client = socket.socket(family, socket.SOCK_STREAM)
                client.settimeout(1.5)
                client.connect(listener.getsockname()[:2])
                peer, _ = listener.accept()
                peer.sendall(b"ok")
                result[name] = client.recv(2) == b"ok"
            except OSError:
                result[name] = False
        checks = [
            (tcp, "tcp4", socket.AF_INET, ("\(farIPv4)", \(tcpPort))),
            (tcp, "tcp6", socket.AF_INET6, ("\(farIPv6)", \(tcpPort))),
            (udp, "udp4", socket.AF_INET, ("\(farIPv4)", \(udpPort))),
            (udp, "udp6", socket.AF_INET6, ("\(farIPv6)", \(udpPort))),
            (loopback, "lo4", socket.AF_INET, "127.0.0.1"),
            (loopback, "lo6", socket.AF_INET6, "::1"),
        ]
        threads = [threading.Thread(target=f, args=(n, fam, a)) for f, n, fam, a in checks]
        for t in threads: t.start()
        for t in threads: t.join()
        print(json.dumps(result, sort_keys=True))
        """
}

/// The `network` lockout with the real agent in a network namespace of the test's own (nftables
/// rules are per namespace), real child accounts and real traffic over a veth pair.
@Suite(
    .serialized,
    .enabled(
        if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/nft")
            && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip"),
        "needs root, ip and nft (nftables)"))
struct NetworkLockoutTests {
    static let child = "curfewnet"
    /// Another user, not managed: never cut off.
    static let other = "curfewnetpeer"
    static let cut = ["tcp4": false, "tcp6": false, "udp4": false, "udp6": false, "lo4": true, "lo6": true]
    static let open = ["tcp4": true, "tcp6": true, "udp4": true, "udp6": true, "lo4": true, "lo6": true]

    func waitForProbe(_ pair: NetworkPair, _ user: String?, _ expected: [String: Bool], _ what: String, agent: AgentProcess?) throws {
        var last: [String: Bool] = [:]
        do {
            try waitUntil(seconds: 30, what) {
                last = (try? pair.probe(as: user)) ?? [:]
                return last == expected
            }
        } catch {
            throw TestFailure("\(error): the probe gave \(last)\n\(agent?.log ?? "")")
        }
    }

    func events(_ runner: CurfewRunner, kind: String) throws -> [[String: Any]] {
        let output = try runner.ok(["events", "--json"]).stdout
        guard let all = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]] else {
            throw TestFailure("bad events: \(output)")
        }
        return all.filter { $0["kind"] as? String == kind }
    }

    @Test func atBedtimeOnlyTheChildsTrafficIsDroppedUntilAllowedAgainAndTheTableIsReconciledAfterACrash() throws {
        let child = try TestAccount.ensure(Self.child)
        let other = try TestAccount.ensure(Self.other)
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        chmod(runner.root.path, 0o755)
        let pair = try NetworkPair(root: runner.root)
        defer { pair.cleanUp() }
        try runner.ok(["init"])
        try runner.ok(["user", "add", child.name])
        try runner.ok(["timezone", child.name, "UTC"])
        try runner.ok(["limit", child.name, "unlimited"])
        try runner.ok(["lockout", child.name, "network", "--at", "bedtime"])
        let now = Int64(Date().timeIntervalSince1970)
        let start = now / 60 * 60 - 3600
        let end = start + 3 * 3600
        try runner.ok(["bedtime", child.name, "\(utcClock(start))-\(utcClock(end))"])

        // Before the agent: everyone reaches the server (so the probe can tell).
        #expect(try pair.probe(as: child.name) == Self.open)
        // A program of the child's that goes on through the lockout (the session and offline apps do).
        let offlineApp = try spawnLogged(
            "/usr/sbin/ip", ["netns", "exec", pair.near, "/usr/bin/setpriv", "--reuid=\(child.uid)", "--regid=\(child.gid)", "--clear-groups", "--", "/usr/bin/tail", "-f", "/dev/null"],
            environment: ["PATH": "/usr/bin:/bin"], log: "/dev/null")
        defer {
            kill(offlineApp, SIGKILL)
            _ = waitForExit(offlineApp)
        }
        // The child's terminal: the agent tells them there.
        let terminal = try UserTerminal(owner: child)
        let launcher = ["/usr/sbin/ip", "netns", "exec", pair.near]
        func startAgent() throws -> AgentProcess {
            try AgentProcess(runner, extraEnvironment: ["TZ": "UTC"], arguments: ["--no-process-connector"], launcher: launcher)
        }
        var agent = try startAgent()
        defer { agent.killHard() }

        try waitForProbe(pair, child.name, Self.cut, "the child's traffic dropped at bedtime", agent: agent)
        #expect(try pair.probe(as: nil) == Self.open, "root is never cut off")
        #expect(try pair.probe(as: other.name) == Self.open, "an unmanaged user is never cut off")
        #expect(try pair.filter.blockedUIDs() == [child.uid])
        var status: Int32 = 0
        #expect(waitpid(offlineApp, &status, WNOHANG) == 0, "the child's offline program goes on")
        let login = try runner.run(["check-login", "--user", child.name, "--socket", agent.socketPath])
        #expect(login.status == 0, "logins go on under the network lockout: \(login)")
        let off = try events(runner, kind: "network-off")
        // Local words: a bedtime that ends after midnight ends "tomorrow at" its time.
        let until = utcWhen(end)
        #expect(
            off.count == 1
                && off.first?["message"] as? String
                    == "\(child.name)'s network traffic is dropped: it is bedtime: the internet is off until \(until)",
            "\(off)")

        try waitUntil(seconds: 10, "the child told") {
            terminal.read().contains("Curfew: it is bedtime: the internet is off until \(until); ask a parent: curfew request 30m")
        }
        #expect(!terminal.text.contains("time is up"), "one message, not the logout one: \(terminal.text)")
        // A firewall reload (nftables.service starts with `flush ruleset`) takes the table away: the
        // agent reads it back every 10 s and puts it back.
        #expect(try CurfewRunner.runTool("/usr/sbin/ip", ["netns", "exec", pair.near, "/usr/sbin/nft", "flush", "ruleset"]) == 0)
        #expect(try pair.filter.blockedUIDs() == [])
        try waitForProbe(pair, child.name, Self.cut, "the table restored after a flush", agent: agent)
        #expect(try pair.filter.blockedUIDs() == [child.uid])
        #expect(try events(runner, kind: "network-off").count == 1, "restored, not a new lockout")
        // A later bedtime tonight: allowed again, the traffic flows at once.
        try runner.ok(["grant", child.name, "0", "--bedtime", "2h"])
        try waitForProbe(pair, child.name, Self.open, "the child's traffic back after the grant", agent: agent)
        #expect(try pair.filter.blockedUIDs() == [])
        try waitUntil(seconds: 5, "a network-on event") { ((try? events(runner, kind: "network-on")) ?? []).count == 1 }
        try waitUntil(seconds: 10, "the child told it is back") { terminal.read().contains("Curfew: the internet is on again.") }

        // kill -9, then a rule left behind for the child, who is allowed: the restarted agent removes it.
        agent.killHard()
        try pair.filter.apply([NetworkFilter.Blocked(uid: child.uid, user: child.name)])
        #expect(try pair.probe(as: child.name) == Self.cut, "the stale rule drops the child's traffic")
        agent = try startAgent()
        try waitForProbe(pair, child.name, Self.open, "the stale rule removed at start", agent: agent)
        #expect(try pair.filter.blockedUIDs() == [])

        // kill -9 while the child is allowed; meanwhile no time at all with the network lockout for
        // every cause: the restarted agent cuts the child off, and the rule outlives another kill -9.
        agent.killHard()
        try runner.ok(["lockout", child.name, "network", "--no-wait"])
        try runner.ok(["limit", child.name, "0", "--no-wait"])
        agent = try startAgent()
        try waitForProbe(pair, child.name, Self.cut, "the rule re-added at start", agent: agent)
        #expect(try pair.filter.blockedUIDs() == [child.uid])
        agent.killHard()
        #expect(try pair.probe(as: child.name) == Self.cut, "the lockout holds while the agent is gone")
        agent = try startAgent()
        // A policy change lifts it.
        try runner.ok(["limit", child.name, "unlimited", "--no-wait"])
        try waitForProbe(pair, child.name, Self.open, "the child's traffic back after a policy change", agent: agent)
        #expect(try pair.filter.blockedUIDs() == [])
        #expect(try pair.probe(as: other.name) == Self.open)
        #expect(waitpid(offlineApp, &status, WNOHANG) == 0, "the child's offline program went on throughout")
    }
}
