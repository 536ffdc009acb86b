import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Counting and lockouts that hold against what a child controls, against a real systemd-logind and
/// systemd in the booted container (see LogindContainerTests): the child's own idle and locked hints
/// against a busy app, `lock` that locks again whatever the hint says and ends what cannot be locked,
/// `logout` that leaves no lingering service, and the belt (the session scope's RuntimeMaxSec) that
/// ends the session at zero with the agent killed.
@Suite(.serialized, .containerTests, .timeLimit(.minutes(30)))
struct HoldsContainerTests {
    @Test func lockoutsHoldAgainstTheChild() throws {
        ContainerWorkDirectory.removeStale("curfew-holds-container", olderThan: 3600)
        let work = try ContainerWorkDirectory("curfew-holds-container")
        defer { work.remove() }
        let stage = try StaticCurfewBinaries.stage(work: work)
        let root = try ContainerScript.rootFileSystem(work: work)

        try ContainerLock.holding {
            let container = try BootedContainer.boot(root: root, binaries: stage.path, work: work)
            defer { container.stop() }
            let holds = HoldsScenario(container: container, stateDir: "/var/lib/curfew-holds", socket: "/run/curfew-holds.sock")
            try holds.claims()
            try holds.lockAtZero()
            try holds.logoutLeavesNothing()
            let belt = HoldsScenario(container: container, stateDir: "/var/lib/curfew-belt", socket: "/run/curfew-belt.sock")
            try belt.belt()
        }
    }
}

/// One agent of the scenario (its own state directory, socket and unit) in the booted container.
struct HoldsScenario {
    let container: BootedContainer
    let stateDir: String
    let socket: String
    var unit: String { "curfewd-" + (stateDir.split(separator: "-").last.map(String.init) ?? "holds") }

    @discardableResult
    func curfew(_ arguments: [String]) throws -> String {
        try container.ok(
            ["env", "CURFEW_CATALOG_DIRS=/opt/curfew/apps", "TZ=UTC", "/opt/curfew/curfew"] + arguments + ["--state-dir", stateDir])
    }

    func startAgent(beltGrace: Int = 60) throws {
        try container.ok([
            "systemd-run", "--unit=\(unit)", "--property=Type=notify", "--setenv=CURFEW_CATALOG_DIRS=/opt/curfew/apps",
            "--setenv=TZ=UTC", "/opt/curfew/curfewd", "--state-dir", stateDir, "--socket", socket, "--tick", "0.25",
            "--belt-grace", "\(beltGrace)",
        ])
    }

    func setUp(limit: String, lockout: String) throws {
        try curfew(["init"])
        try curfew(["user", "add", "kid"])
        try curfew(["timezone", "kid", "UTC"])
        try curfew(["bedtime", "kid", "off"])
        try curfew(["limit", "kid", limit])
        try curfew(["lockout", "kid", lockout])
    }

