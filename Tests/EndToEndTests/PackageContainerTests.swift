import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The Debian package on a booted systemd: `apt-get install ./curfew_*.deb` in the container of
/// LogindContainerTests (Tests/Container), with no network, so every dependency must already be in the
/// cached root; then the promises of docs/design.md with nothing but what the package installed: the unit
/// (hardened as shipped), the default state directory and socket, the pam-auth-update profile.
///
/// Runs as root unless CURFEW_CONTAINER_TESTS=0, like LogindContainerTests.
@Suite(.serialized, .containerTests, .timeLimit(.minutes(30)))
struct PackageContainerTests {
    @Test func theDebianPackageInstallsEnforcesAndPurges() throws {
        ContainerWorkDirectory.removeStale("curfew-package-container", olderThan: 3600)
        let work = try ContainerWorkDirectory("curfew-package-container")
        defer { work.remove() }
        let deb = try DebianPackage.build(work: work)
        let root = try ContainerScript.rootFileSystem(work: work)
        // What the container sees at /opt/curfew: the package alone.
        let stage = work.url.appendingPathComponent("opt-curfew")
        try FileManager.default.createDirectory(at: stage, withIntermediateDirectories: true)
        // A hard link: the package is 35 MB.
        let staged = stage.appendingPathComponent(deb.lastPathComponent)
        if (try? FileManager.default.linkItem(at: deb, to: staged)) == nil { try FileManager.default.copyItem(at: deb, to: staged) }
        chmod(stage.path, 0o755)

        try ContainerLock.holding {
            let started = Date()
            let container = try BootedContainer.boot(root: root, binaries: stage.path, work: work)
            defer { container.stop() }
            try container.packageScenario(deb: "/opt/curfew/\(deb.lastPathComponent)")
            print("package scenario in the container: \(String(format: "%.1f", Date().timeIntervalSince(started))) s with the boot")
        }
    }
}

/// The .deb under test: $CURFEW_DEB when set (`make test` passes the one `make deb` just built and
/// lintian checked), else `packaging/deb/build.sh` over the statically linked binaries
/// (StaticCurfewBinaries, which builds them when needed): the same package from the same binaries.
enum DebianPackage {
    static func build(work: ContainerWorkDirectory) throws -> URL {
        if let given = ProcessInfo.processInfo.environment["CURFEW_DEB"], !given.isEmpty {
            guard given.hasSuffix(".deb"), FileManager.default.fileExists(atPath: given) else {
                throw TestFailure("CURFEW_DEB=\(given) is not a .deb file")
            }
            return URL(fileURLWithPath: given)
        }
        let binaries = try StaticCurfewBinaries.locate(work: work)
        let started = Date()
        let script = CurfewRunner.repositoryRoot.appendingPathComponent("packaging/deb/build.sh").path
        let result = try ContainerScript.run(
            [script, binaries.path, work.url.appendingPathComponent("deb").path], work: work, timeout: 600)
        guard result.status == 0, let path = result.stdout.split(separator: "\n").last.map(String.init),
            path.hasSuffix(".deb")
        else { throw TestFailure("packaging/deb/build.sh failed:\n\(result)") }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        print("built \(path) (\(size / 1024) KiB) in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        return URL(fileURLWithPath: path)
    }
}

extension BootedContainer {
    static let machineID = "6375726665777465737430303030303a"  // rootfs.sh's fixed /etc/machine-id

    /// `curfew` as installed, with its defaults (/var/lib/curfew, /run/curfew/curfewd.sock, the catalog
    /// in /etc/curfew/apps and /usr/share/curfew/apps).
    @discardableResult
    func installedCurfew(_ arguments: [String]) throws -> String {
        try ok(["/usr/bin/curfew"] + arguments)
    }

    /// A command as kid, without PAM's account stack (runuser), so it works while kid is locked out.
    func asKid(_ arguments: [String]) throws -> ContainerScript.Result {
        try run(["runuser", "-u", "kid", "--"] + arguments)
    }

    /// `systemctl show curfewd` property by property.
    func unit(_ names: [String]) throws -> [String: String] {
        let output = try ok(["systemctl", "show", "curfewd.service"] + names.map { "--property=\($0)" })
        var properties: [String: String] = [:]
        for line in output.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            if parts.count == 2 { properties[parts[0]] = parts[1] }
        }
        return properties
    }

