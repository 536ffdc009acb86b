import CurfewCore
import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `curfew check-login` as PAM runs it: scheduled jobs (cron, atd) are not logins, and the fail mode
/// comes from /etc/default/curfew (here CURFEW_DEFAULTS_FILE) unless the environment sets it.
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: a test account and the agent"))
struct LoginServiceTests {
    @Test func cronIsNotALoginAndTheFailModeComesFromTheDefaultsFile() throws {
        let account = try TestAccount.ensure("curfewpam")
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        try runner.ok(["init"])
        try runner.ok(["user", "add", account.name])
        try runner.ok(["timezone", account.name, "UTC"])
        let now = Int64(Date().timeIntervalSince1970)
        try runner.ok(["bedtime", account.name, "\(utcClock(now - 7200))-\(utcClock(now + 7200))"])
        // The agent notes whom it manages, then stops: the records on disk decide from here on.
        let agent = try AgentProcess(runner)
        try waitUntil(seconds: 10, "the managed-users list") {
            (try? String(contentsOfFile: "\(runner.stateDir)/managed-users", encoding: .utf8)) == "\(account.name)\n"
        }
        #expect(agent.stop() == 0)
        let check = ["check-login", "--socket", runner.root.appendingPathComponent("no-agent.sock").path]
        func pam(_ service: String, _ extra: [String: String] = [:]) throws -> CurfewRunner.Result {
            try runner.run(check, environment: ["PAM_USER": account.name, "PAM_SERVICE": service].merging(extra) { $1 })
        }

        for service in ["login", "sshd", "gdm-password", "su", "systemd-user"] {
            let refused = try pam(service)
            #expect(refused.status == 77 && refused.stdout.contains("it is bedtime"), "\(service): \(refused)")
        }
        for service in ["cron", "atd", "anacron"] {
            let job = try pam(service)
            #expect(job.status == 0 && job.stdout.isEmpty && job.stderr.isEmpty, "\(service): \(job)")
        }

        // No policy can be read at all (records and database gone): the fail mode decides.
        for record in try runner.recordFiles() { try FileManager.default.removeItem(atPath: "\(runner.sharedDir)/records/\(record)") }
        for suffix in ["", "-wal", "-shm"] { unlink("\(runner.stateDir)/curfew.db\(suffix)") }
        let defaults = runner.root.appendingPathComponent("default-curfew").path
        func write(_ text: String) throws { try text.write(toFile: defaults, atomically: true, encoding: .utf8) }
        let file = ["CURFEW_DEFAULTS_FILE": defaults]

        let missing = try pam("login", ["CURFEW_DEFAULTS_FILE": runner.root.appendingPathComponent("none").path])
        #expect(missing.status == 77 && missing.stdout.contains("no valid policy can be read"), "\(missing)")
        try write("# as shipped\nCURFEW_FAIL_MODE=closed\n")
        #expect(try pam("login", file).status == 77)
        try write("# opened by the administrator\n  CURFEW_FAIL_MODE=\"open\"  \n#CURFEW_FAIL_MODE=closed\n")
        let open = try pam("login", file)
        #expect(open.status == 0 && open.stderr.isEmpty, "\(open)")
        // The environment wins over the file (systemd passes the same file to the agent as its environment).
        #expect(try pam("login", file.merging(["CURFEW_FAIL_MODE": "closed"]) { $1 }).status == 77)
        try write("CURFEW_FAIL_MODE=maybe\n")
        let bad = try pam("login", file)
        #expect(bad.status == 77, "\(bad)")
        #expect(bad.stderr == "curfew: CURFEW_FAIL_MODE must be open or closed, got \"maybe\"; failing closed\n", "\(bad)")

        // The agent reads the same file: open, it lets the user in.
        try write("CURFEW_FAIL_MODE=open\n")
        let opened = try AgentProcess(runner, extraEnvironment: file)
        defer { opened.killHard() }
        let viaAgent = ["check-login", "--user", account.name, "--socket", opened.socketPath]
        var answer = try runner.run(viaAgent)
        for _ in 0..<40 where answer.status != 0 {
            usleep(250_000)
            answer = try runner.run(viaAgent)
        }
        #expect(answer.status == 0, "\(answer)\n\(opened.log)")
    }
}
