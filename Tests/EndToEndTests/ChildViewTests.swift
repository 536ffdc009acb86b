import CurfewLinux
import CurfewTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A child reads their own status, schedule and report through the agent's socket (the state
/// directory is the parents'), with a real account (`curfewview`) and a real agent; another child's
/// are refused (77). The policy's zone is chosen so that it is between 06:00 and 07:00 there now, so
/// the day's figures are known to the minute: bedtime 22:00-05:00, downtime school 10:00-11:00.
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: test accounts and runuser"))
struct ChildViewTests {
    static let account = "curfewview"
    static let other = "curfewother"
    let base = AgentTests()

    /// `Etc/GMT+N` (tz's signs are reversed: UTC-N) where the local hour is 6 now, and that zone's
    /// local date and offset.
    static func morningZone(now: Date = Date()) -> (zone: String, date: String, offset: String) {
        let hour = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: now).hour!
        var shift = 6 - hour
        if shift < -12 { shift += 24 }
        if shift > 14 { shift -= 24 }
        let zone = shift == 0 ? "Etc/UTC" : shift > 0 ? "Etc/GMT-\(shift)" : "Etc/GMT+\(-shift)"
        let local = now.addingTimeInterval(TimeInterval(shift * 3600))
        let formatter = DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        let sign = shift < 0 ? "-" : "+"
        let offset = String(format: "%@%02d:00", sign, abs(shift))
        return (zone, formatter.string(from: local), offset)
    }

    @Test func theChildReadsTheirOwnStatusScheduleAndReportAndNotAnothers() throws {
        let (runner, account, _, _) = try base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        let other = try TestAccount.ensure(Self.other)
        try runner.ok(["user", "add", other.name])
        // Within the last minutes of an hour the local hour could turn 7 during the test: wait it out.
        while Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: Date()).minute! >= 58 {
            usleep(5_000_000)
        }
        let (zone, date, _) = Self.morningZone()
        let user = account.name
        for (name, path) in [("steam", "/usr/games/steam"), ("gcompris", "/usr/games/gcompris-qt")] {
            try Data("{\"name\": \"\(name)\", \"match\": {\"executablePaths\": [\"\(path)\"]}}".utf8)
                .write(to: URL(fileURLWithPath: "\(runner.catalogDirectory)/\(name).json"))
        }
        try runner.ok(["timezone", user, zone])
        try runner.ok(["limit", user, "2h"])
        try runner.ok(["bedtime", user, "22:00-05:00"])
        try runner.ok(["downtime", user, "add", "school", "10:00-11:00"])
        try runner.ok(["app", "limit", user, "testgame", "1h"])
        try runner.ok(["app", "block", user, "steam"])
        try runner.ok(["app", "allow", user, "gcompris"])
        try runner.ok(["allowance", user, "15m", "--per-week", "3"])
        try runner.ok(["grant", user, "30m"])
        // logind (python-dbusmock's) knows no session of the child: nothing counts, the figures stay put.
        let bus = try PrivateLogindBus()
        defer { bus.shutdown() }
        let agent = try AgentProcess(runner, logindBus: bus.address)
        defer { agent.killHard() }
        let socket = ["--socket", agent.socketPath]

        // status: the rules with their use, today's blocked windows, the extra time granted.
        // Nothing counts, so time is up 2h30m from now (assuming use): that minute, or the next.
        func timeUp(_ instant: Date) -> String {
            let local = Calendar(identifier: .gregorian).dateComponents(
                in: TimeZone(identifier: zone == "Etc/UTC" ? "UTC" : zone)!, from: instant.addingTimeInterval(9000))
            return String(format: "%02d:%02d", local.hour!, local.minute!)
        }
        let before = timeUp(Date())
        let status = try runner.run(["status"] + socket, asUser: user)
        let after = timeUp(Date())
        #expect(status.status == 0, "\(status)")
        let upAt = status.stdout.contains("time up at \(before)\n") ? before : after
        #expect(
            status.stdout == """
                \(user) on \(date) (\(zone))
                  screen time  0 of 2h30m (30m extra granted)
                  time left    2h30m
                  state        allowed
                  next change  time up at \(upAt)
                  today        bedtime 00:00-05:00, downtime school 10:00-11:00, bedtime 22:00-24:00
                  rules        testgame 0 min of 1 h
                               steam blocked
                               gcompris always allowed
                  extra time   you may take 15 min more yourself, 3 times a week (curfew extend)

                """, "\(status.stdout)")

        // schedule: the same words as a parent's, through the agent.
        let schedule = try runner.run(["schedule", "--date", "2026-12-01"] + socket, asUser: user)
        #expect(schedule.status == 0, "\(schedule)")
        #expect(
            schedule.stdout == """
                \(user) on Tuesday 2026-12-01 (\(zone), a day of 24h)
                  00:00-05:00  bedtime          5h
                  05:00-10:00  allowed          5h
                  10:00-11:00  downtime school  1h
                  11:00-22:00  allowed          11h
                  22:00-24:00  bedtime          2h
                daily limit 2h within 16h allowed

                """, "\(schedule.stdout)")
        #expect(try runner.ok(["schedule", user, "--date", "2026-12-01"]).stdout == schedule.stdout)
        // Today's shows the grant, as the parent's does.
        let today = try runner.run(["schedule", user] + socket, asUser: user)
        #expect(today.status == 0 && today.stdout.contains("(granted: 30m extra)"), "\(today)")
        #expect(try runner.ok(["schedule", user]).stdout == today.stdout)

        // report: exactly what the parent's reads, for today and for the week (JSON too).
        for period in [["--day", date], ["--week"], ["--week", "--format", "json"], ["--day", date, "--by", "app", "--format", "csv"]] {
            let own = try runner.run(["report"] + period + socket, asUser: user)
            #expect(own.status == 0, "\(own)")
            let parents = try runner.ok(["report", user] + period)
            #expect(own.stdout == parents.stdout, "\(period)")
        }
        #expect(try runner.run(["report", "--day", date] + socket, asUser: user).stdout.contains("\(date)"))

        // Another child's: refused by the CLI, and by the agent when asked directly.
        for command in [["status", other.name], ["schedule", other.name], ["report", other.name]] {
            let refused = try runner.run(command + socket, asUser: user)
            #expect(refused.status == 77, "\(command): \(refused)")
            #expect(refused.stderr == "curfew: you may only see your own \(command[0]), not \(other.name)'s\n", "\(refused.stderr)")
        }
        let script = """
            import socket, sys, json
            for command in ["rules", "usage", "watch"]:
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
                s.sendall(json.dumps({"command": command, "user": sys.argv[2], "from": "2026-11-01", "to": "2026-11-02"}).encode() + b"\\n")
                print(s.makefile().readline().strip())
            """
        let direct = try CurfewRunner.capture("/usr/bin/python3", ["-c", script, agent.socketPath, other.name], asUser: user)
        let refusal = "{\"error\":\"not-permitted\",\"message\":\"you may only see your own figures, not \\\"\(other.name)\\\"'s\",\"ok\":false}"
        #expect(direct == [refusal, refusal, refusal].joined(separator: "\n") + "\n")
        #expect(agent.stop() == 0, "\(agent.log)")
    }

    /// The watch: the first view at once, a new one when a parent grants time, and none while nothing
    /// changes; one watch per session (outside any session: one per account), a few per account.
    @Test func aWatchIsSentTheStatusWhenItChangesAndIsBounded() throws {
        let (runner, account, _, _) = try base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        try runner.ok(["timezone", account.name, "UTC"])
        let bus = try PrivateLogindBus()
        defer { bus.shutdown() }
        let agent = try AgentProcess(runner, logindBus: bus.address)
        defer { agent.killHard() }
        let script = """
            import socket, sys, json, time, select
            time.sleep(2)  # the agent has seen this process (the child's "terminal"): its status stays put from here
            first = socket.socket(socket.AF_UNIX); first.connect(sys.argv[1])
            first.sendall(b'{"command":"watch"}\\n')
            buffered = b""
            def line(seconds):
                global buffered
                deadline = time.monotonic() + seconds
                while b"\\n" not in buffered:
                    left = deadline - time.monotonic()
                    if left <= 0 or not select.select([first], [], [], left)[0]:
                        return None
                    chunk = first.recv(65536)
                    if not chunk:
                        return "closed"
                    buffered += chunk
                text, buffered = buffered.split(b"\\n", 1)
                return json.loads(text)
            view = line(10)
            print("first", view["ok"], view["status"]["limitMinutes"], flush=True)
            second = socket.socket(socket.AF_UNIX); second.connect(sys.argv[1])
            second.sendall(b'{"command":"watch"}\\n')
            print("second", second.makefile().readline().strip(), flush=True)
            view = line(3)
            print("quiet" if view is None else "unchanged %s" % view, flush=True)
            sys.stdin.readline()
            view = line(20)
            print("granted", view["status"]["limitMinutes"], view["status"]["extraMinutes"], flush=True)
            """
        let log = runner.root.appendingPathComponent("watch.log").path
        let input = runner.root.appendingPathComponent("watch.in").path
        mkfifo(input, 0o666)
        chmod(input, 0o666)
        let watcher = try spawnLogged(
            "/bin/sh", ["-c", "exec /usr/sbin/runuser -u \(account.name) -- /usr/bin/python3 -c \"$0\" \"$1\" < \"$2\"", script, agent.socketPath, input],
            environment: ["PATH": "/usr/bin:/bin"], log: log)
        defer {
            kill(watcher, SIGKILL)
            _ = waitForExit(watcher)
        }
        let feed = open(input, O_WRONLY)
        defer { close(feed) }
        func output() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        try waitUntil(seconds: 20, "the watch answers twice and stays quiet") { output().contains("quiet") || output().contains("unchanged") }
        #expect(output().hasPrefix("first True 480\nsecond {\"error\":\"already-watching\",\"message\":\"too many watches of your status are open (one per login session); close one and try again\",\"ok\":false}\nquiet\n"), "\(output())")
        try runner.ok(["grant", account.name, "30m"])
        _ = write(feed, "go\n", 3)
        try waitUntil(seconds: 20, "the grant reaches the watch") { output().contains("granted") }
        #expect(output().hasSuffix("granted 510 30\n"), "\(output())")
        #expect(waitForExit(watcher) == 0)
        #expect(agent.stop() == 0, "\(agent.log)")
    }
}
