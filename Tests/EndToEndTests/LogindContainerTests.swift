import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The agent against a real systemd-logind: a minimal Debian root (Tests/Container/rootfs.sh, cached) booted
/// with systemd as PID 1 under systemd-nspawn (Tests/Container/boot.sh), the agent built with the Swift
/// standard library linked statically and started as a unit of the container's systemd on its real system
/// bus, and a real PAM session of the account `kid` opened by pam_systemd.
///
/// Runs as root unless CURFEW_CONTAINER_TESTS=0. A machine that cannot boot the container (no
/// systemd-nspawn, no overlayfs, no network for the first debootstrap, ...) fails the test with the reason:
/// set CURFEW_CONTAINER_TESTS=0 to leave it out knowingly.
@Suite(.serialized, .containerTests, .timeLimit(.minutes(30)))
struct LogindContainerTests {
    static let stateDir = "/var/lib/curfew-test"
    static let socket = "/run/curfew-test.sock"
    /// The agent's tick, chosen so that every figure must be within 1 s of the truth. The tracker credits
    /// each tick's interval by what it observed when the interval began, so every session change takes
    /// effect up to one tick late (a start or an unlock then counts less than the truth, a lock, an idle
    /// or an end more); a live status may be up to one tick old; figures are rounded to whole seconds.
    /// With this test's six changes a live figure is off by at most 0.5 s + 4 ticks and the final report by
    /// at most 0.5 s + 3 ticks: 0.9 s and 0.8 s with a 0.1 s tick, but up to 2.5 s with 0.5 s.
    static let tick = 0.1

    @Test func screenTimeFollowsARealLogindSession() throws {
        ContainerWorkDirectory.removeStale("curfew-logind-container", olderThan: 3600)
        let work = try ContainerWorkDirectory("curfew-logind-container")
        defer { work.remove() }
        let stage = try StaticCurfewBinaries.stage(work: work)
        let root = try ContainerScript.rootFileSystem(work: work)

        try ContainerLock.holding {
            let container = try BootedContainer.boot(root: root, binaries: stage.path, work: work)
            defer { container.stop() }
            try container.scenario()
            try container.enforcementScenario()
        }
    }
}

/// One booted container (a handle from boot.sh) and the scenario run in it.
struct BootedContainer {
    let handle: String
    let work: ContainerWorkDirectory

    static func boot(root: String, binaries: String, work: ContainerWorkDirectory) throws -> BootedContainer {
        let started = Date()
        let result = try ContainerScript.run(
            ["boot.sh", "start", root, binaries, "\(getpid())"], work: work, timeout: 150)
        guard result.status == 0, let handle = result.stdout.split(separator: "\n").last.map(String.init),
            handle.hasPrefix("/")
        else {
            throw TestFailure("cannot boot the container (boot.sh start, \(result.status)):\n\(result.stderr)")
        }
        print("container booted in \(String(format: "%.1f", Date().timeIntervalSince(started))) s: \(handle)")
        return BootedContainer(handle: handle, work: work)
    }

    func stop() {
        let result = try? ContainerScript.run(["boot.sh", "stop", handle], work: work, timeout: 60)
        #expect(result?.status == 0, "boot.sh stop: \(result.map { $0.stderr } ?? "did not run")")
    }

    /// Runs a command inside the container.
    @discardableResult
    func run(_ arguments: [String], timeout: Double = 60) throws -> ContainerScript.Result {
        try ContainerScript.run(["boot.sh", "exec", handle] + arguments, work: work, timeout: timeout)
    }

    /// Runs a command inside the container and expects exit 0; its stdout.
    @discardableResult
    func ok(_ arguments: [String], timeout: Double = 60) throws -> String {
        let result = try run(arguments, timeout: timeout)
        guard result.status == 0 else {
            throw TestFailure("in the container, \(arguments.joined(separator: " ")): \(result)\n\(diagnostics())")
        }
        return result.stdout
    }

