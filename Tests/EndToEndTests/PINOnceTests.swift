import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The parent's PIN answers one request, once (docs/security.md): a real child account that knows the
/// PIN (it watched a parent type it, or caught it) speaks to a real agent's socket itself, as the
/// indicator would, and replays and stacks approvals; its indicator is started with a dialog of the
/// child's own choosing in its environment; its tries are counted across agent restarts with a
/// back-off the agent's moved clock lives through.
@Suite(
    .serialized,
    .enabled(
        if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"),
        "needs root (a test account), dbus-daemon and python3"))
struct PINOnceTests {
    static let account = "curfewpinonce"
    let base = AgentTests()

    /// One line to the agent's socket and its answer, sent by the child itself (python3 as the child).
    static let client = """
        import socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sys.argv[1])
        s.sendall(sys.argv[2].encode() + b"\\n")
        data = b""
        while not data.endswith(b"\\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        sys.stdout.write(data.decode())
        """

    func send(_ line: String, as account: Accounts.Account, _ agent: AgentProcess) throws -> [String: Any] {
        let text = try CurfewRunner.capture("/usr/bin/python3", ["-c", Self.client, agent.socketPath, line], asUser: account.name)
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(line): \(text)")
    }

    func approve(_ pin: String, minutes: Int, as account: Accounts.Account, _ agent: AgentProcess) throws -> [String: Any] {
        try send(#"{"command":"approve-pin","pin":"\#(pin)","minutes":\#(minutes)}"#, as: account, agent)
    }

    func request(_ minutes: String, as account: Accounts.Account, _ runner: CurfewRunner, _ agent: AgentProcess) throws {
        let result = try runner.run(["request", minutes, "--socket", agent.socketPath], asUser: account.name)
        #expect(result.status == 0, "\(result)")
    }

    func extraMinutes(_ runner: CurfewRunner, _ agent: AgentProcess) throws -> Int? {
        let text = try runner.ok(["status", Self.account, "--json", "--socket", agent.socketPath]).stdout
        return (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["extraMinutes"] as? Int
    }

    func events(_ runner: CurfewRunner, kind: String) throws -> [[String: Any]] {
        let text = try runner.ok(["events", Self.account, "--json"]).stdout
        let events = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]], "\(text)")
        return events.filter { $0["kind"] as? String == kind }
    }

    func requests(_ runner: CurfewRunner) throws -> [[String: Any]] {
        let text = try runner.ok(["requests", "--all", "--json"]).stdout
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]], "\(text)")
    }

    /// The attack: the same approval sent twice. The first answers the child's request; the second finds
    /// none and grants nothing.
    @Test func theSameApprovalTwiceGrantsOnce() throws {
        let (runner, account, _, _) = try base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        let agent = try AgentProcess(runner)
        defer { agent.killHard() }
        chmod(runner.root.appendingPathComponent("run").path, 0o755)
        try runner.ok(["pin", "set"], stdin: "2468\n2468\n")
        try request("30m", as: account, runner, agent)
        let recordsBefore = try runner.recordFiles()

        let first = try approve("2468", minutes: 30, as: account, agent)
        #expect(first["ok"] as? Bool == true, "\(first)")
        try waitUntil(seconds: 10, "the status shows the extra time") { (try? extraMinutes(runner, agent)) == 30 }
        let replay = try approve("2468", minutes: 30, as: account, agent)
        print("PIN replay: \(replay)")
        #expect(replay["ok"] as? Bool == false, "the replay was granted: \(replay)")
        #expect(
            replay["message"] as? String
                == "the PIN answers a request, and \(Self.account) has none waiting; ask first (curfew request 30m); nothing changed")
        usleep(1_500_000)
        #expect(try extraMinutes(runner, agent) == 30)
        #expect(Set(try runner.recordFiles()).subtracting(recordsBefore).count == 1)

        // Who approved what: the request answered by the PIN, an event the parent sees.
        let answered = try requests(runner)
        #expect(answered.count == 1)
        #expect(answered.first?["status"] as? String == "approved")
        #expect(answered.first?["answeredBy"] as? String == "parent-pin")
        #expect(answered.first?["grantedMinutes"] as? Int == 30)
        let table = try runner.ok(["requests", "--all"]).stdout
        #expect(table.contains("approved 30m by PIN"), "\(table)")
        let approvals = try events(runner, kind: "pin-approved")
        #expect(approvals.count == 1)
        let message = approvals.first?["message"] as? String ?? ""
        #expect(message.hasPrefix("a parent approved request 1 with the PIN: 30m more screen time today (asked 30m; 30m of 1h by PIN in 24 hours; record "), "\(message)")
        // The refused replay cost no try.
        #expect(try events(runner, kind: "pin-try").count == 1)
        #expect(agent.stop() == 0, "\(agent.log)")
    }

    /// The attack: an approval for far more than was asked, and approvals stacked on new requests. Each
    /// gives at most what its request asked, and together at most the day's maximum (1h unless set).
    @Test func approvalsNeverExceedTheRequestOrTheDaysMaximum() throws {
        let (runner, account, _, _) = try base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        let agent = try AgentProcess(runner)
        defer { agent.killHard() }
        chmod(runner.root.appendingPathComponent("run").path, 0o755)
        try runner.ok(["pin", "set"], stdin: "2468\n2468\n")

        try request("20m", as: account, runner, agent)
        let greedy = try approve("2468", minutes: 480, as: account, agent)
        print("PIN stacking, 480 min on a request of 20: \(greedy)")
        #expect(greedy["ok"] as? Bool == true, "\(greedy)")
        #expect((greedy["grant"] as? [String: Any])?["minutes"] as? Int == 20, "\(greedy)")
        try request("1h", as: account, runner, agent)
        let second = try approve("2468", minutes: 60, as: account, agent)
        print("PIN stacking, a second request of 60 min: \(second)")
        #expect((second["grant"] as? [String: Any])?["minutes"] as? Int == 40, "\(second)")
        try request("30m", as: account, runner, agent)
        let third = try approve("2468", minutes: 30, as: account, agent)
        #expect(third["ok"] as? Bool == false, "\(third)")
        #expect(
            third["message"] as? String
                == "the PIN approved 1h in the last 24 hours, the most a parent allows (1h, curfew pin set --max-per-day); "
                + "a parent can use curfew approve 3; nothing changed")
        try waitUntil(seconds: 10, "the status shows the extra time") { (try? extraMinutes(runner, agent)) == 60 }
        usleep(1_500_000)
        #expect(try extraMinutes(runner, agent) == 60)
        // The third request still waits for a parent.
        #expect(try requests(runner).map { $0["status"] as? String } == ["approved", "approved", "pending"])

        // A parent sets a smaller maximum: it holds from then on (the 24 hours' approvals count).
        let bad = try runner.run(["pin", "set", "--max-per-day", "9h"], stdin: "2468\n2468\n")
        #expect(bad.status == 64, "\(bad)")
        #expect(bad.stderr == "curfew: --max-per-day must be a duration from 1m to 8h like 30m or 1h, got \"9h\"; nothing changed\n")
        let set = try runner.ok(["pin", "set", "--max-per-day", "90m"], stdin: "2468\n2468\n")
        #expect(set.stdout.hasSuffix("the PIN approves at most 1h30m in any 24 hours\n"), "\(set.stdout)")
        let more = try approve("2468", minutes: 30, as: account, agent)
        #expect((more["grant"] as? [String: Any])?["minutes"] as? Int == 30, "\(more)")
        try waitUntil(seconds: 10, "the status shows the extra time") { (try? extraMinutes(runner, agent)) == 90 }
        #expect(agent.stop() == 0, "\(agent.log)")
    }

    /// The attack: the child's indicator runs with CURFEW_PINENTRY and PATH pointing at a dialog of the
    /// child's that would catch the PIN a parent types. It is never run: the dialog is the one the
    /// package's configuration (root's) names; a configuration the child wrote is not read.
    @Test func aDialogTheChildChoseIsNeverRun() throws {
        let (runner, account, _, _) = try base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        let agent = try AgentProcess(runner)
        defer { agent.killHard() }
        chmod(runner.root.appendingPathComponent("run").path, 0o755)
        try runner.ok(["pin", "set"], stdin: "2468\n2468\n")

        // The child's catcher, under every name the indicator could look for.
        let fake = runner.root.appendingPathComponent("childs-own")
        try FileManager.default.createDirectory(at: fake, withIntermediateDirectories: true)
        let catcher = """
            #!/bin/sh
            echo "$0" >> '\(fake.path)/caught'
            echo "OK Pleased to meet you"
            while IFS= read -r line; do
              case "$line" in
                GETPIN) printf 'D 2468\\nOK\\n' ;;
                BYE) echo OK; exit 0 ;;
                *) echo OK ;;
              esac
            done
            """
        for name in ["catcher", "pinentry", "pinentry-gnome3", "pinentry-gtk2"] {
            try Data(catcher.utf8).write(to: fake.appendingPathComponent(name))
            chmod(fake.appendingPathComponent(name).path, 0o755)
        }
        // A configuration of the child's naming the catcher.
        try Data("CURFEW_PINENTRY=\(fake.path)/catcher\n".utf8).write(to: fake.appendingPathComponent("curfew"))
        _ = try CurfewRunner.runTool("/bin/chown", ["-R", "\(account.uid):\(account.gid)", fake.path])
        let hostile = ["CURFEW_PINENTRY=\(fake.path)/catcher", "PATH=\(fake.path):/usr/bin:/bin"]
        let caught = fake.appendingPathComponent("caught").path

        // The child's environment only, and then the child's configuration: no dialog of root's is named
        // (this machine's /usr/bin/pinentry, if any, has no screen here), and the catcher never runs.
        for dialog in [ParentPINTests.Dialog.system, .configuration("\(fake.path)/curfew")] {
            let session = try ParentPINTests.Session(
                root: runner.root, user: account, socket: agent.socketPath, childEnvironment: hostile, dialog: dialog)
            try session.clickApprove(typing: [])
            try waitUntil(seconds: 30, "the approval is over") {
                FileManager.default.fileExists(atPath: caught)
                    || ["No PIN dialog", "Approval cancelled", "PIN dialog failed", "could not start", "A parent approved"].contains {
                        session.menu.contains($0)
                    }
            }
            print("PIN dialog with the child's environment and \(dialog): \(session.menu)")
            session.stop()
            #expect(!FileManager.default.fileExists(atPath: caught), "the child's dialog ran: \((try? String(contentsOfFile: caught, encoding: .utf8)) ?? "")")
        }
        #expect(try extraMinutes(runner, agent) == 0)

        // With the package's configuration (root's), its dialog asks, whatever the child's environment says.
        let session = try ParentPINTests.Session(root: runner.root, user: account, socket: agent.socketPath, childEnvironment: hostile)
        defer { session.stop() }
        let dialog = try session.approve(typing: ["2468"])
        #expect(dialog.contains("GETPIN\nBYE\n"), "\(dialog)")
        try waitUntil(seconds: 10, "the menu says a parent approved") { session.menu.contains("A parent approved 30 min more") }
        #expect(!FileManager.default.fileExists(atPath: caught))
        try waitUntil(seconds: 10, "the status shows the extra time") { (try? extraMinutes(runner, agent)) == 30 }
        #expect(try requests(runner).first?["answeredBy"] as? String == "parent-pin")
        #expect(agent.stop() == 0, "\(agent.log)")
    }

    /// The attack: guessing. Five tries in 15 minutes, then a wait that doubles with each wrong try in a
    /// row, counted in the database: an agent restart resets nothing.
    @Test func triesSlowDownAndSurviveRestarts() throws {
        let (runner, account, _, _) = try base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        let offsetFile = runner.root.appendingPathComponent("clock-offset").path
        try Data("0".utf8).write(to: URL(fileURLWithPath: offsetFile))
        var agent = try AgentProcess(runner, arguments: ["--clock-offset-file", offsetFile])
        defer { agent.killHard() }
        chmod(runner.root.appendingPathComponent("run").path, 0o755)
        try runner.ok(["pin", "set"], stdin: "2468\n2468\n")
        try request("30m", as: account, runner, agent)
        func move(minutes: Int) throws {
            let now = Int((try? String(contentsOfFile: offsetFile, encoding: .utf8)) ?? "0") ?? 0
            try Data("\(now + minutes * 60_000)".utf8).write(to: URL(fileURLWithPath: offsetFile))
        }

        for pin in ["0000", "1111", "2222", "3333", "4444"] {
            #expect(try approve(pin, minutes: 30, as: account, agent)["error"] as? String == "wrong-pin")
        }
        #expect(agent.stop() == 0)
        agent = try AgentProcess(runner, arguments: ["--clock-offset-file", offsetFile])
        let limited = try approve("2468", minutes: 30, as: account, agent)
        #expect((limited["message"] as? String)?.hasPrefix("too many PIN tries: 5 in the last 15 minutes; try again in ") == true, "\(limited)")

        // 16 minutes on: one more try, wrong; then the right PIN must wait 30 minutes, across a restart.
        try move(minutes: 16)
        #expect(try approve("5555", minutes: 30, as: account, agent)["error"] as? String == "wrong-pin")
        let backedOff = try approve("2468", minutes: 30, as: account, agent)
        print("PIN back-off, the right PIN after 6 wrong ones: \(backedOff)")
        #expect(backedOff["ok"] as? Bool == false, "\(backedOff)")
        #expect(backedOff["message"] as? String == "too many wrong PINs: 6 in a row; try again in 30m; nothing changed")
        #expect(agent.stop() == 0)
        agent = try AgentProcess(runner, arguments: ["--clock-offset-file", offsetFile])
        try move(minutes: 20)
        let stillBackedOff = try approve("2468", minutes: 30, as: account, agent)
        #expect(stillBackedOff["message"] as? String == "too many wrong PINs: 6 in a row; try again in 10m; nothing changed")
        #expect(try extraMinutes(runner, agent) == 0)
        #expect(try events(runner, kind: "pin-try").count == 6)

        // Once the wait is over, the right PIN answers the request.
        try move(minutes: 11)
        let granted = try approve("2468", minutes: 30, as: account, agent)
        #expect(granted["ok"] as? Bool == true, "\(granted)")
        #expect(agent.stop() == 0, "\(agent.log)")
    }
}
