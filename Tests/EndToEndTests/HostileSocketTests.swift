import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A managed child attacks the agent's socket (docs/security.md): logins, other children's status, counting
/// go on, and the agent answers again once the attack stops.
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: real child accounts"))
struct HostileSocketTests {
    /// The attacker, a managed child with time left; their processes count as screen time.
    static let attacker = "curfewhostile"
    /// Another managed child with time left, who asks for their status during the attack.
    static let sibling = "curfewsibling"
    /// A managed child whose time is used up: their login is refused, with the reason.
    static let barred = "curfewbarred"

    /// The attack (Tests/Bench/socket_attack.py, shared with `curfew-bench login`), passed to python3 -c
    /// so the attacker needs no access to the checkout.
    static let attack = try! String(
        contentsOf: CurfewRunner.repositoryRoot.appendingPathComponent("Tests/Bench/socket_attack.py"), encoding: .utf8)

    /// `curfew check-login` as root (PAM's account stack), timed.
    func checkLogin(_ runner: CurfewRunner, _ agent: AgentProcess, _ user: String) throws -> (CurfewRunner.Result, Double) {
        let started = Date()
        let result = try runner.run(
            ["check-login", "--socket", agent.socketPath], environment: ["PAM_USER": user, "PAM_SERVICE": "sshd"])
        return (result, Date().timeIntervalSince(started))
    }

    func loginRefusals(_ agent: AgentProcess) -> Int {
        agent.log.split(separator: "\n").filter { $0.contains("login refused") }.count
    }