    /// `curfew` inside the container, on the test's state directory.
    @discardableResult
    func curfew(_ arguments: [String]) throws -> String {
        try ok(
            ["env", "CURFEW_CATALOG_DIRS=/opt/curfew/apps", "TZ=UTC", "/opt/curfew/curfew"] + arguments
                + ["--state-dir", LogindContainerTests.stateDir])
    }

    /// The agent's journal and the end of the container's, for failure messages.
    func diagnostics() -> String {
        let agent = (try? run(["journalctl", "--no-pager", "-o", "short-monotonic", "-u", "curfewd-test"]))?.stdout ?? ""
        let system = (try? run(["journalctl", "--no-pager", "-o", "short-monotonic", "-n", "40"]))?.stdout ?? ""
        return "curfewd's journal:\n\(agent)\nthe container's journal:\n\(system)"
    }

    /// Today's figures from the running agent: screen seconds and whether it is counting now.
    func status() throws -> (screen: Double, counting: Bool) {
        let output = try ok(
            ["/opt/curfew/curfew", "status", "kid", "--json", "--socket", LogindContainerTests.socket,
             "--state-dir", LogindContainerTests.stateDir])
        guard let json = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any],
            let screen = json["screenSeconds"] as? NSNumber, let counting = json["counting"] as? Bool
        else { throw TestFailure("not the agent's live status: \(output)") }
        return (screen.doubleValue, counting)
    }

    /// logind's view of one session (`loginctl show-session`), property by property.
    func session(_ id: String) throws -> [String: String] {
        let output = try ok(
            ["loginctl", "show-session", id, "-p", "Active", "-p", "Class", "-p", "Type", "-p", "State", "-p", "LockedHint",
             "-p", "IdleHint", "-p", "Name"])
        var properties: [String: String] = [:]
        for line in output.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { properties[parts[0]] = parts[1] }
        }
        return properties
    }

    func setHint(_ hint: String, _ value: Bool, session path: String) throws {
        try ok(["busctl", "call", "org.freedesktop.login1", path, "org.freedesktop.login1.Session", hint, "b", "\(value)"])
    }

    func scenario() throws {
        // The binaries are self-contained: every shared library they need is in the container.
        for binary in ["curfewd", "curfew"] {
            let libraries = try ok(["ldd", "/opt/curfew/\(binary)"])
            #expect(!libraries.contains("not found") && !libraries.contains("libswift"), "\(binary):\n\(libraries)")
        }
        try curfew(["init"])
        try curfew(["user", "add", "kid"])
        try curfew(["bedtime", "kid", "off"])
        try curfew(["limit", "kid", "8h"])

        // The agent as a unit of the container's systemd (Type=notify: systemd-run returns once it sent
        // READY=1), on the system bus: no --logind-bus, it finds logind through sd_booted and /run/systemd/seats.
        try ok([
            "systemd-run", "--unit=curfewd-test", "--property=Type=notify", "--setenv=CURFEW_CATALOG_DIRS=/opt/curfew/apps",
            "/opt/curfew/curfewd", "--state-dir", LogindContainerTests.stateDir, "--socket", LogindContainerTests.socket,
            "--tick", String(LogindContainerTests.tick),
        ])
        usleep(1_000_000)
        let before = try status()
        #expect(before.screen == 0 && !before.counting, "no session yet: \(before)")

        // A real session of kid through PAM: pam_systemd registers it with logind and moves the process
        // into the session's scope. (Not Type=exec: with PAMName= systemd 252 never finishes that start
        // job, it times out after 90 s; Type=simple returns at fork, so wait for the session below.)
        //
        // Why wayland: the session has no seat (a container has no VTs and no seat devices), and logind
        // calls every seatless session Active. pam_systemd would make a session without a TTY or display
        // Type=unspecified, Class=background (which never counts: it is cron, not a person); and logind
        // accepts SetIdleHint only for graphical sessions (for TTY sessions it derives idleness from the
        // TTY's atime). XDG_SESSION_TYPE=wayland and XDG_SESSION_CLASS=user, which pam_systemd reads from
        // the PAM environment as a display manager sets them, give what a desktop login gives: an Active
        // user session whose LockedHint and IdleHint the session itself (or root) sets.
        let path = try graphicalSession(unit: "kidsession")
        func sessionProperty(_ name: String) throws -> String {
            // `s "4"`, `t 1795310123706735`
            let reply = try ok(["busctl", "get-property", "org.freedesktop.login1", path, "org.freedesktop.login1.Session", name])
                .trimmingCharacters(in: .whitespacesAndNewlines)
            return String(reply.split(separator: " ", maxSplits: 1).last ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        let id = try sessionProperty("Id")
        // The truth starts when logind created the session (its Timestamp, in microseconds of the wall clock
        // the container shares with us).
        guard let created = Double(try sessionProperty("Timestamp")) else { throw TestFailure("no Timestamp for session \(id)") }
        let start = Date(timeIntervalSince1970: created / 1e6)
        let properties = try session(id)
        #expect(
            properties["Active"] == "yes" && properties["Class"] == "user" && properties["Type"] == "wayland"
                && properties["Name"] == "kid" && properties["LockedHint"] == "no" && properties["IdleHint"] == "no",
            "session \(id): \(properties)")

        // Each figure is checked against the truth measured here, within 1 s (see `tick`):
        // the time since the session started, less the periods after a lock or idle call returned and
        // before the matching unlock or wake call returned.
        var counted = 0.0
        var countingSince: Date? = start
        var figures: [String] = []
        func truth() -> Double { counted + (countingSince.map { Date().timeIntervalSince($0) } ?? 0) }
        func pause() {
            if let since = countingSince { counted += Date().timeIntervalSince(since) }
            countingSince = nil
        }
        func resume() { countingSince = Date() }
        func check(_ label: String, counting: Bool, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let expected = truth()
            let now = try status()
            figures.append("\(label): \(Int(now.screen)) s (truth \(String(format: "%.2f", expected)) s, counting \(now.counting))")
            #expect(
                abs(now.screen - expected) <= 1.0,
                "\(label): screen \(now.screen) s, truth \(expected) s; \(figures)\n\(diagnostics())", sourceLocation: sourceLocation)
            #expect(
                now.counting == counting, "\(label): counting \(now.counting); \(figures)\n\(diagnostics())",
                sourceLocation: sourceLocation)
        }

        // (a) Active, unlocked, not idle: counts.
        usleep(3_000_000)
        try check("active 3 s", counting: true)
        // (b) Locked: stops; unlocked: resumes.
        try setHint("SetLockedHint", true, session: path)
        pause()
        #expect(try session(id)["LockedHint"] == "yes")
        usleep(3_000_000)
        try check("locked 3 s", counting: false)
        try setHint("SetLockedHint", false, session: path)
        resume()
        usleep(2_500_000)
        try check("unlocked 2.5 s", counting: true)
        // (c) Idle: stops; active again: resumes.
        try setHint("SetIdleHint", true, session: path)
        pause()
        #expect(try session(id)["IdleHint"] == "yes")
        usleep(3_000_000)
        try check("idle 3 s", counting: false)
        try setHint("SetIdleHint", false, session: path)
        resume()
        usleep(2_500_000)
        try check("no longer idle 2.5 s", counting: true)
        // (d) The session ends: stops.
        try ok(["loginctl", "terminate-session", id])
        pause()
        usleep(3_000_000)
        let remaining = try ok(["loginctl", "list-sessions", "--no-legend"])
        #expect(!remaining.contains(" kid "), "kid's session is gone: \(remaining)")
        try check("session ended 3 s", counting: false)
        let total = truth()

        // SIGTERM: the agent flushes; the report reads what reached the database.
        try ok(["systemctl", "stop", "curfewd-test"])
        let report = try curfew(["report", "kid", "--format", "json"])
        guard let json = try JSONSerialization.jsonObject(with: Data(report.utf8)) as? [String: Any],
            let days = json["days"] as? [[String: Any]], let today = days.last,
            let screen = (today["screenSeconds"] as? NSNumber)?.doubleValue
        else { throw TestFailure("bad report: \(report)") }
        figures.append("report: \(Int(screen)) s (truth \(String(format: "%.2f", total)) s)")
        print("logind container figures: \(figures.joined(separator: "; "))")
        #expect(abs(screen - total) <= 1.0, "report \(screen) s, truth \(total) s; \(figures)")
        let events = try curfew(["events", "--json"])
        #expect(events.contains("\"kind\": \"agent-started\"") && events.contains("\"kind\": \"agent-stopped\""), "\(events)")
        #expect(!events.contains("logind-unavailable"), "the agent used logind: \(events)\n\(diagnostics())")
    }
}