    /// kid's live status from the agent (`counting` is set only by the agent), asked by kid through the
    /// socket: screen seconds.
    func kidScreenSeconds() throws -> Double {
        let result = try asKid(["/usr/bin/curfew", "status", "--json"])
        guard result.status == 0, let json = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
            let screen = json["screenSeconds"] as? NSNumber, json["counting"] is Bool
        else { throw TestFailure("kid's curfew status: \(result)\n\(packageDiagnostics())") }
        return screen.doubleValue
    }

    func packageDiagnostics() -> String {
        let agent = (try? run(["journalctl", "--no-pager", "-o", "short-monotonic", "-u", "curfewd"]))?.stdout ?? ""
        let system = (try? run(["journalctl", "--no-pager", "-o", "short-monotonic", "-n", "40"]))?.stdout ?? ""
        return "curfewd's journal:\n\(agent)\nthe container's journal:\n\(system)"
    }

    /// Files that tell whether the package is there, and PAM's account stack.
    func leftovers() throws -> [String] {
        let paths = [
            "/usr/bin/curfew", "/usr/sbin/curfewd", "/lib/systemd/system/curfewd.service", "/usr/lib/tmpfiles.d/curfew.conf",
            "/usr/share/pam-configs/curfew", "/usr/share/curfew", "/usr/share/man/man1/curfew.1.gz", "/usr/share/doc/curfew",
            "/etc/systemd/system/multi-user.target.wants/curfewd.service", "/etc/systemd/system/curfewd.service",
            "/etc/default/curfew", "/var/lib/curfew", "/run/curfew",
        ]
        return try paths.filter { try run(["test", "-e", $0]).status == 0 }
    }

    /// A parent's administrator account: a member of group sudo, with sudo without a password (as many
    /// families set it up), and passwords for su: the parent's, root's and kid's.
    static let parent = "parent"
    static let passwords = ["parent": "parent-pw", "root": "root-pw", "kid": "kid-pw"]

