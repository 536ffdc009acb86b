import CurfewCore
import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A child who attacks the agent on purpose, with a real account of their own (`curfewflood`): floods
/// of requests and of relaunches of a blocked app while their session bus never answers, and
/// programs and reasons whose names hold escape sequences, newlines and spreadsheet formulas. What
/// they cause stays bounded (rows, events, threads, processes counted) and every output form shows
/// their text safely.
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: a test account, its processes and signals"))
struct HostileChildTests {
    static let account = "curfewflood"
    let base = AgentTests()

    static let esc = "\u{1B}"
    /// Clears the screen, then sets the terminal's title.
    static let clearAndRetitle = "\(esc)[2J\(esc)]0;pwned\u{07}"
    /// A newline, then what looks like one more row of `curfew requests` or `curfew events`.
    static let fakeRow = "homework\n99  curfewflood  8h  all done  approved"
    /// A file name cannot hold '/', so the link has none.
    static let formula = "=HYPERLINK(\"http:x.example\",\"homework\")"

    /// The account managed in UTC with an 8 h limit and no bedtime.
    func setUp() throws -> (CurfewRunner, Accounts.Account, game: String) {
        let (runner, account, game, _) = try base.setUp(account: Self.account)
        try runner.ok(["timezone", account.name, "UTC"])
        return (runner, account, game)
    }