    @Test func aChildHoldingTheSocketHangsNoLoginAndNoOtherChildsStatus() throws {
        let attacker = try TestAccount.ensure(Self.attacker)
        let sibling = try TestAccount.ensure(Self.sibling)
        let barred = try TestAccount.ensure(Self.barred)
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        // The children reach the socket under it.
        chmod(runner.root.path, 0o755)
        try runner.ok(["init"])
        for name in [attacker.name, sibling.name, barred.name] {
            try runner.ok(["user", "add", name])
            try runner.ok(["timezone", name, "UTC"])
            try runner.ok(["bedtime", name, "off"])
        }
        try runner.ok(["limit", attacker.name, "8h"])
        try runner.ok(["limit", sibling.name, "8h"])
        try runner.ok(["limit", barred.name, "15m"])
        let formatter = DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        let day = formatter.string(from: Date())
        let seed = "INSERT INTO usage (user, day, hour, app, milliseconds) VALUES ('\(barred.name)', '\(day)', 0, '', 900000);"
        #expect(try CurfewRunner.runTool("/usr/bin/sqlite3", ["\(runner.stateDir)/curfew.db", seed]) == 0)
        let refusal =
            "Curfew: \(barred.name) may not log in now: today's limit of 15m is used up. You may log in again tomorrow at 00:00.\n"

        let agent = try AgentProcess(runner, extraEnvironment: ["TZ": "UTC"], arguments: ["--no-process-connector"])
        var agentStopped = false
        defer { if !agentStopped { agent.killHard() } }

        // Idle: the agent answers.
        let (idle, _) = try checkLogin(runner, agent, barred.name)
        #expect(idle.status == 77 && idle.stdout == refusal, "\(idle)")
        #expect(loginRefusals(agent) == 1, "the agent did not answer the idle check\n\(agent.log)")

        let attackLog = runner.root.appendingPathComponent("attack.log").path
        let attackStarted = Date()
        let attackerPid = try spawnLogged(
            "/usr/bin/setpriv",
            [
                "--reuid=\(attacker.uid)", "--regid=\(attacker.gid)", "--clear-groups", "--", "/usr/bin/python3", "-c", Self.attack,
                agent.socketPath, "300",
            ], environment: ["PATH": "/usr/bin:/bin"], log: attackLog)
        var attackStopped = false
        defer {
            if !attackStopped {
                kill(attackerPid, SIGKILL)
                _ = waitForExit(attackerPid)
            }
        }
        func attackReport() -> String {
            ((try? String(contentsOfFile: attackLog, encoding: .utf8)) ?? "").split(separator: "\n").last.map(String.init) ?? ""
        }
        try waitUntil(seconds: 10, "the attack under way") { attackReport().contains("opened=") }
        // Let the slow connection send a byte or two.
        usleep(2_000_000)

        // Under attack, three rounds: every login decision within 2 s, each from the agent itself.
        var refusalsBefore = loginRefusals(agent)
        for round in 1...3 {
            let (unmanaged, unmanagedTime) = try checkLogin(runner, agent, "daemon")
            #expect(unmanaged.status == 0 && unmanaged.stdout.isEmpty, "round \(round): \(unmanaged)")
            #expect(unmanagedTime < 2.0, "round \(round): check-login of an unmanaged user took \(unmanagedTime) s")
            let (allowed, allowedTime) = try checkLogin(runner, agent, attacker.name)
            #expect(allowed.status == 0 && allowed.stdout.isEmpty, "round \(round): \(allowed)")
            #expect(allowedTime < 2.0, "round \(round): check-login of \(attacker.name) took \(allowedTime) s")
            let (refused, refusedTime) = try checkLogin(runner, agent, barred.name)
            #expect(refused.status == 77 && refused.stdout == refusal, "round \(round): \(refused)")
            #expect(refusedTime < 2.0, "round \(round): check-login of \(barred.name) took \(refusedTime) s")
            // The agent logs each refusal it decides; the CLI's fallback on disk would not.
            #expect(loginRefusals(agent) == refusalsBefore + 1, "round \(round): not answered by the agent\n\(attackReport())")
            refusalsBefore = loginRefusals(agent)

            // Another child's status, live from the agent, and the parent's.
            let started = Date()
            let status = try runner.run(["status", "--json", "--socket", agent.socketPath], asUser: sibling.name)
            let statusTime = Date().timeIntervalSince(started)
            #expect(status.status == 0 && status.stdout.contains("\"user\": \"\(sibling.name)\""), "round \(round): \(status)")
            #expect(statusTime < 2.0, "round \(round): the sibling's status took \(statusTime) s")
            let parent = try runner.run(["status", attacker.name, "--json", "--socket", agent.socketPath])
            #expect(parent.status == 0 && parent.stdout.contains("\"running\": true"), "round \(round): \(parent)")
            usleep(500_000)
        }

        // The attack was real: the held connections were cut and reopened, and the slow one never
        // lived much past the 1 s deadline.
        let report = attackReport()
        kill(attackerPid, SIGKILL)
        _ = waitForExit(attackerPid)
        attackStopped = true
        let attackSeconds = Date().timeIntervalSince(attackStarted)
        let fields = Dictionary(
            report.split(separator: " ").compactMap { field -> (String, String)? in
                let parts = field.split(separator: "=", maxSplits: 1)
                return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
            }, uniquingKeysWith: { $1 })
        #expect(Int(fields["opened"] ?? "") ?? 0 > 600, "the attacker did not keep 300 connections coming: \(report)")
        #expect(Int(fields["cut"] ?? "") ?? 0 > 300, "\(report)")
        let lifetimes = report.split(separator: "[").last.map { $0.dropLast().split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) } } ?? []
        #expect(lifetimes.count >= 3, "the slow connection was not cut off: \(report)")
        #expect(lifetimes.allSatisfy { $0 < 2.0 }, "the slow connection outlived the deadline: \(report)")

        // After the attack the agent answers as before, and it counted the attacker's time meanwhile.
        let (after, afterTime) = try checkLogin(runner, agent, barred.name)
        #expect(after.status == 77 && after.stdout == refusal && afterTime < 2.0, "\(after)")
        #expect(loginRefusals(agent) == refusalsBefore + 1, "not answered by the agent after the attack")
        let status = try runner.run(["status", "--json", "--socket", agent.socketPath], asUser: sibling.name)
        #expect(status.status == 0, "\(status)")
        let counted = try runner.ok(["status", attacker.name, "--json", "--socket", agent.socketPath]).stdout
        let screen = counted.split(separator: "\n").first { $0.contains("\"screenSeconds\"") }
            .flatMap { Int($0.split(separator: ":").last?.trimmingCharacters(in: CharacterSet(charactersIn: " ,")) ?? "") } ?? -1
        #expect(abs(Double(screen) - attackSeconds) <= 2.0, "screen \(screen) s during an attack of \(attackSeconds) s: \(counted)")
        agentStopped = true
        #expect(agent.stop() == 0, "\(agent.log)")
    }
}