extension BootedContainer {
    /// A graphical-like session of kid through PAM (see `scenario` for why wayland); its logind object path.
    func graphicalSession(unit: String) throws -> String {
        try ok([
            "systemd-run", "--unit=\(unit)", "--property=PAMName=login", "--property=User=kid",
            "--setenv=XDG_SESSION_TYPE=wayland", "--setenv=XDG_SESSION_CLASS=user",
            "--setenv=XDG_SESSION_DESKTOP=curfew-test", "/bin/sleep", "600",
        ])
        let mainPID = try ok(["systemctl", "show", "--property=MainPID", "--value", unit])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        // `o "/org/freedesktop/login1/session/_31"` once PAM has opened the session.
        var path = ""
        try waitUntil(seconds: 20, "kid's logind session (process \(mainPID))") {
            let reply = try? run([
                "busctl", "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.login1.Manager",
                "GetSessionByPID", "u", mainPID,
            ])
            path = reply.flatMap { $0.status == 0 ? $0.stdout.split(separator: "\"").dropFirst().first.map(String.init) : nil } ?? ""
            return !path.isEmpty
        }
        return path
    }

    static let enforcedState = "/var/lib/curfew-enforce"
    static let enforcedSocket = "/run/curfew-enforce.sock"

    /// `curfew` inside the container on the enforcement scenario's state directory.
    @discardableResult
    func enforcedCurfew(_ arguments: [String]) throws -> String {
        try ok(
            ["env", "CURFEW_CATALOG_DIRS=/opt/curfew/apps", "TZ=UTC", "/opt/curfew/curfew"] + arguments
                + ["--state-dir", Self.enforcedState])
    }