    func sql(_ runner: CurfewRunner, _ query: String) throws -> String {
        try CurfewRunner.capture("/usr/bin/sqlite3", ["\(runner.stateDir)/curfew.db", query])
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs `script` (Python 3) as `user`; what it printed.
    func python(_ script: String, _ arguments: [String], as user: String) throws -> String {
        try CurfewRunner.capture("/usr/bin/python3", ["-c", script] + arguments, asUser: user)
    }

    /// 3,000 requests straight to the agent's socket as the child (as a script would send them: the
    /// CLI's own checks are no protection), then the CLI's answer once the cap is reached.
    @Test func aFloodOfRequestsLeavesAtMostTheCap() throws {
        let (runner, account, _) = try setUp()
        defer { runner.cleanUp() }
        let agent = try AgentProcess(runner)
        defer { agent.killHard() }
        let flood = """
            import socket, sys, json, time
            counts = {}
            started = time.monotonic()
            for i in range(int(sys.argv[2])):
                s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
                s.sendall(json.dumps({"command": "request", "minutes": 30, "reason": "please %d" % i}).encode() + b"\\n")
                reply = json.loads(s.makefile().readline())
                key = "ok" if reply.get("ok") else reply.get("error") + ": " + reply.get("message")
                counts[key] = counts.get(key, 0) + 1
                s.close()
            print(json.dumps({"counts": counts, "seconds": time.monotonic() - started}))
            """
        func floodOnce(_ count: Int) throws -> [String: Int] {
            let output = try python(flood, [agent.socketPath, "\(count)"], as: account.name)
            let result = try jsonObject(output)
            print("request flood of \(count): \(output)")
            return result["counts"] as? [String: Int] ?? [:]
        }
        let waiting = "not-permitted: at most 5 requests may wait for an answer, \(account.name) has 5; wait until a parent answers them"
        #expect(try floodOnce(3_000) == ["ok": 5, waiting: 2_995])
        #expect(try sql(runner, "SELECT COUNT(*) FROM requests") == "5")

        // The CLI says which rule, and exits 77 (a valid request the child may not make now).
        let refused = try runner.run(["request", "30m", "--socket", agent.socketPath], asUser: account.name)
        #expect(refused.status == 77, "\(refused)")
        #expect(refused.stderr == "curfew: \(String(waiting.dropFirst("not-permitted: ".count)))\n")

        // A parent who denies them all does not reopen the flood: 10 an hour, answered ones included.
        for id in 1...5 { try runner.ok(["deny", "\(id)"]) }
        #expect(try floodOnce(1_000)["ok"] == 5)
        for id in 6...10 { try runner.ok(["deny", "\(id)"]) }
        let hourly = "not-permitted: at most 10 requests an hour are recorded, \(account.name) made 10 in the last hour"
        #expect(try floodOnce(1_000) == [hourly: 1_000])
        let cli = try runner.run(["request", "30m", "--socket", agent.socketPath], asUser: account.name)
        #expect(cli.status == 77 && cli.stderr.contains("at most 10 requests an hour"), "\(cli)")

        // Rows and events: exactly what the rules allow, whatever was sent.
        #expect(try sql(runner, "SELECT COUNT(*) FROM requests") == "10")
        #expect(try sql(runner, "SELECT COUNT(*) FROM events WHERE kind = 'time-requested'") == "10")
        let childEvents = Int(try sql(runner, "SELECT COUNT(*) FROM events WHERE user = '\(account.name)'")) ?? -1
        #expect(childEvents <= 15, "events of the child: \(childEvents)")
        #expect(try runner.ok(["requests"]).stdout == "no pending requests\n")
        #expect(try runner.ok(["requests", "--all"]).stdout.split(separator: "\n").count == 11)
        // A reason with control characters is refused before anything is stored (exit 64).
        let escaped = try runner.run(
            ["request", "30m", "--reason", Self.clearAndRetitle, "--socket", agent.socketPath], asUser: account.name)
        #expect(escaped.status == 64, "\(escaped)")
        #expect(escaped.stderr.hasPrefix("curfew: reason must be plain text without control characters, got \\x1b in "))
        #expect(agent.stop() == 0, "\(agent.log)")
    }

    /// The blocked game relaunched 1,000 times while the child's session bus accepts connections and
    /// never answers: one notification worker, at most one busctl at a time, no thread per message.
    @Test func relaunchingABlockedAppWhileTheBusNeverAnswersStaysBounded() throws {
        let (runner, account, game) = try setUp()
        defer { runner.cleanUp() }
        try runner.ok(["app", "block", account.name, "testgame"])
        // The child's runtime directory with a session bus that takes connections and never reads them.
        let runtimeRoot = runner.root.appendingPathComponent("user-runtime").path
        let runtime = "\(runtimeRoot)/\(account.uid)"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        chmod(runtimeRoot, 0o755)
        chown(runtime, account.uid, account.gid)
        let busLog = runner.root.appendingPathComponent("bus.log").path
        let bus = try spawnLogged(
            "/usr/bin/python3",
            [
                "-c",
                """
                import socket, os, sys, time
                s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(4096)
                print("listening", flush=True)
                time.sleep(3600)
                """,
                "\(runtime)/bus",
            ], environment: ["PATH": "/usr/bin:/bin"], log: busLog)
        defer {
            kill(bus, SIGKILL)
            _ = waitForExit(bus)
        }
        try waitUntil(seconds: 5, "the silent bus listens") {
            ((try? String(contentsOfFile: busLog, encoding: .utf8)) ?? "").contains("listening")
        }
        let agent = try AgentProcess(runner, arguments: ["--user-runtime-root", runtimeRoot])
        defer { agent.killHard() }
        let baseline = threads(of: agent.pid)

        // Sample the agent's threads and its busctl children while the child relaunches the game.
        let peak = Peak()
        let agentPID = agent.pid
        let sampling = Thread {
            while !peak.done {
                peak.note(threads: self.threads(of: agentPID), busctl: self.busctlChildren(of: agentPID))
                usleep(10_000)
            }
        }
        sampling.start()
        let started = Date()
        let launcher = try base.runAs(
            account, "/bin/sh", ["-c", "for round in $(seq 40); do for i in $(seq 25); do \(game) 600 & done; wait; done"])
        let status = waitForExit(launcher)
        let floodSeconds = Date().timeIntervalSince(started)
        // The send under way times out (2 s) and its busctl is killed.
        usleep(3_000_000)
        peak.finish()
        while !sampling.isFinished { usleep(10_000) }
        let after = (threads: threads(of: agent.pid), busctl: busctlChildren(of: agent.pid))
        print(
            "relaunch flood: 1000 launches in \(String(format: "%.2f", floodSeconds)) s; agent threads \(baseline) before, "
                + "peak \(peak.threads), \(after.threads) after; busctl children peak \(peak.busctl), \(after.busctl) after")
        #expect(status == 0)
        #expect(peak.threads <= baseline + 2, "threads: \(baseline) before, peak \(peak.threads)")
        #expect(peak.busctl <= 1, "busctl children at once: \(peak.busctl)")
        #expect(after.busctl == 0)
        // Every launch was stopped (the loop ended: each game sleeps 600 s unless killed). Events: one
        // per enforcement pass (it names the processes stopped together), at most 60 at once per
        // user, then one a minute; the stops past that are counted for a later summary event.
        try waitUntil(seconds: 5, "the last events are flushed") { agent.log.contains("stopped an app") }
        usleep(2_500_000)
        let stopEvents = Int(try sql(runner, "SELECT COUNT(*) FROM events WHERE kind = 'app-stopped'")) ?? -1
        let recorded = try sql(runner, "SELECT SUM(json_array_length(data, '$.pids')) FROM events WHERE kind = 'app-stopped'")
        let logged = agent.log.components(separatedBy: "stopped an app").count - 1
        print("relaunch flood: \(stopEvents) app-stopped events naming \(recorded) processes; \(logged) log lines")
        #expect(stopEvents >= 30 && stopEvents <= 61, "app-stopped events: \(stopEvents)")
        #expect(logged == stopEvents)
        let undelivered = agent.log.components(separatedBy: "desktop notification not delivered").count - 1
        #expect(undelivered == 1, "\(agent.log)")
        #expect(agent.stop() == 0, "\(agent.log)")
    }

    final class Peak: @unchecked Sendable {
        private let lock = NSLock()
        private var maxThreads = 0
        private var maxBusctl = 0
        private var finished = false

        func note(threads: Int, busctl: Int) {
            lock.withLock {
                maxThreads = max(maxThreads, threads)
                maxBusctl = max(maxBusctl, busctl)
            }
        }
        func finish() { lock.withLock { finished = true } }
        var done: Bool { lock.withLock { finished } }
        var threads: Int { lock.withLock { maxThreads } }
        var busctl: Int { lock.withLock { maxBusctl } }
    }

    func threads(of pid: Int32) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []).count
    }

    /// Processes named busctl whose parent is `pid`.
    func busctlChildren(of pid: Int32) -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { entry in
            guard Int32(entry) != nil,
                let status = try? String(contentsOfFile: "/proc/\(entry)/status", encoding: .utf8)
            else { return false }
            return status.contains("Name:\tbusctl\n") && status.contains("\nPPid:\t\(pid)\n")
        }.count
    }

    /// Copies of /usr/bin/tail under hostile file names, readable by the child (not /bin/sleep: the
    /// test catalog's game is a copy of it, and a copy of a catalog app is that app). Run them with
    /// `-f /dev/null`.
    func hostilePrograms(in directory: URL) throws -> [String] {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return try [Self.clearAndRetitle, Self.fakeRow, Self.formula].map { name in
            let path = directory.appendingPathComponent(name).path
            try FileManager.default.copyItem(atPath: "/usr/bin/tail", toPath: path)
            return path
        }
    }

    /// No byte a terminal acts on (other than the newlines between lines) reaches it.
    func expectNoControls(_ text: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let controls = text.unicodeScalars.filter { $0 != "\n" && UntrustedText.isControl($0) }
        #expect(controls.isEmpty, "\(what) printed \(controls.map { String($0.value, radix: 16) }):\n\(text)", sourceLocation: sourceLocation)
        #expect(!text.contains("\n99  curfewflood"), "\(what) printed a fake row:\n\(text)", sourceLocation: sourceLocation)
    }

    @Test func namesAndReasonsAChildChoseComeOutEscapedInEveryForm() throws {
        let (runner, account, _) = try setUp()
        defer { runner.cleanUp() }
        let programs = try hostilePrograms(in: runner.root.appendingPathComponent("hostile"))
        let agent = try AgentProcess(runner)
        defer { agent.killHard() }
        let pids = try programs.map { try base.runAs(account, $0, ["-f", "/dev/null"]) }
        defer {
            for pid in pids {
                kill(pid, SIGKILL)
                _ = waitForExit(pid)
            }
        }
        var seen = ""
        do {
            try waitUntil(seconds: 10, "the programs are counted and saved") {
                let status = (try? runner.run(["status", account.name, "--json", "--socket", agent.socketPath]).stdout) ?? ""
                let saved = (try? sql(runner, "SELECT COUNT(DISTINCT app) FROM usage WHERE app != ''")) ?? ""
                seen = "status: \(status)\nsaved apps: \(saved)"
                return status.contains("pwned") && status.contains("HYPERLINK") && status.contains("all done") && saved == "3"
            }
        } catch {
            throw TestFailure("\(error)\n\(seen)\n\(agent.log)")
        }

        // Table and line output: escaped, one line per row.
        let status = try runner.ok(["status", account.name, "--socket", agent.socketPath]).stdout
        expectNoControls(status, "status")
        #expect(status.contains("\\x1b[2J\\x1b]0;pwned\\x07 "), "\(status)")
        #expect(status.contains("homework\\n99  curfewflood  8h  all done  approved "), "\(status)")
        #expect(status.contains(Self.formula), "\(status)")
        let byApp = try runner.ok(["report", account.name, "--by", "app"]).stdout
        expectNoControls(byApp, "report --by app")
        #expect(byApp.contains("  \\x1b[2J\\x1b]0;pwned\\x07  "), "\(byApp)")
        #expect(byApp.contains("  homework\\n99  curfewflood  8h  all done  approved  "), "\(byApp)")

        // CSV: no formula, quoting intact (every line has three cells).
        let csv = try runner.ok(["report", account.name, "--by", "app", "--format", "csv"]).stdout
        expectNoControls(csv.replacingOccurrences(of: Self.fakeRow, with: ""), "report --format csv")
        #expect(csv.contains(",\"'=HYPERLINK(\"\"http:x.example\"\",\"\"homework\"\")\","), "\(csv)")
        #expect(csv.contains(",\\x1b[2J\\x1b]0;pwned\\x07,"), "\(csv)")
        #expect(csv.contains(",\"homework\n99  curfewflood  8h  all done  approved\","), "\(csv)")
        #expect(!csv.contains(",=HYPERLINK"), "\(csv)")

        // JSON keeps the names exact; HTML escapes them.
        let json = try jsonObject(try runner.ok(["report", account.name, "--format", "json"]).stdout)
        let apps = Set((json["apps"] as? [[String: Any]] ?? []).compactMap { $0["app"] as? String })
        #expect(apps.isSuperset(of: [Self.clearAndRetitle, Self.fakeRow, Self.formula]), "\(apps)")
        let html = try runner.ok(["report", account.name, "--format", "html"]).stdout
        #expect(!html.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 })
        #expect(html.contains("=HYPERLINK(&quot;http:x.example&quot;,&quot;homework&quot;)"))

        // Out of time: without logind every program of the child is stopped, and the events name them.
        try runner.ok(["limit", account.name, "0"])
        for pid in pids { #expect(EnforcementEndToEndTests().death(of: pid, within: 5) != nil, "\(agent.log)") }
        var events = ""
        try waitUntil(seconds: 5, "the app-stopped events") {
            events = (try? runner.run(["events", account.name]).stdout) ?? ""
            return events.components(separatedBy: " app-stopped ").count - 1 >= 3
        }
        expectNoControls(events, "events")
        #expect(events.contains("\\x1b[2J\\x1b]0;pwned\\x07 was stopped"), "\(events)")
        #expect(events.contains("homework\\n99  curfewflood  8h  all done  approved was stopped"), "\(events)")

        // A reason stored before reasons were checked (the database of an older version) is escaped too.
        _ = try sql(
            runner,
            "INSERT INTO requests (user, minutes, reason, created_ms) VALUES ('\(account.name)', 30, "
                + "'\(Self.clearAndRetitle)' || char(10) || '99  curfewflood  8h  all done  approved', 0)")
        let requests = try runner.ok(["requests"]).stdout
        expectNoControls(requests, "requests")
        #expect(requests.contains("\\x1b[2J\\x1b]0;pwned\\x07\\n99  curfewflood  8h  all done  approved"), "\(requests)")
        let requestsJSON = try runner.ok(["requests", "--json"]).stdout
        #expect(requestsJSON.contains("\\u001b[2J"), "\(requestsJSON)")
        #expect(agent.stop() == 0, "\(agent.log)")
    }

    /// A program whose file name holds control characters counts on one computer; the family's other
    /// computer still reads that computer's usage summary, and counts its time.
    @Test func aHostileProgramNameLeavesTheUsageSummaryReadableElsewhere() throws {
        let account = try TestAccount.ensure(Self.account)
        let family = try SyncConfirmationTests.Family()
        defer { family.cleanUp() }
        for arguments in [
            ["user", "add", account.name], ["limit", account.name, "8h", "--computers", "all"], ["bedtime", account.name, "off"],
        ] {
            try family.parent.ok(arguments + ["--shared-dir", family.shared, "--no-wait"])
        }
        chmod(family.parent.root.path, 0o755)
        let programs = try hostilePrograms(in: family.parent.root.appendingPathComponent("hostile"))
        func start(_ index: Int) throws -> AgentProcess {
            let agent = try AgentProcess(
                family.agents[index].runner,
                arguments: [
                    "--shared-dir", family.shared, "--machine-id", family.agents[index].id, "--rescan", "1", "--usage-interval", "1",
                ])
            try family.enrol(index)
            return agent
        }
        let a = try start(0)
        defer { a.killHard() }
        let pids = try programs.map { try base.runAs(account, $0, ["-f", "/dev/null"]) }
        defer {
            for pid in pids {
                kill(pid, SIGKILL)
                _ = waitForExit(pid)
            }
        }
        let day = ZoneRules.system.localTime(at: Int64(Date().timeIntervalSince1970)).date
        let path = "\(family.shared)/usage/pc-a/\(account.name)/\(day).json"
        func summaryOfA() -> UsageSummary? {
            FileManager.default.contents(atPath: path).flatMap { try? UsageSummary.parse(Array($0)).summary }
        }
        try waitUntil(seconds: 15, "pc-a's summary holds the hostile programs") {
            (summaryOfA()?.totals.keys.filter { $0.contains("pwned") || $0.contains("all done") }.count ?? 0) == 2
        }
        let apps = Set(try #require(summaryOfA()).totals.keys)
        #expect(apps.contains("\\x1b[2J\\x1b]0;pwned\\x07") && apps.contains("homework\\n99  curfewflood  8h  all done  approved"))
        #expect(apps.contains(Self.formula), "\(apps)")
        for pid in pids {
            kill(pid, SIGKILL)
            _ = waitForExit(pid)
        }
        usleep(3_000_000)
        let shared = try #require(summaryOfA()).screenMilliseconds

        // The second computer reads it (no "ignoring a usage summary") and counts pc-a's time.
        let b = try start(1)
        defer { b.killHard() }
        try waitUntil(seconds: 10, "pc-b counts pc-a's time") {
            let status = try? jsonObject(
                b.runner.run(["status", account.name, "--json", "--socket", b.socketPath, "--shared-dir", family.shared]).stdout)
            return (status?["otherComputersSeconds"] as? Int ?? 0) >= Int(shared / 1000) - 1 && shared >= 2_000
        }
        #expect(!b.log.contains("ignoring a usage summary"), "\(b.log)")
        let sync = try family.parent.ok(["sync", "status", "--shared-dir", family.shared]).stdout
        #expect(!sync.contains("usage buckets must be"), "\(sync)")
        let report = try b.runner.ok(
            ["report", account.name, "--all-computers", "--by", "app", "--shared-dir", family.shared]).stdout
        expectNoControls(report, "report --all-computers")
        #expect(report.contains("\\\\x1b[2J\\\\x1b]0;pwned\\\\x07"), "\(report)")
        #expect(a.stop() == 0, "\(a.log)")
        #expect(b.stop() == 0, "\(b.log)")
    }
}
