import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Who Curfew may manage, who may read its state, and what deleting records can (not) do, with the
/// built binaries, real accounts and real agents.
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: test accounts, chown, and agents"))
struct TrustTests {
    /// A member of group sudo (Debian's administrators), created on first use.
    static let administrator = "curfewadmin"

    static func ensureAdministrator() throws {
        if Accounts.account(named: administrator) == nil {
            let status = try CurfewRunner.runTool(
                "/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "--groups", "sudo", administrator])
            #expect(status == 0, "useradd \(administrator)")
        }
        #expect(Accounts.administratorGroups(of: administrator) == ["sudo"])
    }

    @Test func rootIsNeverManagedAndAnAdministratorOnlyWithAllowAdmin() throws {
        try Self.ensureAdministrator()
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        try runner.ok(["init"])
        let before = try runner.snapshot()
        let root = try runner.run(["user", "add", "root"])
        #expect(root.status == 64)
        #expect(root.stderr == "curfew: root is never managed (Curfew never locks out the administrator), got \"root\"\n")
        let imported = try runner.run([
            "policy", "import", CurfewRunner.repositoryRoot.appendingPathComponent("policies/default.json").path, "--user", "root",
        ])
        #expect(imported.status == 64 && imported.stderr.contains("root is never managed"), "\(imported)")
        for command in [["limit", "root", "1h"], ["grant", "root", "30m"], ["status", "root"]] {
            let result = try runner.run(command)
            #expect(result.status == 64 && result.stderr.contains("root is never managed"), "curfew \(command): \(result)")
        }
        let admin = try runner.run(["user", "add", Self.administrator])
        #expect(admin.status == 64)
        #expect(
            admin.stderr
                == "curfew: administrators are managed only with --allow-admin, got \"\(Self.administrator)\", a member of sudo (managing them may lock a parent out)\n"
        )
        #expect(try runner.snapshot() == before, "a refused command changed files")
        let allowed = try runner.run(["user", "add", Self.administrator, "--allow-admin"])
        #expect(allowed.status == 0, "\(allowed)")
        #expect(
            allowed.stderr.hasPrefix(
                "curfew: warning: \(Self.administrator) is an administrator (sudo): at bedtime or with no time left they cannot log in, use sudo or su"
            ), "\(allowed)")
        // Once managed, the administrator's rules are edited like anyone's.
        try runner.ok(["limit", Self.administrator, "1h"])
    }

    @Test func initAndTheAgentMakeTheStateDirectoryPrivate() throws {
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        try FileManager.default.createDirectory(atPath: runner.stateDir, withIntermediateDirectories: true)
        chmod(runner.stateDir, 0o755)
        let first = try runner.ok(["init"])
        #expect(first.stdout.contains("made private: \(runner.stateDir): 0755 -> 0700\n"), "\(first)")
        // A database made with a loose umask, by hand or an older version.
        let database = "\(runner.stateDir)/curfew.db"
        chmod(database, 0o644)
        chmod("\(runner.stateDir)/keys", 0o755)
        let second = try runner.ok(["init"])
        #expect(
            second.stdout.contains("made private: \(database): 0644 -> 0600\n")
                && second.stdout.contains("made private: \(runner.stateDir)/keys: 0755 -> 0700\n"), "\(second)")
        #expect(try Self.looseModes(runner.stateDir).isEmpty)
        #expect(try runner.ok(["init"]).stdout.contains("made private") == false)

        // The agent checks the same at start and logs what it fixed.
        chmod(runner.stateDir, 0o711)
        chmod(database, 0o640)
        let agent = try AgentProcess(runner)
        #expect(agent.stop() == 0)
        #expect(try Self.looseModes(runner.stateDir).isEmpty)
        #expect(agent.log.contains("tightened a mode in the state directory"), "\(agent.log)")

        // A state directory of another user is refused, and nothing in it changes.
        chown(runner.stateDir, 65534, 65534)
        chmod(runner.stateDir, 0o755)
        let before = try runner.snapshot()
        let foreign = try runner.run(["init"])
        #expect(foreign.status == 77)
        #expect(foreign.stderr == "curfew: the state directory \(runner.stateDir) must belong to uid 0, got uid 65534 (mode 0755)\n")
        #expect(try runner.snapshot() == before)
    }

    /// Paths under `directory` (the shared directory aside) that anyone but the owner may use.
    static func looseModes(_ directory: String) throws -> [String] {
        var loose: [String] = []
        var info = stat()
        if stat(directory, &info) == 0, info.st_mode & 0o077 != 0 { loose.append(directory) }
        let enumerator = FileManager.default.enumerator(atPath: directory)
        while let relative = enumerator?.nextObject() as? String {
            if relative == "shared" || relative.hasPrefix("shared/") { continue }
            if lstat("\(directory)/\(relative)", &info) == 0, (info.st_mode & S_IFMT) != S_IFLNK, info.st_mode & 0o077 != 0 {
                loose.append(relative)
            }
        }
        return loose
    }

    /// pam_exec runs the check with the caller's real uid unless `seteuid`; a screen locker runs it as the
    /// user. Root and unmanaged users are let in whoever asks; a child asking for themself gets their
    /// own verdict from the agent.
    @Test func checkLoginLetsRootAndUnmanagedUsersInWhoeverRunsIt() throws {
        // The managed child is an account of this test's own: its agent would stop every process of it.
        let kid = try TestAccount.ensure("curfewtrust")
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        chmod(runner.root.path, 0o755)
        try runner.ok(["init"])
        try runner.ok(["user", "add", kid.name])
        try runner.ok(["limit", kid.name, "0"])
        try runner.ok(["bedtime", kid.name, "off"])
        let agent = try AgentProcess(runner)
        defer { _ = agent.stop() }
        let socket = ["--socket", agent.socketPath]
        // `nobody` runs the checks as a user who is neither root nor managed (a screen locker, say).
        for user in ["root", "nobody"] {
            let byUser = try runner.run(["check-login", "--user", user] + socket, asUser: "nobody")
            #expect(byUser.status == 0 && byUser.stdout.isEmpty, "\(user), checked by nobody: \(byUser)")
            let byRoot = try runner.run(["check-login", "--user", user] + socket)
            #expect(byRoot.status == 0 && byRoot.stdout.isEmpty, "\(user), checked by root: \(byRoot)")
            let fromPAM = try runner.run(["check-login"] + socket, environment: ["PAM_USER": user, "PAM_SERVICE": "sudo"], asUser: "nobody")
            #expect(fromPAM.status == 0, "PAM_USER=\(user), checked by nobody: \(fromPAM)")
        }
        let refused = "Curfew: \(kid.name) may not log in now: no screen time is allowed today."
        let byRoot = try runner.run(["check-login", "--user", kid.name] + socket)
        #expect(byRoot.status == 77 && byRoot.stdout.hasPrefix(refused), "\(byRoot)")
        // Another user may not probe a managed child: refused, not let in by default.
        let probed = try runner.run(["check-login", "--user", kid.name] + socket, asUser: "nobody")
        #expect(probed.status == 77 && probed.stdout == "Curfew: only root may check another user's login\n", "\(probed)")
    }

    /// v1 adds kid, v2 removes kid, v3..v7 add kid back with rules. Deleting the files of v3..v7 from the
    /// shared directory must not make v2's removal final: kid stays managed under v7, the agent records
    /// `record-missing` once, and `sync status` and `policy show` name the version.
    @Test func deletingNewerRecordsNeverUnmanagesAChild() throws {
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        try runner.ok(["init"])
        try runner.ok(["user", "add", "kid"])
        try runner.ok(["user", "remove", "kid", "--yes"])
        try runner.ok(["user", "add", "kid"])
        try runner.ok(["bedtime", "kid", "off"])
        try runner.ok(["limit", "kid", "45m"])
        try runner.ok(["app", "block", "kid", "steam"])
        try runner.ok(["lockout", "kid", "lock"])
        let versions = try recordVersions(runner)
        #expect(versions.values.sorted() == Array(1...7), "\(versions)")
        let agent = try AgentProcess(runner, arguments: ["--rescan", "0.5"])
        defer { _ = agent.stop() }
        try waitUntil(seconds: 10, "v7 in force") { (try? runner.run(["status", "kid", "--json", "--socket", agent.socketPath]))?.stdout.contains("\"limitMinutes\": 45") == true }

        for (file, version) in versions where version >= 3 {
            try FileManager.default.removeItem(atPath: "\(runner.sharedDir)/records/\(file)")
        }
        try waitUntil(seconds: 10, "the record-missing event") { (try? runner.run(["events", "--json"]))?.stdout.contains("record-missing") == true }
        let status = try runner.ok(["status", "kid", "--json", "--socket", agent.socketPath]).stdout
        #expect(status.contains("\"limitMinutes\": 45"), "kid is still managed under v7: \(status)")
        let login = try runner.run(["check-login", "--user", "kid", "--socket", agent.socketPath])
        #expect(login.stdout.contains("kid may log in") || login.status == 0, "\(login)")
        let events = try runner.ok(["events", "--json"]).stdout
        #expect(!events.contains("user-unmanaged"), "\(events)")
        // The agent may rescan between two deletions: the newest left then is any of 2..6.
        #expect(
            events.contains("\"message\": \"the record of version 7 of kid is missing from the shared directory (the newest there is version ")
                && events.contains("); version 7 stays in force\""), "\(events)")
        let shown = try runner.ok(["policy", "show", "kid"])
        #expect(
            shown.stderr
                == "curfew: warning: the record in force, version 7, is missing from the shared directory; this computer keeps enforcing it (the next change publishes it anew)\n"
        )
        #expect(shown.stdout.contains("45m") && shown.stdout.contains("steam"), "\(shown)")
        let sync = try runner.ok(["sync", "status"]).stdout
        #expect(sync.contains("  record in force missing: kid v7 is not in the shared directory (the newest there is v2)"), "\(sync)")
        let syncJSON = try runner.ok(["sync", "status", "--json"]).stdout
        #expect(syncJSON.contains("\"missingRecords\""), "\(syncJSON)")

        // A restart keeps kid managed and does not report the same missing record again.
        #expect(agent.stop() == 0)
        let again = try AgentProcess(runner, arguments: ["--rescan", "0.5"])
        defer { _ = again.stop() }
        let restarted = try runner.ok(["status", "kid", "--json", "--socket", again.socketPath]).stdout
        #expect(restarted.contains("\"limitMinutes\": 45"), "\(restarted)")
        let missingEvents = try runner.ok(["events", "--json"]).stdout.components(separatedBy: "\"record-missing\"").count - 1
        #expect(missingEvents == 1)

        // The next edit starts from the version in force and is newer than it: v8, applied.
        let edited = try runner.ok(["limit", "kid", "1h", "--no-wait"])
        #expect(edited.stdout.contains("kid: daily limit is now 1h (was 45m)") && edited.stdout.contains("published version 8"), "\(edited)")
        try waitUntil(seconds: 10, "v8 in force") {
            (try? runner.run(["status", "kid", "--json", "--socket", again.socketPath]))?.stdout.contains("\"limitMinutes\": 60") == true
        }
        let blocked = try runner.ok(["policy", "show", "kid"])
        #expect(blocked.stderr.isEmpty && blocked.stdout.contains("steam"), "\(blocked)")
    }

    /// A junk file in the shared directory is logged when first seen and when it changes, not on every
    /// rescan: a child who can write to the folder cannot fill the journal.
    @Test func anIgnoredRecordIsLoggedOnceUntilItChanges() throws {
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        try runner.ok(["init"])
        let junk = "\(runner.sharedDir)/records/\(String(repeating: "ab", count: 32)).json"
        // Written an hour ago: a young unreadable file counts as still arriving, not as junk.
        // Made aside and renamed into place, so a rescan never sees it half written or still young.
        func write(_ text: String) throws {
            let aside = "\(runner.sharedDir)/junk.tmp"
            try Data(text.utf8).write(to: URL(fileURLWithPath: aside))
            var times = [timeval(tv_sec: time(nil) - 3600, tv_usec: 0), timeval(tv_sec: time(nil) - 3600, tv_usec: 0)]
            #expect(utimes(aside, &times) == 0)
            #expect(rename(aside, junk) == 0)
        }
        try write("not json")
        let agent = try AgentProcess(runner, arguments: ["--rescan", "0.1"])
        defer { _ = agent.stop() }
        func logged() -> Int { agent.log.components(separatedBy: "ignored record").count - 1 }
        try waitUntil(seconds: 5, "the junk file logged") { logged() >= 1 }
        usleep(1_500_000)  // 15 rescans
        #expect(logged() == 1, "\(agent.log)")
        try write("{\"still\": \"not a record\"}")
        try waitUntil(seconds: 5, "the changed file logged again") { logged() == 2 }
        usleep(1_000_000)
        #expect(logged() == 2, "\(agent.log)")
    }

    /// Record file name -> version.
    func recordVersions(_ runner: CurfewRunner) throws -> [String: Int] {
        var versions: [String: Int] = [:]
        for file in try runner.recordFiles() {
            let data = try Data(contentsOf: URL(fileURLWithPath: "\(runner.sharedDir)/records/\(file)"))
            if let object = try JSONSerialization.jsonObject(with: data) as? [String: Any], let version = object["version"] as? Int {
                versions[file] = version
            }
        }
        return versions
    }
}