    /// kid's logind sessions: id -> properties, from `loginctl list-sessions`.
    func kidSessions() throws -> [String] {
        try ok(["loginctl", "list-sessions", "--no-legend"]).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            return fields.count >= 3 && fields[2] == "kid" ? fields[0] : nil
        }
    }

    /// A console login of kid: `login -f kid` on a pseudo-terminal that script(1) records in `typescript`,
    /// so what the agent writes to kid's terminals can be read back. Returns the session id.
    func consoleLogin(unit: String, typescript: String) throws -> String {
        let before = Set(try kidSessions())
        try ok(["systemd-run", "--unit=\(unit)", "/bin/sh", "-c", "sleep 900 | script -qfec 'login -f kid' \(typescript)"])
        var id = ""
        try waitUntil(seconds: 20, "kid's console session") {
            id = (try? kidSessions())?.first { !before.contains($0) } ?? ""
            return !id.isEmpty
        }
        return id
    }

    func typescript(_ path: String) -> String { (try? run(["cat", path]))?.stdout ?? "" }

    /// `su - kid -c true` through PAM (every login service includes common-account): exit status and
    /// everything su printed.
    func suKid() throws -> (status: Int32, output: String) {
        let result = try run(["su", "-", "kid", "-c", "true"])
        return (result.status, result.stdout + result.stderr)
    }

    /// Enforcement against real logind and real PAM: kid's console session is warned on its terminal,
    /// ended at the limit; `su - kid` is refused with the reason until a parent's grant lets kid back
    /// in; then a short bedtime does the same, and a later bedtime granted for tonight lets kid in.
    func enforcementScenario() throws {
        try enforcedCurfew(["init"])
        try enforcedCurfew(["user", "add", "kid"])
        try enforcedCurfew(["timezone", "kid", "UTC"])
        try enforcedCurfew(["bedtime", "kid", "off"])
        try enforcedCurfew(["limit", "kid", "15m"])
        try enforcedCurfew(["warnings", "kid", "1"])
        // 40 seconds of today's 15 minutes left (the database is the agent's; sqlite3 is in the root).
        let formatter = DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        let today = formatter.string(from: Date())
        try ok([
            "sqlite3", "\(Self.enforcedState)/curfew.db",
            "INSERT INTO usage (user, day, hour, app, milliseconds) VALUES ('kid', '\(today)', 0, '', \((15 * 60 - 40) * 1000));",
        ])
        // Every login service asks Curfew (the shipped snippet, pointed at this state directory).
        let snippet = try String(
            contentsOf: CurfewRunner.repositoryRoot.appendingPathComponent("packaging/pam/curfew"), encoding: .utf8)
        let line = snippet.split(separator: "\n").first { $0.hasPrefix("account") }.map(String.init) ?? ""
        #expect(line == "account required pam_exec.so quiet stdout seteuid /usr/bin/curfew check-login")
        let wired = line.replacingOccurrences(of: "/usr/bin/curfew", with: "/opt/curfew/curfew")
            + " --state-dir \(Self.enforcedState) --socket \(Self.enforcedSocket)"
        try ok(["sh", "-c", "echo '\(wired)' > /etc/pam.d/curfew && echo '@include curfew' >> /etc/pam.d/common-account"])

        try ok([
            "systemd-run", "--unit=curfewd-enforce", "--property=Type=notify", "--setenv=CURFEW_CATALOG_DIRS=/opt/curfew/apps",
            "--setenv=TZ=UTC", "/opt/curfew/curfewd", "--state-dir", Self.enforcedState, "--socket", Self.enforcedSocket,
            "--tick", "0.25",
        ])
        let session = try consoleLogin(unit: "kidconsole", typescript: "/tmp/kid-console")
        let loggedIn = Date()
        // The final countdown reaches the terminal, then the session is ended through logind.
        try waitUntil(seconds: 45, "the warnings on kid's terminal") {
            typescript("/tmp/kid-console").contains("10 seconds of screen time left today")
        }
        let console = typescript("/tmp/kid-console")
        #expect(console.contains("Curfew: 30 seconds of screen time left today"), "\(console)")
        try waitUntil(seconds: 20, "kid's session ended") { (try? kidSessions())?.contains(session) == false }
        let used = Date().timeIntervalSince(loggedIn)
        #expect(used >= 35 && used <= 47, "the session lasted \(used) s with 40 s left\n\(diagnostics())")
        let events = try enforcedCurfew(["events", "--json"])
        for kind in ["warning", "lockout", "session-ended"] {
            #expect(events.contains("\"kind\": \"\(kind)\""), "\(kind): \(events)")
        }

        // A new login is refused with the reason and the time kid may log in again.
        let refused = try suKid()
        #expect(refused.status != 0, "su - kid got in: \(refused.output)")
        #expect(
            refused.output.contains("Curfew: kid may not log in now: today's limit of 15m is used up. You may log in again tomorrow at 00:00."),
            "\(refused.output)")
        // A parent grants 15 minutes: kid may log in again.
        try enforcedCurfew(["grant", "kid", "15m"])
        try waitUntil(seconds: 5, "the grant in force") { (try? suKid())?.status == 0 }

        // Bedtime: a short window from the next whole minute (20 s away at least), 1-minute warning.
        let now = Date()
        let calendar = Calendar(identifier: .gregorian)
        var components = calendar.dateComponents(in: TimeZone(identifier: "UTC")!, from: now.addingTimeInterval(80))
        components.second = 0
        components.nanosecond = 0
        let start = calendar.date(from: components)!
        formatter.dateFormat = "HH:mm"
        let window = "\(formatter.string(from: start))-\(formatter.string(from: start.addingTimeInterval(600)))"
        try enforcedCurfew(["bedtime", "kid", window])
        let night = try consoleLogin(unit: "kidnight", typescript: "/tmp/kid-night")
        try waitUntil(seconds: start.timeIntervalSinceNow + 5, "the bedtime countdown") {
            typescript("/tmp/kid-night").contains("bedtime starts in 10 seconds")
        }
        try waitUntil(seconds: 15, "kid's session ended at bedtime") { (try? kidSessions())?.contains(night) == false }
        #expect(Date() >= start.addingTimeInterval(-1), "ended before bedtime")
        let atBedtime = try suKid()
        #expect(atBedtime.status != 0)
        #expect(atBedtime.output.contains("Curfew: kid may not log in now: it is bedtime."), "\(atBedtime.output)")
        // Bedtime moved 30 minutes later tonight: in again.
        formatter.dateFormat = "yyyy-MM-dd"
        try enforcedCurfew(["grant", "kid", "0", "--bedtime", "30m", "--date", formatter.string(from: start)])
        try waitUntil(seconds: 5, "the later bedtime in force") { (try? suKid())?.status == 0 }
        print("enforcement in the container: console session ended \(String(format: "%.1f", used)) s after login with 40 s left; su at the limit: \(refused.output.trimmingCharacters(in: .whitespacesAndNewlines)); at bedtime: \(atBedtime.output.trimmingCharacters(in: .whitespacesAndNewlines))")

        // `lock`: a desktop-like session is locked when no time is left, and locked again after the
        // child unlocks it. Lock signals are watched on the system bus; the test plays the desktop.
        let path = try graphicalSession(unit: "kiddesktop")
        try ok([
            "systemd-run", "--unit=lockwatch", "--property=StandardOutput=file:/tmp/lock-signals",
            "busctl", "monitor", "--match=type='signal',interface='org.freedesktop.login1.Session',member='Lock'",
        ])
        func locks() -> Int { typescript("/tmp/lock-signals").components(separatedBy: "Member=Lock").count - 1 }
        try enforcedCurfew(["lockout", "kid", "lock"])
        // No screen time today beyond the grant, which is used up.
        try enforcedCurfew(["limit", "kid", "0"])
        try waitUntil(seconds: 8, "LockSession") { locks() >= 1 }
        try ok(["busctl", "call", "org.freedesktop.login1", path, "org.freedesktop.login1.Session", "SetLockedHint", "b", "true"])
        // LockedHint is the child's to set: locked again every few seconds whatever it says.
        let whileLocked = locks()
        try waitUntil(seconds: 8, "a lock while LockedHint says locked") { locks() > whileLocked }
        // The child unlocks: locked again within seconds.
        let beforeUnlock = locks()
        try ok(["busctl", "call", "org.freedesktop.login1", path, "org.freedesktop.login1.Session", "SetLockedHint", "b", "false"])
        try waitUntil(seconds: 8, "the lock after the unlock") { locks() > beforeUnlock }
        let lockEvents = try enforcedCurfew(["events", "--json"]).components(separatedBy: "\"kind\": \"session-locked\"").count - 1
        #expect(lockEvents >= 2, "session-locked events: \(lockEvents)")
        #expect((try? kidSessions())?.isEmpty == false, "lock must not end the session")
        try ok(["systemctl", "stop", "curfewd-enforce", "lockwatch"])
    }
}

