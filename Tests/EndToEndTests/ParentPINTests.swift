import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// "A parent approves here…": `curfew pin set` by root, then the child's own `curfew-indicator` on
/// their own session bus runs a pinentry stand-in (a script that speaks Assuan and types the PINs the
/// test gives it; root's, named in a configuration root owns, as /etc/default/curfew names the system's
/// pinentry) when its menu item is clicked through `com.canonical.dbusmenu.Event`; a real agent
/// checks the PIN for the real child account and publishes the grant.
@Suite(
    .serialized,
    .enabled(
        if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon"),
        "needs root (a test account) and dbus-daemon"))
struct ParentPINTests {
    static let account = "curfewpin"
    let base = AgentTests()

    /// The pinentry stand-in: logs every command it receives (the PIN travels the other way), answers
    /// the Nth GETPIN with line N of `answers`, cancels when there is none; `wait` holds the dialog
    /// open (a person who has not typed yet) until a file `release` exists, then cancels.
    static func standIn(directory: String) -> String {
        """
        #!/bin/sh
        dir='\(directory)'
        n=0
        echo "OK Pleased to meet you"
        while IFS= read -r line; do
          printf '%s\\n' "$line" >> "$dir/pinentry.log"
          case "$line" in
            GETPIN)
              n=$((n+1))
              pin=$(sed -n "${n}p" "$dir/answers")
              if [ "$pin" = wait ]; then
                while [ ! -e "$dir/release" ]; do sleep 0.1; done
                pin=""
              fi
              if [ -n "$pin" ]; then printf 'D %s\\nOK\\n' "$pin"; else echo "ERR 83886179 Operation cancelled <Pinentry>"; fi ;;
            BYE) echo "OK closing connection"; exit 0 ;;
            *) echo OK ;;
          esac
        done
        """
    }

    /// Which dialog the indicator is told of: the stand-in (root's, through `--config` and a
    /// configuration file root owns), none (`/etc/default/curfew` as the machine has it), or `--config`
    /// with another file.
    enum Dialog {
        case standIn
        case system
        case configuration(String)
    }

    /// The child's session bus and their indicator, with the stand-in as its pinentry.
    final class Session {
        let user: Accounts.Account
        let directory: URL
        let busAddress: String
        var pids: [Int32] = []
        var itemName = ""