    /// The agent's live status of kid: screen seconds, whether it counts, the seconds left.
    func status() throws -> (screen: Double, counting: Bool, remaining: Double?) {
        let output = try container.ok(
            ["/opt/curfew/curfew", "status", "kid", "--json", "--socket", socket, "--state-dir", stateDir])
        guard let json = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any],
            let screen = json["screenSeconds"] as? NSNumber, let counting = json["counting"] as? Bool
        else { throw TestFailure("not the agent's live status: \(output)") }
        return (screen.doubleValue, counting, (json["remainingSeconds"] as? NSNumber)?.doubleValue)
    }

    func events(_ kind: String) throws -> Int {
        try curfew(["events", "--json"]).components(separatedBy: "\"kind\": \"\(kind)\"").count - 1
    }

    /// The child sets a hint on their own session, as any program of theirs can.
    func childSets(_ hint: String, _ value: Bool, session path: String) throws {
        try container.ok([
            "runuser", "-u", "kid", "--", "busctl", "call", "org.freedesktop.login1", path, "org.freedesktop.login1.Session", hint,
            "b", "\(value)",
        ])
    }

    func sessionID(_ path: String) throws -> String {
        let reply = try container.ok(["busctl", "get-property", "org.freedesktop.login1", path, "org.freedesktop.login1.Session", "Id"])
        return reply.split(separator: "\"").dropFirst().first.map(String.init) ?? ""
    }

    func diagnostics() -> String {
        let agent = (try? container.run(["journalctl", "--no-pager", "-o", "short-monotonic", "-u", unit, "-n", "80"]))?.stdout ?? ""
        return "\(unit)'s journal:\n\(agent)\n\(container.diagnostics())"
    }

    /// Idle and locked hints are claims: with a busy app they do not stop the count (one
    /// `idle-claim-ignored` per claim); with nothing busy a real lock stops it as before. Unlimited time:
    /// no cap on the session scope.
    func claims() throws {
        try setUp(limit: "unlimited", lockout: "logout")
        try startAgent()
        let path = try container.graphicalSession(unit: "kidclaims")
        let id = try sessionID(path)
        try waitUntil(seconds: 10, "counting") { (try? status().counting) == true }
        // Unlimited: the belt leaves the scope without a cap.
        #expect(try container.ok(["systemctl", "show", "-p", "RuntimeMaxUSec", "--value", "session-\(id).scope"]).hasPrefix("infinity"))

        // Nothing busy: the child's lock stops the count.
        try childSets("SetLockedHint", true, session: path)
        try waitUntil(seconds: 5, "no counting while locked") { (try? status().counting) == false }
        let locked = try status().screen
        usleep(3_000_000)
        #expect(try status().screen - locked <= 1, "counted while locked with nothing busy\n\(diagnostics())")
        try childSets("SetLockedHint", false, session: path)
        #expect(try events("idle-claim-ignored") == 0)

        // A busy app of the child (a CPU loop): the idle claim is not believed.
        try container.ok(["systemd-run", "--unit=kidbusy", "--uid=kid", "/usr/bin/sha256sum", "/dev/zero"])
        try waitUntil(seconds: 5, "counting") { (try? status().counting) == true }
        try childSets("SetIdleHint", true, session: path)
        #expect(try container.session(id)["IdleHint"] == "yes")
        usleep(1_500_000)
        let idleFrom = try status()
        usleep(3_000_000)
        let idleTo = try status()
        #expect(idleTo.counting && idleTo.screen - idleFrom.screen >= 2, "idle claimed, busy app: \(idleFrom) -> \(idleTo)\n\(diagnostics())")
        try waitUntil(seconds: 5, "the idle-claim-ignored event") { (try? events("idle-claim-ignored")) == 1 }
        usleep(2_500_000)
        #expect(try events("idle-claim-ignored") == 1, "once per claim")
        // The locked claim too: counted, one more event.
        try childSets("SetLockedHint", true, session: path)
        usleep(3_000_000)
        #expect(try status().counting, "locked claimed, busy app\n\(diagnostics())")
        try waitUntil(seconds: 5, "the second idle-claim-ignored event") { (try? events("idle-claim-ignored")) == 2 }
        // The busy app stops: the claim holds again within the 5 s window.
        try container.ok(["systemctl", "stop", "kidbusy"])
        try waitUntil(seconds: 12, "no counting once nothing is busy") { (try? status().counting) == false }
        #expect(try events("idle-claim-ignored") == 2)
        try childSets("SetLockedHint", false, session: path)
        try childSets("SetIdleHint", false, session: path)
        try container.ok(["systemctl", "stop", "kidclaims"])
        try waitUntil(seconds: 20, "the claims session gone") { (try? container.kidSessions())?.contains(id) == false }
    }

    /// `lock` at zero: the child's unlock is undone within seconds (a screen locker, played by root,
    /// sets LockedHint on Lock as a desktop's does); a text-console session, which cannot be locked, ends.
    func lockAtZero() throws {
        try curfew(["lockout", "kid", "lock"])
        let path = try container.graphicalSession(unit: "kiddesk")
        let id = try sessionID(path)
        try container.ok([
            "systemd-run", "--unit=locker", "/bin/sh", "-c",
            "stdbuf -oL busctl monitor --match=\"type='signal',interface='org.freedesktop.login1.Session',member='Lock'\""
                + " | while read -r line; do case \"$line\" in *Member=Lock*) busctl call org.freedesktop.login1 \(path)"
                + " org.freedesktop.login1.Session SetLockedHint b true;; esac; done",
        ])
        let console = try container.consoleLogin(unit: "kidtty", typescript: "/tmp/kid-tty")
        #expect(try container.session(console)["Type"] == "tty")
        try curfew(["limit", "kid", "0"])
        try waitUntil(seconds: 10, "the desktop locked") { (try? container.session(id)["LockedHint"]) == "yes" }
        try waitUntil(seconds: 20, "the console session ended") { (try? container.kidSessions())?.contains(console) == false }
        // The child unlocks their own session: locked again within seconds.
        for round in 1...2 {
            try childSets("SetLockedHint", false, session: path)
            let unlocked = Date()
            try waitUntil(seconds: 10, "locked again after the child's unlock (\(round))") {
                (try? container.session(id)["LockedHint"]) == "yes"
            }
            print("lock at zero: locked again \(String(format: "%.1f", Date().timeIntervalSince(unlocked))) s after the child's unlock")
        }
        #expect((try? container.kidSessions())?.contains(id) == true, "lock must not end the desktop session")
        // A second desktop that nothing locks (the locker above answers for kiddesk only): asked to lock,
        // then ended once it has stayed unlocked for 10 s; the locked desktop stays.
        let bare = try container.graphicalSession(unit: "kidbare")
        let bareID = try sessionID(bare)
        let bareFrom = Date()
        try waitUntil(seconds: 30, "the desktop nothing locks ended") { (try? container.kidSessions())?.contains(bareID) == false }
        let bareAfter = Date().timeIntervalSince(bareFrom)
        print("lock at zero: a desktop with no screen locker ended \(String(format: "%.1f", bareAfter)) s after it appeared")
        #expect(bareAfter >= 9, "ended before the 10 s a locker has\n\(diagnostics())")
        #expect((try? container.kidSessions())?.contains(id) == true, "the locked desktop stays\n\(diagnostics())")
        #expect(try curfew(["events", "--json"]).contains("\(bareID) of kid was ended: nothing locked it within 10 s"))
        try container.ok(["systemctl", "stop", "locker", "kiddesk"])
        try waitUntil(seconds: 20, "the desktop session gone") { (try? container.kidSessions())?.contains(id) == false }

        // A desktop whose child says it is locked (their own SetLockedHint) while a game of theirs is
        // busy: the claim is not taken for a lock, and the session ends.
        let spoof = try container.graphicalSession(unit: "kidspoof")
        let spoofID = try sessionID(spoof)
        try childSets("SetLockedHint", true, session: spoof)
        try container.ok(["systemd-run", "--unit=kidgame", "--uid=kid", "/usr/bin/sha256sum", "/dev/zero"])
        let spoofFrom = Date()
        try waitUntil(seconds: 40, "the desktop that claims locked while busy ended") {
            (try? container.kidSessions())?.contains(spoofID) == false
        }
        print("lock at zero: a desktop claiming locked with a busy app ended \(String(format: "%.1f", Date().timeIntervalSince(spoofFrom))) s after the claim")
        #expect(try curfew(["events", "--json"]).contains("\(spoofID) of kid was ended: it said it was locked while an app was busy"))
        _ = try? container.run(["systemctl", "stop", "kidgame", "kidspoof", "kidbare"])
    }

    /// `logout` leaves nothing: a lingering user service of the child's own goes with the session, linger
    /// stays off while locked out and is on again after the grant that lets the child back in.
    func logoutLeavesNothing() throws {
        try curfew(["lockout", "kid", "logout"])
        try curfew(["limit", "kid", "8h"])
        try container.ok(["loginctl", "enable-linger", "kid"])
        try waitUntil(seconds: 20, "kid's service manager") {
            (try? container.run(["systemctl", "is-active", "user@1500.service"]))?.stdout.hasPrefix("active") == true
        }
        try container.ok([
            "runuser", "-u", "kid", "--", "env", "XDG_RUNTIME_DIR=/run/user/1500", "systemd-run", "--user", "--unit=kidservice",
            "/bin/sleep", "900",
        ])
        let path = try container.graphicalSession(unit: "kidlogout")
        let id = try sessionID(path)
        #expect(try container.run(["pgrep", "-u", "kid", "-f", "sleep 900"]).status == 0)
        try curfew(["limit", "kid", "0"])
        try waitUntil(seconds: 40, "no process of kid left") { (try? container.run(["pgrep", "-u", "kid"]))?.status == 1 }
        #expect((try? container.kidSessions())?.contains(id) == false)
        #expect(try container.run(["test", "-e", "/var/lib/systemd/linger/kid"]).status != 0, "linger is off while locked out")
        usleep(3_000_000)
        let left = try container.run(["pgrep", "-a", "-u", "kid"])
        #expect(left.status == 1, "nothing of kid comes back: \(left.stdout)\n\(diagnostics())")
        #expect(try events("user-killed") >= 1)
        // Allowed again while the agent is stopped: the agent started again remembers linger was on.
        try container.ok(["systemctl", "stop", unit])
        try curfew(["grant", "kid", "15m"])
        #expect(try container.run(["test", "-e", "/var/lib/systemd/linger/kid"]).status != 0)
        try startAgent()
        try waitUntil(seconds: 10, "linger on again") { (try? container.run(["test", "-e", "/var/lib/systemd/linger/kid"]))?.status == 0 }
        try container.ok(["systemctl", "stop", unit])
        try container.ok(["loginctl", "disable-linger", "kid"])
    }

    /// The belt: the session scope's RuntimeMaxSec is its age + the time left + the grace, moves with a
    /// grant, and systemd ends the session at zero with the agent killed.
    func belt() throws {
        let grace = 5.0
        try setUp(limit: "15m", lockout: "logout")
        // 30 s of today's 15 minutes left.
        let formatter = DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        try container.ok([
            "sqlite3", "\(stateDir)/curfew.db",
            "INSERT INTO usage (user, day, hour, app, milliseconds) VALUES ('kid', '\(formatter.string(from: Date()))', 0, '', \((15 * 60 - 30) * 1000));",
        ])
        try startAgent(beltGrace: Int(grace))
        let path = try container.graphicalSession(unit: "kidbelt")
        let id = try sessionID(path)
        let scope = "session-\(id).scope"
        /// When systemd will end the scope (wall seconds): its activation + RuntimeMaxUSec.
        func systemdDeadline() throws -> Double? {
            let output = try container.ok(
                ["systemctl", "show", "--timestamp=unix", "-p", "ActiveEnterTimestamp", "-p", "RuntimeMaxUSec", scope])
            var values: [String: String] = [:]
            for line in output.split(separator: "\n") {
                let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
                if parts.count == 2 { values[parts[0]] = parts[1] }
            }
            guard let since = values["ActiveEnterTimestamp"].flatMap({ Double($0.dropFirst()) }),
                let text = values["RuntimeMaxUSec"], text != "infinity"
            else { return nil }
            // `1min 35.000123s`, `35s`, `2h 1min 5s`
            var seconds = 0.0
            for part in text.split(separator: " ") {
                let units: [(String, Double)] = [("min", 60), ("ms", 0.001), ("us", 0.000001), ("h", 3600), ("s", 1)]
                guard let (suffix, scale) = units.first(where: { part.hasSuffix($0.0) }), let value = Double(part.dropLast(suffix.count))
                else { throw TestFailure("cannot read RuntimeMaxUSec=\(text)") }
                seconds += value * scale
            }
            return since + seconds
        }
        func expectDeadlineMatchesTimeLeft(_ label: String) throws -> Double {
            var deadline: Double? = nil
            var expected = 0.0
            try waitUntil(seconds: 10, "\(label): the belt at the time left") {
                guard let left = try? status().remaining, let set = try? systemdDeadline() else { return false }
                deadline = set
                expected = Date().timeIntervalSince1970 + left + grace
                return abs(set - expected) <= 3
            }
            print("belt (\(label)): systemd ends \(scope) at \(deadline ?? 0), the time left + grace says \(expected)")
            return deadline ?? 0
        }
        let first = try expectDeadlineMatchesTimeLeft("30 s left")
        try curfew(["grant", "kid", "1m"])
        let second = try expectDeadlineMatchesTimeLeft("after a 1m grant")
        #expect(second - first >= 50, "the grant moved the belt by \(second - first) s")
        // The agent dies: systemd alone ends the session at zero (+ the grace).
        try container.ok(["systemctl", "kill", "--signal=SIGKILL", unit])
        try waitUntil(seconds: 5, "the agent gone") {
            (try? container.run(["systemctl", "is-active", unit]))?.stdout.hasPrefix("active") == false
        }
        try waitUntil(seconds: second - Date().timeIntervalSince1970 + 30, "the session ended by systemd") {
            (try? container.kidSessions())?.contains(id) == false
        }
        let ended = Date().timeIntervalSince1970
        #expect(ended >= second - 3, "ended \(second - ended) s before the belt")
        let journal = try container.ok(["journalctl", "--no-pager", "-u", scope])
        #expect(journal.contains("runtime time limit"), "systemd ended it for its runtime limit:\n\(journal)")
        print("belt: the session ended \(String(format: "%.1f", ended - second)) s after the belt's deadline, with the agent killed")
    }
}