extension Trait where Self == ConditionTrait {
    /// The container tests run as root unless CURFEW_CONTAINER_TESTS=0.
    static var containerTests: Self {
        .enabled(
            if: getuid() == 0 && ProcessInfo.processInfo.environment["CURFEW_CONTAINER_TESTS"] != "0",
            "needs root (debootstrap, systemd-nspawn); CURFEW_CONTAINER_TESTS=0 leaves it out")
    }
}

/// One booted container at a time: the container tests of different suites may run in parallel
/// (`swift test --parallel`), and two systemd machines with their agents on two cores would make
/// each other's timing checks (1 s) fail. flock(2) on a file beside the cached roots.
enum ContainerLock {
    static func holding<T>(_ body: () throws -> T) throws -> T {
        let directory = ProcessInfo.processInfo.environment["CURFEW_ROOTFS_CACHE"] ?? "/var/cache/curfew-tests"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = "\(directory)/.container-lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw TestFailure("open \(path): errno \(errno)") }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw TestFailure("flock \(path): errno \(errno)") }
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }
}

/// Runs the scripts in Tests/Container with posix_spawn and an empty signal mask (children of a Swift
/// Testing process would otherwise inherit a blocked SIGTERM, and so would the container).
enum ContainerScript {
    struct Result: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
    }

    static let directory = CurfewRunner.repositoryRoot.appendingPathComponent("Tests/Container")

    /// `rootfs.sh`: the cached root's path (the first time, debootstrap builds it).
    static func rootFileSystem(work: ContainerWorkDirectory) throws -> String {
        let started = Date()
        let result = try run(["rootfs.sh"], work: work, timeout: 1200)
        guard result.status == 0, let root = result.stdout.split(separator: "\n").last.map(String.init), root.hasPrefix("/")
        else { throw TestFailure("cannot make the container's root file system (rootfs.sh, \(result.status)):\n\(result.stderr)") }
        print("container root \(root) ready in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        return root
    }

    /// Runs a script of Tests/Container (or, when `arguments[0]` is absolute, that program); stdout and
    /// stderr go through files in `work`, so a child that keeps a descriptor open cannot hang us. Killed
    /// (its whole process group) after `timeout` seconds.
    static func run(_ arguments: [String], work: ContainerWorkDirectory, timeout: Double) throws -> Result {
        let program = arguments[0].hasPrefix("/") ? arguments[0] : directory.appendingPathComponent(arguments[0]).path
        let token = UUID().uuidString.prefix(8)
        let out = work.url.appendingPathComponent("out-\(token)").path
        let err = work.url.appendingPathComponent("err-\(token)").path
        defer {
            unlink(out)
            unlink(err)
        }
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + (environment["PATH"] ?? "")
        let pid: Int32
        do {
            // A group of its own, so a timeout kills everything the script started.
            pid = try spawnProcess(
                program, Array(arguments.dropFirst()),
                options: SpawnOptions(environment: environment, output: out, errors: err, truncate: true, processGroup: 0))
        } catch {
            throw TestFailure("posix_spawn \(program): \(error)")
        }
        let deadline = Date().addingTimeInterval(timeout)
        var status: Int32 = 0
        var timedOut = false
        while true {
            let done = waitpid(pid, &status, WNOHANG)
            if done == pid { break }
            if done < 0 && errno != EINTR { break }
            if !timedOut && Date() > deadline {
                timedOut = true
                kill(-pid, SIGKILL)
            }
            usleep(10_000)
        }
        let code: Int32 = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        let stdout = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        var stderr = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        if timedOut { stderr += "\n(killed after \(Int(timeout)) s)" }
        return Result(status: code, stdout: stdout, stderr: stderr)
    }
}