        /// `childEnvironment`: what the child adds to the indicator's environment (`NAME=value`, taking
        /// the place of the same name).
        init(root: URL, user: Accounts.Account, socket: String, childEnvironment: [String] = [], dialog: Dialog = .standIn) throws {
            self.user = user
            let name = UUID().uuidString.prefix(8)
            directory = root.appendingPathComponent("session-\(user.name)-\(name)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            // The stand-in and its configuration are root's, in a directory only root may change.
            let system = root.appendingPathComponent("system-\(name)")
            try FileManager.default.createDirectory(at: system, withIntermediateDirectories: true)
            chmod(system.path, 0o755)
            let pinentry = system.appendingPathComponent("pinentry-standin")
            try Data(ParentPINTests.standIn(directory: directory.path).utf8).write(to: pinentry)
            chmod(pinentry.path, 0o755)
            let configuration = system.appendingPathComponent("curfew")
            try Data("# as /etc/default/curfew names it\nCURFEW_PINENTRY=\(pinentry.path)\n".utf8).write(to: configuration)
            chmod(configuration.path, 0o644)
            try Data().write(to: directory.appendingPathComponent("answers"))
            _ = try CurfewRunner.runTool("/bin/chown", ["-R", "\(user.uid):\(user.gid)", directory.path])
            busAddress = "unix:path=\(directory.path)/bus"
            var environment = [
                "PATH=/usr/bin:/bin", "HOME=\(directory.path)", "XDG_RUNTIME_DIR=\(directory.path)",
                "DBUS_SESSION_BUS_ADDRESS=\(busAddress)",
            ]
            for variable in childEnvironment {
                let key = variable.prefix { $0 != "=" } + "="
                environment.removeAll { $0.hasPrefix(key) }
                environment.append(variable)
            }
            let options: [String] =
                switch dialog {
                case .standIn: ["--config", configuration.path]
                case .system: []
                case .configuration(let path): ["--config", path]
                }
            pids.append(
                try spawnLogged(
                    "/usr/sbin/runuser",
                    ["-u", user.name, "--", "/usr/bin/env", "-i"] + environment + [
                        "/usr/bin/dbus-daemon", "--session", "--nofork", "--nopidfile", "--address=\(busAddress)",
                    ], environment: [:], log: root.appendingPathComponent("bus.log").path))
            try waitUntil(seconds: 20, "the session bus listens") { FileManager.default.fileExists(atPath: "\(directory.path)/bus") }
            let binary = CurfewRunner.binDirectory.appendingPathComponent("curfew-indicator").path
            pids.append(
                try spawnLogged(
                    "/usr/sbin/runuser", ["-u", user.name, "--", "/usr/bin/env", "-i"] + environment + [binary, "--socket", socket] + options,
                    environment: [:], log: root.appendingPathComponent("indicator.log").path))
            try waitUntil(seconds: 30, "the indicator is on the bus") {
                let names = (try? self.busctl(["list", "--no-legend"])) ?? ""
                guard let line = names.split(separator: "\n").first(where: { $0.hasPrefix("org.kde.StatusNotifierItem-") }) else { return false }
                self.itemName = String(line.split(separator: " ")[0])
                return true
            }
        }

        func busctl(_ arguments: [String]) throws -> String {
            try CurfewRunner.capture(
                "/usr/bin/env", ["DBUS_SESSION_BUS_ADDRESS=\(busAddress)", "/usr/bin/busctl", "--user"] + arguments, asUser: user.name)
        }

        var menu: String {
            (try? busctl(["call", itemName, "/MenuBar", "com.canonical.dbusmenu", "GetLayout", "iias", "0", "10", "0"])) ?? ""
        }

        var log: String { (try? String(contentsOf: directory.appendingPathComponent("pinentry.log"), encoding: .utf8)) ?? "" }

        /// Clicks "A parent approves 30 min here…" with the stand-in typing `answers`, and waits until
        /// the dialog was closed (its BYE); returns what the stand-in was told in this dialog.
        func approve(typing answers: [String]) throws -> String {
            let before = log
            let dialogs = before.components(separatedBy: "\nBYE\n").count
            try clickApprove(typing: answers)
            try waitUntil(seconds: 30, "the PIN dialog is closed") { self.log.components(separatedBy: "\nBYE\n").count > dialogs }
            return String(log.dropFirst(before.count))
        }
        /// Clicks "A parent approves 30 min here…" with the stand-in typing `answers`; the click's
        /// call returns at once (the dialog is the indicator's business).
        func clickApprove(typing answers: [String]) throws {
            let answersFile = directory.appendingPathComponent("answers")
            try Data(answers.map { $0 + "\n" }.joined().utf8).write(to: answersFile)
            chown(answersFile.path, user.uid, user.gid)
            _ = try busctl(["call", itemName, "/MenuBar", "com.canonical.dbusmenu", "Event", "isvu", "131", "clicked", "s", "", "0"])
        }

        func stop() {
            for pid in pids.reversed() {
                kill(pid, SIGKILL)
                _ = waitForExit(pid)
            }
            // runuser forks: the bus and the indicator are its children, and this account is this suite's alone.
            _ = try? CurfewRunner.runTool("/usr/bin/pkill", ["-KILL", "-u", user.name])
        }
    }