    func addParentAccount() throws {
        try ok(["useradd", "--create-home", "--groups", "sudo", "--shell", "/bin/bash", Self.parent])
        try ok(["sh", "-c", "echo '\(Self.parent) ALL=(ALL:ALL) NOPASSWD: ALL' > /etc/sudoers.d/parent && chmod 440 /etc/sudoers.d/parent"])
        let lines = Self.passwords.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: "\n")
        try ok(["sh", "-c", "printf '\(lines)\\n' | chpasswd"])
        // sudo resolves the host name; the container's /etc/hosts does not know it.
        try ok(["sh", "-c", "grep -q curfew-test /etc/hosts || echo '127.0.1.1 curfew-test' >> /etc/hosts"])
    }

    /// `sudo -n ARGS` run by the parent (a non-root user: runuser, which is not a login): status, output.
    func parentSudo(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try run(["runuser", "-u", Self.parent, "--", "sudo", "-n"] + arguments)
        return (result.status, result.stdout + result.stderr)
    }

    /// `su TARGET -c 'id -un'` run by `user` (a non-root user) on a pseudo-terminal (script), typing the
    /// target's password when su asks for it: su's status and everything the terminal showed.
    func suThroughTerminal(from user: String, to target: String) throws -> (status: Int32, output: String) {
        let password = Self.passwords[target] ?? ""
        // The password goes in after su has asked for it (it flushes what was typed before).
        let typed = "(sleep 1; printf '%s\\n' '\(password)'; sleep 2)"
        let result = try run(["runuser", "-u", user, "--", "sh", "-c", "\(typed) | script -qec \"su \(target) -c 'id -un'\" /dev/null"])
        return (result.status, (result.stdout + result.stderr).replacingOccurrences(of: "\r", with: ""))
    }

    func packageScenario(deb: String) throws {
        // Before: PAM's stacks as libpam-runtime made them, and a parent's own catalog entry for a game
        // (the agent reads /etc/curfew/apps at start).
        let pamBefore = try ok(["sh", "-c", "md5sum /etc/pam.d/common-*"])
        // A parent's administrator account, whose sudo and su work before Curfew and must work after it.
        try addParentAccount()
        let sudoBefore = try parentSudo(["id", "-un"])
        #expect(sudoBefore.status == 0 && sudoBefore.output == "root\n", "sudo before Curfew: \(sudoBefore)")
        let suRootBefore = try suThroughTerminal(from: Self.parent, to: "root")
        #expect(suRootBefore.status == 0 && suRootBefore.output.hasSuffix("root\n"), "su root before Curfew: \(suRootBefore)")
        try ok([
            "sh", "-c",
            """
            cp /bin/sleep /usr/local/bin/sleepgame && mkdir -p /etc/curfew/apps && \
            echo '{"name": "sleepgame", "category": "game", "match": {"executableNames": ["sleepgame"]}}' \
            > /etc/curfew/apps/sleepgame.json
            """,
        ])

        // Install with apt, offline: every dependency is already in the root.
        var clock = Date()
        try ok(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends", deb], timeout: 180)
        let installSeconds = Date().timeIntervalSince(clock)
        try waitUntil(seconds: 15, "curfewd active") { (try? unit(["ActiveState"]))?["ActiveState"] == "active" }
        // Type=notify: active only after READY=1; StatusText is the agent's STATUS= through the notify socket.
        let state = try unit(["ActiveState", "SubState", "Type", "StatusText", "NRestarts", "UnitFileState", "MainPID"])
        #expect(state["ActiveState"] == "active" && state["SubState"] == "running" && state["Type"] == "notify", "\(state)")
        #expect(state["UnitFileState"] == "enabled", "\(state)")
        try waitUntil(seconds: 5, "the agent's STATUS=") { (try? unit(["StatusText"]))?["StatusText"]?.hasPrefix("tracking") == true }
        // The hardening as systemd rates it (packaging/README.md records the figure): exposure 3.1 or less
        // ("→ Overall exposure level for curfewd.service: 3.1 OK :-)"; 2.8 before CAP_SYS_ADMIN, which the
        // exec guard's fanotify needs, and which systemd-analyze weighs at 0.3).
        let analysis = try ok(["systemd-analyze", "security", "--no-pager", "curfewd.service"])
        let exposure = analysis.split(separator: "\n").last { $0.contains("Overall exposure level") }
            .flatMap { $0.components(separatedBy: "curfewd.service: ").last?.split(separator: " ").first }.flatMap { Double($0) }
        #expect(exposure.map { $0 <= 3.1 } == true, "systemd-analyze security curfewd: \(analysis.suffix(400))")
        // postinst: the state directory (0700) with the parent key, the socket for everyone, PAM wired by
        // pam-auth-update into the Additional block of common-account.
        #expect(try ok(["stat", "-c", "%a %U", "/var/lib/curfew", "/var/lib/curfew/keys/signing.key"]) == "700 root\n600 root\n")
        #expect(try ok(["stat", "-c", "%a %F", "/run/curfew", "/run/curfew/curfewd.sock"]) == "755 directory\n666 socket\n")
        let account = try ok(["cat", "/etc/pam.d/common-account"])
        let additional = account.components(separatedBy: "# and here are more per-package modules (the \"Additional\" block)")
        #expect(
            additional.count == 2 && additional[1].hasPrefix("\naccount\trequired\tpam_exec.so quiet stdout seteuid /usr/bin/curfew check-login\n"),
            "common-account:\n\(account)")
        #expect(!account.contains("@include"), "a hand-made include: \(account)")
        // Man pages and completions made from the CLI's own help.
        let manual = try ok(["sh", "-c", "zcat /usr/share/man/man1/curfew.1.gz"])
        #expect(manual.contains(".SS check\\-login") && manual.contains("\\-\\-state\\-dir"), "curfew.1:\n\(manual.prefix(2000))")
        try ok(["test", "-s", "/usr/share/man/man8/curfewd.8.gz"])
        try ok(["grep", "-q", "check-login", "/usr/share/bash-completion/completions/curfew"])
        // One program, installed once: curfewd is a link to curfew, and both names work.
        #expect(try ok(["readlink", "/usr/sbin/curfewd"]) == "../bin/curfew\n")
        #expect(try ok(["/usr/sbin/curfewd", "--version"]) == (try ok(["/usr/bin/curfew", "--version"])))
        // Installed size under 75 MB (dpkg counts KiB).
        let installedKiB = Int(try ok(["dpkg-query", "-W", "-f=${Installed-Size}", "curfew"])) ?? .max
        #expect(installedKiB < 75_000_000 / 1024, "installed size \(installedKiB) KiB")
        // The fail mode is a conffile the administrator edits, not /usr/share/pam-configs.
        let conffiles = try ok(["dpkg-query", "-W", "-f=${Conffiles}", "curfew"])
        #expect(conffiles.contains("/etc/default/curfew "), "conffiles: \(conffiles)")
        #expect(try ok(["grep", "-x", "CURFEW_FAIL_MODE=closed", "/etc/default/curfew"]) == "CURFEW_FAIL_MODE=closed\n")
        // The documentation: the README, the pages for parents, children and administrators, security, the
        // design and the architecture (not the benchmark and testing pages, which concern a checkout of the
        // source), and the app catalog's format; the family's own catalog directory.
        try ok([
            "test", "-s", "/usr/share/doc/curfew/README.md", "-a", "-s", "/usr/share/doc/curfew/README.catalog.md", "-a", "-s",
            "/usr/share/doc/curfew/copyright", "-a", "-d", "/etc/curfew/apps",
        ])
        for page in ["parents", "children", "administrators", "security", "design", "architecture"] {
            try ok(["test", "-s", "/usr/share/doc/curfew/docs/\(page).md"])
        }
        for page in ["performance", "testing"] {
            #expect(try run(["test", "-e", "/usr/share/doc/curfew/docs/\(page).md"]).status != 0, "docs/\(page).md is shipped")
        }
        // Both pages as man shows them, without a warning.
        for (section, page, wanted) in [("1", "curfew", ["EXAMPLES", "ENVIRONMENT", "EXIT STATUS", "common options"]), ("8", "curfewd", ["SIGNALS", "JOURNAL", "EXIT STATUS"])] {
            let shown = try run(["env", "MANWIDTH=80", "LC_ALL=C.UTF-8", "man", "--warnings", section, page])
            #expect(shown.status == 0 && shown.stderr.isEmpty, "man \(section) \(page): \(shown.stderr)")
            #expect(wanted.allSatisfy { shown.stdout.contains($0) }, "man \(section) \(page):\n\(shown.stdout.prefix(3000))")
            #expect(shown.stdout.contains("\(page.uppercased())(\(section))"), "man \(section) \(page)")
        }

        // Installing Curfew changes nothing for a parent: sudo -n and su to root from their own account
        // (pam_exec runs the check with their real uid unless seteuid; root is never managed).
        let sudoInstalled = try parentSudo(["id", "-un"])
        #expect(sudoInstalled.status == 0 && sudoInstalled.output == "root\n", "sudo with Curfew: \(sudoInstalled)")
        let sudoTrue = try parentSudo(["true"])
        #expect(sudoTrue.status == 0 && sudoTrue.output.isEmpty, "sudo -n true with Curfew: \(sudoTrue)")
        let suRoot = try suThroughTerminal(from: Self.parent, to: "root")
        #expect(suRoot.status == 0 && suRoot.output.hasSuffix("root\n"), "su root with Curfew: \(suRoot)")
        // Root and administrators are not managed by accident.
        let rootRefused = try run(["/usr/bin/curfew", "user", "add", "root"])
        #expect(
            rootRefused.status == 64 && rootRefused.stderr.contains("root is never managed"), "curfew user add root: \(rootRefused)")
        let adminRefused = try run(["/usr/bin/curfew", "user", "add", Self.parent])
        #expect(
            adminRefused.status == 64 && adminRefused.stderr.contains("administrators are managed only with --allow-admin"),
            "curfew user add parent: \(adminRefused)")

        // A parent's first policy, with the installed defaults; the agent confirms every change.
        try installedCurfew(["user", "add", "kid"])
        try installedCurfew(["timezone", "kid", "UTC"])
        try installedCurfew(["bedtime", "kid", "off"])
        try installedCurfew(["warnings", "kid", "1"])
        let limited = try installedCurfew(["limit", "kid", "15m"])
        #expect(limited.contains("curfew-test: applied v"), "\(limited)")
        // The agent frozen (SIGSTOP; well within the unit's 30 s watchdog), before any rule denies an exec
        // (a frozen agent holds every exec the exec guard has marked until the watchdog ends it): the
        // parent's sudo and su are unchanged, root's check of kid is decided by the records (kid has
        // time), and kid's own check (a screen locker's, run as kid, who cannot read the records) is
        // refused within 2 s, saying why.
        #expect(try ok(["stat", "-c", "%a %U", "/run/curfew/managed-users"]) == "644 root\n")
        try ok(["systemctl", "kill", "--signal=SIGSTOP", "curfewd"])
        do {
            defer { _ = try? run(["systemctl", "kill", "--signal=SIGCONT", "curfewd"]) }
            clock = Date()
            let sudoFrozen = try parentSudo(["true"])
            let sudoFrozenSeconds = Date().timeIntervalSince(clock)
            #expect(sudoFrozen.status == 0 && sudoFrozen.output.isEmpty && sudoFrozenSeconds < 2, "sudo -n true with the agent frozen: \(sudoFrozen), \(sudoFrozenSeconds) s")
            let suRootFrozen = try suThroughTerminal(from: Self.parent, to: "root")
            #expect(suRootFrozen.status == 0 && suRootFrozen.output.hasSuffix("root\n"), "su root with the agent frozen: \(suRootFrozen)")
            let suKidFrozen = try suThroughTerminal(from: Self.parent, to: "kid")
            #expect(suKidFrozen.status == 0 && suKidFrozen.output.hasSuffix("kid\n"), "su kid with time left, the agent frozen: \(suKidFrozen)")
            clock = Date()
            let lockerFrozen = try asKid(["env", "PAM_SERVICE=i3lock", "/usr/bin/curfew", "check-login", "--user", "kid"])
            let lockerSeconds = Date().timeIntervalSince(clock)
            #expect(
                lockerFrozen.status == 77 && lockerFrozen.stdout
                    == "Curfew: kid may not log in now: Curfew's agent did not answer within 1 s, and kid is managed on this computer. Ask a parent.\n"
                    && lockerSeconds < 2,
                "kid's own check with the agent frozen: \(lockerFrozen), \(lockerSeconds) s")
            print("agent frozen: sudo -n true \(String(format: "%.2f", sudoFrozenSeconds)) s; kid's own check refused in \(String(format: "%.2f", lockerSeconds)) s")
        }
        #expect(try unit(["MainPID"])["MainPID"] == state["MainPID"], "the agent was restarted while frozen")
        try installedCurfew(["app", "block", "kid", "sleepgame"])
        // The installed bash completion through bash's own `complete`: a managed user (kid, in the
        // agent's list once it runs), a catalog app, a lockout action, a weekday and a duration.
        try waitUntil(seconds: 10, "the agent's list of managed users") {
            (try? run(["grep", "-qx", "kid", "/var/lib/curfew/managed-users"]))?.status == 0
        }
        let completion = """
            source /usr/share/bash-completion/completions/curfew
            function=$(complete -p curfew | sed 's/.*-F \\([^ ]*\\) .*/\\1/')
            try() {
                COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
                COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
                "$function" curfew "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"
                echo "${COMPREPLY[*]}"
            }
            try curfew limit k
            try curfew app block kid sleepg
            try curfew lockout kid ""
            try curfew limit kid 2h --day s
            try curfew grant kid 1h
            """
        let completed = try ok(["bash", "--norc", "--noprofile", "-c", completion])
        #expect(completed == "kid\nsleepgame\nlogout lock apps none network\nsat sun\n1h 1h30m\n", "bash completion: \(completed)")

        // A blocked app does not run: kid starts it (a unit of its own, as a desktop would). With the exec
        // guard (the unit keeps CAP_SYS_ADMIN and fanotify's calls) its exec is denied (systemd's
        // 203/EXEC); where the kernel has no fanotify permission events, SIGTERM ends it.
        var journal = ""
        try waitUntil(seconds: 10, "the agent saying which exec guard mode it runs in") {
            journal = ((try? self.run(["journalctl", "--no-pager", "-u", "curfewd", "-g", "exec guard"]))?.stdout ?? "")
            return journal.contains("exec guard on:") || journal.contains("without the exec guard")
        }
        let guarded = journal.contains("exec guard on:")
        print("the installed agent's exec guard: \(journal.split(separator: "\n").last.map(String.init) ?? "?")")
        clock = Date()
        let game = try run(["systemd-run", "--wait", "--unit=kidgame", "--property=User=kid", "/usr/local/bin/sleepgame", "300"], timeout: 30)
        let gameSeconds = Date().timeIntervalSince(clock)
        #expect((game.stdout + game.stderr).contains(guarded ? "code=exited/status=203" : "code=killed/status=TERM"), "\(game)")
        #expect(gameSeconds < 5, "the blocked game lived \(gameSeconds) s")
        if guarded {
            // The app and the user are the log line's journal fields.
            try waitUntil(seconds: 10, "the denied exec logged") {
                ((try? self.run(["journalctl", "--no-pager", "-u", "curfewd", "-o", "verbose", "-g", "denied an app's exec"]))?.stdout ?? "")
                    .contains("APP=sleepgame")
            }
        }

        // The child cannot stop the agent, read its state, or reach its shared directory.
        let stopped = try asKid(["systemctl", "stop", "curfewd"])
        #expect(stopped.status != 0, "kid stopped curfewd: \(stopped)")
        let readState = try asKid(["ls", "/var/lib/curfew"])
        #expect(readState.status != 0 && readState.stderr.contains("Permission denied"), "\(readState)")
        let readDatabase = try asKid(["cat", "/var/lib/curfew/curfew.db"])
        #expect(readDatabase.status != 0, "\(readDatabase)")
        let writeRecord = try asKid(["touch", "/var/lib/curfew/shared/records/forged.json"])
        #expect(writeRecord.status != 0, "\(writeRecord)")
        #expect(try unit(["MainPID"])["MainPID"] == state["MainPID"], "the agent was restarted")
        // A record kid signs with a key of kid's own, even when it lands in the shared directory (one a
        // sync tool fills, say), is rejected and changes nothing.
        let kidState = "/tmp/kid-curfew"
        for arguments in [["init"], ["user", "add", "kid", "--no-wait"], ["limit", "kid", "unlimited", "--no-wait"]] {
            let result = try asKid(["/usr/bin/curfew"] + arguments + ["--state-dir", kidState])
            #expect(result.status == 0, "kid's own curfew \(arguments): \(result)")
        }
        let forged = try ok(["sh", "-c", "ls \(kidState)/shared/records/ | grep -E '^[0-9a-f]{64}\\.json$'"])
            .split(separator: "\n").map(String.init)
        #expect(forged.count == 2, "kid's records: \(forged)")
        try ok(["sh", "-c", "cp \(kidState)/shared/records/*.json /var/lib/curfew/shared/records/"])
        for record in forged {
            let confirmation = "/var/lib/curfew/shared/confirmations/\(Self.machineID)/\(record)"
            try waitUntil(seconds: 10, "the agent's verdict on \(record)") { (try? run(["test", "-s", confirmation]))?.status == 0 }
            let verdict = try ok(["cat", confirmation])
            #expect(verdict.contains("\"outcome\":\"rejected\"") && verdict.contains("not trusted"), "\(verdict)")
        }
        let policy = try installedCurfew(["policy", "show", "kid", "--json"])
        #expect(policy.contains("\"dailyLimitMinutes\": 15"), "\(policy)")

        // While kid has time, the parent's su to kid (kid's password, through the account stack) works.
        let suKidAllowed = try suThroughTerminal(from: Self.parent, to: "kid")
        #expect(suKidAllowed.status == 0 && suKidAllowed.output.hasSuffix("kid\n"), "su kid with time left: \(suKidAllowed)")

        // kid logs in on a console (PAM through pam-auth-update's stack lets kid in) and is counted.
        let session = try consoleLogin(unit: "kidconsole", typescript: "/tmp/kid-console")
        let loggedIn = Date()
        try waitUntil(seconds: 15, "kid counted") { ((try? kidScreenSeconds()) ?? 0) >= 4 }
        // 45 seconds of today's 15 minutes left after the crash below: the rest is written to the
        // database now (the running agent adds what it counts to the rows; it reads them at start).
        let formatter = DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        let counted = try kidScreenSeconds()
        let preset = Int((15 * 60 - 45 - counted) * 1000)
        try ok([
            "sqlite3", "/var/lib/curfew/curfew.db",
            "INSERT INTO usage (user, day, hour, app, milliseconds) VALUES ('kid', '\(formatter.string(from: Date()))', 0, '', \(preset)) ON CONFLICT (user, day, hour, app) DO UPDATE SET milliseconds = milliseconds + excluded.milliseconds;",
        ])

        // kill -9: systemd brings the agent back within seconds, and no more than 5 s of usage is lost.
        let beforeKill = try kidScreenSeconds()
        let killed = Date()
        try ok(["systemctl", "kill", "--signal=KILL", "curfewd"])
        try waitUntil(seconds: 10, "curfewd restarted after SIGKILL") {
            guard let now = try? unit(["ActiveState", "NRestarts", "MainPID"]) else { return false }
            return now["ActiveState"] == "active" && now["NRestarts"] == "1" && now["MainPID"] != state["MainPID"]
        }
        let restartSeconds = Date().timeIntervalSince(killed)
        let afterKill = try kidScreenSeconds() - Double(preset) / 1000
        let sinceKill = Date().timeIntervalSince(killed)
        #expect(
            afterKill >= beforeKill - 5 && afterKill <= beforeKill + sinceKill + 1,
            "before SIGKILL \(beforeKill) s, after the restart \(afterKill) s (\(sinceKill) s later)\n\(packageDiagnostics())")

        // At the limit: warned on the terminal, then logged out through logind.
        try waitUntil(seconds: 60, "the warnings on kid's terminal") {
            typescript("/tmp/kid-console").contains("10 seconds of screen time left today")
        }
        #expect(typescript("/tmp/kid-console").contains("Curfew: 30 seconds of screen time left today"), "\(typescript("/tmp/kid-console"))")
        try waitUntil(seconds: 20, "kid's session ended") { (try? kidSessions())?.contains(session) == false }
        let sessionSeconds = Date().timeIntervalSince(loggedIn)
        let events = try installedCurfew(["events", "--json"])
        for kind in ["warning", "lockout", "session-ended", "app-stopped", "agent-started"] {
            #expect(events.contains("\"kind\": \"\(kind)\""), "\(kind): \(events)")
        }
        // PAM (pam-auth-update's common-account) refuses the next login.
        let refused = try suKid()
        #expect(refused.status != 0, "su - kid got in: \(refused.output)")
        #expect(refused.output.contains("Curfew: kid may not log in now: today's limit of 15m is used up."), "\(refused.output)")
        // The same from the parent's own account on a terminal, while the parent's sudo and su to root
        // are untouched by kid's lockout.
        let suKidRefused = try suThroughTerminal(from: Self.parent, to: "kid")
        #expect(
            suKidRefused.status != 0 && suKidRefused.output.contains("Curfew: kid may not log in now: today's limit of 15m is used up.")
                && !suKidRefused.output.hasSuffix("kid\n"),
            "su kid at the limit: \(suKidRefused)")
        let sudoLocked = try parentSudo(["true"])
        #expect(sudoLocked.status == 0 && sudoLocked.output.isEmpty, "sudo -n true while kid is locked out: \(sudoLocked)")
        let suRootLocked = try suThroughTerminal(from: Self.parent, to: "root")
        #expect(suRootLocked.status == 0 && suRootLocked.output.hasSuffix("root\n"), "su root while kid is locked out: \(suRootLocked)")
        // kid's own su to kid (a login of kid's) gets nowhere: under the logout lockout every process of
        // kid's ends (the lockout by cause), so the su kid starts is either stopped before it asks PAM
        // (SIGTERM within the grace, SIGKILL after it) or refused by PAM with the reason on kid's
        // terminal; never a shell.
        let kidSu = try suThroughTerminal(from: "kid", to: "kid")
        #expect(
            kidSu.status != 0 && !kidSu.output.hasSuffix("kid\n")
                && (kidSu.output.contains("Curfew: kid may not log in now") || kidSu.status == 143 || kidSu.status == 137),
            "kid's su at the limit: \(kidSu)")

        // The network lockout as the unit ships the agent (its capabilities and system-call filter, with
        // nftables installed as the package recommends): nft runs, and the agent's own table drops
        // kid's traffic while kid's limit is used up.
        let kidUID = try ok(["id", "-u", "kid"]).trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try installedCurfew(["lockout", "kid", "network"])
        try waitUntil(seconds: 20, "the agent's nftables rule for kid") {
            let table = (try? run(["nft", "list", "table", "inet", "curfew"]))?.stdout ?? ""
            return table.contains("meta skuid \(kidUID)") && table.contains("drop")
        }
        let networkEvents = try ok(["/usr/bin/curfew", "events", "--json"])
        #expect(networkEvents.contains("\"kind\": \"network-off\""), "\(networkEvents)")
        #expect(!networkEvents.contains("network-filter-failed"), "\(networkEvents)")
        // Back to logout (logins at the limit are refused again, which the reinstall below relies on),
        // and the rule goes.
        _ = try installedCurfew(["lockout", "kid", "logout"])
        try waitUntil(seconds: 20, "kid's nftables rule removed") {
            !((try? run(["nft", "list", "ruleset"]))?.stdout ?? "skuid").contains("meta skuid \(kidUID)")
        }

        // remove: the agent and PAM's line go, the data stays; kid may log in again.
        try ok(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "remove", "-y", "curfew"], timeout: 120)
        // What stays: the data, the socket's directory, and the unit's mask that debhelper's postrm
        // also leaves after remove (a unit file of the removed package cannot be started by accident).
        let afterRemove = try leftovers()
        // The conffile /etc/default/curfew stays until purge, as dpkg keeps every conffile on remove.
        #expect(
            afterRemove == ["/etc/systemd/system/curfewd.service", "/etc/default/curfew", "/var/lib/curfew", "/run/curfew"],
            "after remove: \(afterRemove)")
        #expect(try ok(["readlink", "/etc/systemd/system/curfewd.service"]) == "/dev/null\n")
        #expect(!(try ok(["cat", "/etc/pam.d/common-account"])).contains("curfew"))
        #expect(try suKid().status == 0, "su - kid after remove")
        #expect((try? run(["pgrep", "-x", "curfewd"]))?.status == 1, "curfewd still runs after remove")
        // Installed again: what remove kept is in force again (kid is still managed and out of time).
        try ok(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends", deb], timeout: 180)
        try waitUntil(seconds: 15, "curfewd active again") { (try? unit(["ActiveState"]))?["ActiveState"] == "active" }
        let again = try installedCurfew(["policy", "show", "kid", "--json"])
        #expect(again.contains("\"dailyLimitMinutes\": 15"), "\(again)")
        #expect(try suKid().status != 0, "su - kid after reinstalling")
        // purge, straight from installed: nothing of it is left, and PAM's stacks are byte for byte what
        // they were.
        try ok(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "purge", "-y", "curfew"], timeout: 120)
        let afterPurge = try leftovers()
        #expect(afterPurge == [], "after purge: \(afterPurge)")
        #expect(try ok(["sh", "-c", "md5sum /etc/pam.d/common-*"]) == pamBefore)
        let grep = try run(["grep", "-rl", "curfew", "/etc/pam.d", "/etc/systemd", "/lib/systemd/system", "/usr/lib/tmpfiles.d"])
        #expect(grep.status == 1 && grep.stdout.isEmpty, "left after purge: \(grep.stdout)")
        let dpkg = try run(["dpkg-query", "-W", "-f=${Status}", "curfew"])
        #expect(dpkg.status != 0 || dpkg.stdout.contains("not-installed"), "\(dpkg)")

        print(
            "package in the container: exposure \(exposure.map { String($0) } ?? "?"); installed in \(String(format: "%.1f", installSeconds)) s; blocked game \(guarded ? "denied" : "dead") after \(String(format: "%.1f", gameSeconds)) s; back \(String(format: "%.1f", restartSeconds)) s after SIGKILL (\(Int(beforeKill)) s counted before, \(Int(afterKill)) s after); logged out \(String(format: "%.1f", sessionSeconds)) s after login; su at the limit: \(refused.output.trimmingCharacters(in: .whitespacesAndNewlines))"
        )
    }
}