/// `curfewd` and `curfew` linked with the Swift standard library statically, so they run in a root without
/// the toolchain: from $CURFEW_STATIC_BIN_DIR when set, else built (incrementally) with
/// `swift build -c release --static-swift-stdlib` in the scratch directory .build/container-static.
/// Not in .build itself: `swift test` holds the lock on .build while the tests run, so a `swift build`
/// there would wait forever; and switching --static-swift-stdlib on and off recompiles every module, so
/// sharing .build/release with the ordinary release build (`make release`, `make bench`) would rebuild
/// everything each time. `make test` runs the same build before `swift test`.
enum StaticCurfewBinaries {
    static let names = ["curfewd", "curfew"]
    static let scratchPath = ".build/container-static"

    /// What the container sees at /opt/curfew: the two binaries (hard links: they are 100 MB each with
    /// their debug information) and the app catalog, in `work`.
    static func stage(work: ContainerWorkDirectory) throws -> URL {
        let binaries = try locate(work: work)
        let stage = work.url.appendingPathComponent("opt-curfew")
        try FileManager.default.createDirectory(at: stage, withIntermediateDirectories: true)
        for name in ["curfew", "curfewd"] {
            let source = binaries.appendingPathComponent(name)
            let target = stage.appendingPathComponent(name)
            if (try? FileManager.default.linkItem(at: source, to: target)) == nil {
                try FileManager.default.copyItem(at: source, to: target)
            }
        }
        try FileManager.default.copyItem(
            at: CurfewRunner.repositoryRoot.appendingPathComponent("policies/apps"), to: stage.appendingPathComponent("apps"))
        chmod(stage.path, 0o755)
        return stage
    }