    func status(_ runner: CurfewRunner, _ agent: AgentProcess) throws -> [String: Any] {
        let text = try runner.ok(["status", Self.account, "--json", "--socket", agent.socketPath]).stdout
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    func pinTries(_ runner: CurfewRunner) throws -> [[String: Any]] {
        let text = try runner.ok(["events", Self.account, "--json"]).stdout
        let events = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]], "\(text)")
        return events.filter { $0["kind"] as? String == "pin-try" }
    }

    @Test func pinSetRefusesWhatItMustAndKeepsOnlyAHash() throws {
        let (runner, account, _, _) = try base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        let file = runner.root.appendingPathComponent("state/parent-pin").path
        let cases: [(String, String)] = [
            ("24\n24\n", "curfew: a PIN must be 4 to 12 digits (0-9), got 2 digits\n"),
            ("12a4\n12a4\n", "curfew: a PIN must be 4 to 12 digits (0-9), got 4 characters, 1 of them not a digit\n"),
            ("1234567890123\n", "curfew: a PIN must be 4 to 12 digits (0-9), got 13 digits\n"),
            ("2468\n1357\n", "curfew: the two PINs differ; nothing changed\n"),
            ("", "curfew: no PIN was typed (end of input); nothing changed\n"),
        ]
        for (input, error) in cases {
            let result = try runner.run(["pin", "set"], stdin: input)
            #expect(result.status == 64, "\(result)")
            #expect(result.stderr == error)
            #expect(result.stdout == "")
            #expect(!FileManager.default.fileExists(atPath: file))
        }
        // A child (or any user but root) may not set it, whatever they type.
        let child = try runner.run(["pin", "set"], stdin: "2468\n2468\n", asUser: account.name)
        #expect(child.status == 77, "\(child)")
        #expect(child.stderr == "curfew: only a parent may set the PIN (run as root: sudo curfew pin set)\n")
        #expect(try runner.run(["pin", "clear"], asUser: account.name).status == 77)

        let set = try runner.ok(["pin", "set"], stdin: "2468\n2468\n")
        #expect(set.stdout == "parent PIN set (\(file)); a parent can now approve extra time on a child's screen\n")
        var info = stat()
        #expect(stat(file, &info) == 0)
        #expect(info.st_mode & 0o7777 == 0o600)
        #expect(info.st_uid == 0)
        let stored = try String(contentsOfFile: file, encoding: .utf8)
        #expect(stored.hasPrefix("{\"N\":32768,\"algorithm\":\"scrypt\",\"hash\":\""), "\(stored)")
        #expect(!stored.contains("2468"))
        // Setting it again replaces it: a new salt, so new bytes.
        try runner.ok(["pin", "set"], stdin: "2468\n2468\n")
        #expect(try String(contentsOfFile: file, encoding: .utf8) != stored)
        #expect(try runner.ok(["pin", "clear"]).stdout == "parent PIN removed\n")
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(try runner.ok(["pin", "clear"]).stdout == "no parent PIN was set\n")
    }

    @Test func aParentApprovesOnTheChildsScreen() throws {
        let (runner, account, _, _) = try base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        var agent = try AgentProcess(runner)
        defer { agent.killHard() }
        chmod(runner.root.appendingPathComponent("run").path, 0o755)
        let session = try Session(root: runner.root, user: account, socket: agent.socketPath)
        defer { session.stop() }
        // busctl writes bytes outside ASCII in octal: "…" is \342\200\246.
        #expect(session.menu.contains(#""A parent approves 30 min here\342\200\246""#), "\(session.menu)")

        // While the dialog waits for a person, the item goes on answering the panel and the menu says
        // so; a second click opens no second dialog. The person cancels: the menu says that.
        try session.clickApprove(typing: ["wait"])
        try waitUntil(seconds: 10, "the dialog asks for the PIN") { session.log.hasSuffix("GETPIN\n") }
        let opened = Date()
        #expect(session.menu.contains("A parent types the PIN in the dialog"), "\(session.menu)")
        try session.clickApprove(typing: ["wait"])
        try waitUntil(seconds: 10, "the menu says the dialog is open") { session.menu.contains("The PIN dialog is open") }
        print("parent PIN: the menu answered with the dialog open, in \(String(format: "%.2f", Date().timeIntervalSince(opened))) s")
        #expect(session.log.components(separatedBy: "SETTITLE").count == 2, "one dialog: \(session.log)")
        try Data().write(to: session.directory.appendingPathComponent("release"))
        try waitUntil(seconds: 10, "the menu says it was cancelled") { session.menu.contains("Approval cancelled") }
        try FileManager.default.removeItem(at: session.directory.appendingPathComponent("release"))

        // No PIN set: the dialog says so, nothing is tried or granted.
        let unset = try session.approve(typing: ["2468"])
        #expect(unset.hasPrefix("SETTITLE Curfew\nSETDESC A parent approves 30 min more today for \(Self.account).%0AType the parent's PIN:\n"), "\(unset)")
        #expect(unset.contains("GETPIN\nSETDESC no parent PIN is set on this computer; a parent can set one with: sudo curfew pin set\nMESSAGE\nBYE\n"), "\(unset)")
        try waitUntil(seconds: 10, "the menu says no PIN is set") { session.menu.contains("no parent PIN is set on this computer") }
        #expect(try pinTries(runner).isEmpty)
        #expect(try status(runner, agent)["extraMinutes"] as? Int == 0)

        try runner.ok(["pin", "set"], stdin: "2468\n2468\n")
        // A wrong PIN: refused, the dialog asks again saying so (the stand-in then cancels), one event.
        let wrong = try session.approve(typing: ["1357"])
        #expect(wrong.contains("GETPIN\nSETERROR wrong PIN; nothing changed (4 tries left in the next 15 minutes)\nGETPIN\nBYE\n"), "\(wrong)")
        try waitUntil(seconds: 10, "the menu says it was cancelled") { session.menu.contains("Approval cancelled") }
        var tries = try pinTries(runner)
        #expect(tries.count == 1)
        #expect(tries.first?["message"] as? String == "a wrong PIN was typed to approve 30m more (try 1 of 5 in 15 minutes)")
        #expect(try status(runner, agent)["extraMinutes"] as? Int == 0)

        // The right PIN: a grant signed with this computer's parent key, as `curfew grant` makes it.
        let recordsBefore = try runner.recordFiles()
        let granted = Date()
        let right = try session.approve(typing: ["2468"])
        #expect(right.hasSuffix("GETPIN\nBYE\n"), "\(right)")
        try waitUntil(seconds: 10, "the status shows the extra time") {
            ((try? status(runner, agent))?["extraMinutes"] as? Int) == 30
        }
        print("parent PIN: click to extra time in the status in \(String(format: "%.2f", Date().timeIntervalSince(granted))) s")
        try waitUntil(seconds: 10, "the menu says a parent approved") { session.menu.contains("A parent approved 30 min more") }
        let newRecords = Set(try runner.recordFiles()).subtracting(recordsBefore)
        #expect(newRecords.count == 1)
        let key = try runner.ok(["key", "show"]).stdout
        let record = try String(contentsOfFile: "\(runner.sharedDir)/records/\(try #require(newRecords.first))", encoding: .utf8)
        #expect(record.contains("\"extraMinutes\":30"), "\(record)")
        let author = try #require(record.components(separatedBy: "\"author\":\"").dropFirst().first?.prefix(16))
        #expect(key.contains(author), "\(key) \(record)")
        try waitUntil(seconds: 10, "the grant is in the audit log") {
            ((try? runner.ok(["events", Self.account, "--json"]).stdout) ?? "").contains("\"kind\": \"extra-time-granted\"")
        }
        tries = try pinTries(runner)
        #expect(tries.map { $0["message"] as? String } == [
            "a wrong PIN was typed to approve 30m more (try 1 of 5 in 15 minutes)",
            "the parent's PIN was typed to approve 30m more (try 2 of 5 in 15 minutes)",
        ])

        // Three more wrong ones make five tries; the sixth is refused by the limit, right PIN or not.
        let limited = try session.approve(typing: ["0000", "1111", "2222", "2468"])
        #expect(limited.contains("SETERROR wrong PIN; nothing changed (1 try left in the next 15 minutes)\n"), "\(limited)")
        #expect(limited.contains("SETERROR wrong PIN; nothing changed (0 tries left in the next 15 minutes)\nGETPIN\nSETDESC too many PIN tries: 5 in the last 15 minutes; try again in "), "\(limited)")
        #expect(limited.hasSuffix("min; nothing changed\nMESSAGE\nBYE\n"), "\(limited)")
        #expect(try pinTries(runner).count == 5)
        #expect(try status(runner, agent)["extraMinutes"] as? Int == 30)

        // The count lives in the database: a restarted agent still refuses.
        #expect(agent.stop() == 0)
        agent = try AgentProcess(runner)
        let afterRestart = try session.approve(typing: ["2468"])
        #expect(afterRestart.contains("SETDESC too many PIN tries: 5 in the last 15 minutes"), "\(afterRestart)")
        #expect(try pinTries(runner).count == 5)
        #expect(try status(runner, agent)["extraMinutes"] as? Int == 30)

        // No PIN is kept anywhere the agent writes.
        let events = try runner.ok(["events", "--json"]).stdout
        for pin in ["2468", "1357", "0000", "1111", "2222"] { #expect(!events.contains(pin), "\(pin)") }
        #expect(!agent.log.contains("2468"))
        #expect(agent.stop() == 0, "\(agent.log)")
        #expect(((try? String(contentsOfFile: runner.root.appendingPathComponent("indicator.log").path, encoding: .utf8)) ?? "") == "")
    }
}