    static func locate(work: ContainerWorkDirectory) throws -> URL {
        if let override = ProcessInfo.processInfo.environment["CURFEW_STATIC_BIN_DIR"], !override.isEmpty {
            let directory = URL(fileURLWithPath: override)
            try requireStatic(directory, work: work)
            return directory
        }
        let repository = CurfewRunner.repositoryRoot
        let scratch = repository.appendingPathComponent(scratchPath)
        let swift = try swiftExecutable()
        // The Makefile's `static` flags, so its build and this one do not relink each other's products;
        // curfew-multicall is what packaging/deb/build.sh installs.
        for product in names + ["curfew-multicall"] {
            let started = Date()
            let result = try ContainerScript.run(
                [swift, "build", "--package-path", repository.path, "--scratch-path", scratch.path, "-c", "release",
                 "--static-swift-stdlib", "-Xlinker", "--gc-sections", "-Xswiftc", "-Osize", "--product", product],
                work: work, timeout: 1800)
            guard result.status == 0 else { throw TestFailure("cannot build \(product) statically:\n\(result)") }
            print("built \(product) (static Swift stdlib) in \(String(format: "%.0f", Date().timeIntervalSince(started))) s")
        }
        let built = scratch.appendingPathComponent("release")
        try requireStatic(built, work: work)
        return built
    }

    /// ldd lists no library of the Swift runtime (libswiftCore, Foundation, libdispatch, BlocksRuntime).
    static func requireStatic(_ directory: URL, work: ContainerWorkDirectory) throws {
        for name in names {
            let path = directory.appendingPathComponent(name).path
            guard FileManager.default.isExecutableFile(atPath: path) else { throw TestFailure("no executable \(path)") }
            let result = try ContainerScript.run(["/usr/bin/ldd", path], work: work, timeout: 30)
            let swiftLibraries = result.stdout.split(separator: "\n").filter {
                $0.contains("libswift") || $0.contains("Foundation") || $0.contains("libdispatch") || $0.contains("BlocksRuntime")
            }
            guard result.status == 0, swiftLibraries.isEmpty else {
                throw TestFailure("\(path) is not linked with the Swift standard library statically:\n\(result.stdout)")
            }
        }
    }

    static func swiftExecutable() throws -> String {
        let environment = ProcessInfo.processInfo.environment
        if let swift = environment["SWIFT"], swift.hasPrefix("/"), FileManager.default.isExecutableFile(atPath: swift) {
            return swift
        }
        let candidates = (environment["PATH"] ?? "").split(separator: ":").map { "\($0)/swift" } + ["/opt/swift/usr/bin/swift"]
        guard let swift = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw TestFailure("cannot find the swift executable to build the static binaries (set SWIFT or PATH)")
        }
        return swift
    }
}

/// A directory under /tmp, removed by `remove()`.
struct ContainerWorkDirectory {
    let url: URL

    init(_ prefix: String) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func remove() { try? FileManager.default.removeItem(at: url) }

    /// Directories a killed run left behind (they hold hard links to binaries that may be gone otherwise).
    static func removeStale(_ prefix: String, olderThan seconds: Double) {
        let base = FileManager.default.temporaryDirectory
        let names = (try? FileManager.default.contentsOfDirectory(atPath: base.path)) ?? []
        for name in names where name.hasPrefix("\(prefix)-") {
            let url = base.appendingPathComponent(name)
            let modified = (try? FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date) ?? nil
            if let modified, Date().timeIntervalSince(modified) > seconds { try? FileManager.default.removeItem(at: url) }
        }
    }
}
