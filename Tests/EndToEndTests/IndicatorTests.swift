import CurfewLinux
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `curfew-indicator` in a real desktop session of a real child (`curfewtray`): their own session bus
/// (`dbus-daemon --session`), an X server (Xvfb) and Debian's `xfce4-panel` with its status tray, whose
/// StatusNotifierItem host draws the item; a real agent whose state the item follows as bedtime comes
/// and after a parent's grant; the menu's "Ask for 30 min" files the request a parent sees.
@Suite(
    .serialized,
    .enabled(
        if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/xfce4-panel")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb"),
        "needs root (test accounts) and xvfb, xfce4-panel, imagemagick (make deps)"))
struct IndicatorTests {
    static let account = "curfewtray"
    let base = AgentTests()

    /// The desktop session: Xvfb, the child's session bus, and their panel with the status tray.
    final class Desktop {
        let root: URL
        let user: Accounts.Account
        let display: String
        let busAddress: String
        var pids: [Int32] = []

        init(root: URL, user: Accounts.Account) throws {
            self.root = root
            self.user = user
            display = ":\(60 + Int(getpid() % 30))"
            let home = root.appendingPathComponent("home-\(user.name)")
            let config = home.appendingPathComponent(".config/xfce4/xfconf/xfce-perchannel-xml")
            try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
            // One panel along the top with the status tray plugin (it hosts StatusNotifierItems and
            // is the session's StatusNotifierWatcher).
            try Data(
                """
                <?xml version="1.0" encoding="UTF-8"?>
                <channel name="xfce4-panel" version="1.0">
                  <property name="configver" type="int" value="2"/>
                  <property name="panels" type="array">
                    <value type="int" value="1"/>
                    <property name="panel-1" type="empty">
                      <property name="position" type="string" value="p=6;x=0;y=0"/>
                      <property name="length" type="uint" value="100"/>
                      <property name="position-locked" type="bool" value="true"/>
                      <property name="size" type="uint" value="32"/>
                      <property name="plugin-ids" type="array"><value type="int" value="1"/></property>
                    </property>
                  </property>
                  <property name="plugins" type="empty"><property name="plugin-1" type="string" value="systray"/></property>
                </channel>
                """.utf8
            ).write(to: config.appendingPathComponent("xfce4-panel.xml"))
            _ = try CurfewRunner.runTool("/bin/chown", ["-R", "\(user.uid):\(user.gid)", home.path])
            busAddress = "unix:path=\(home.path)/bus"
            let session = [
                "PATH=/usr/bin:/bin", "HOME=\(home.path)", "XDG_CONFIG_HOME=\(home.path)/.config", "XDG_RUNTIME_DIR=\(home.path)",
                "DISPLAY=\(display)", "DBUS_SESSION_BUS_ADDRESS=\(busAddress)", "NO_AT_BRIDGE=1",
            ]
            pids.append(
                try spawnLogged(
                    "/usr/bin/Xvfb", [display, "-screen", "0", "640x200x24", "-ac", "-nolisten", "tcp"], environment: [:],
                    log: root.appendingPathComponent("xvfb.log").path))
            try waitUntil(seconds: 20, "Xvfb takes clients") { FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(display.dropFirst())") }
            pids.append(
                try spawnLogged(
                    "/usr/sbin/runuser",
                    ["-u", user.name, "--", "/usr/bin/env", "-i"] + session + [
                        "/usr/bin/dbus-daemon", "--session", "--nofork", "--nopidfile", "--address=\(busAddress)",
                    ], environment: [:], log: root.appendingPathComponent("bus.log").path))
            try waitUntil(seconds: 20, "the session bus listens") { FileManager.default.fileExists(atPath: "\(home.path)/bus") }
            pids.append(
                try spawnLogged(
                    "/usr/sbin/runuser", ["-u", user.name, "--", "/usr/bin/env", "-i"] + session + ["/usr/bin/xfce4-panel"],
                    environment: [:], log: root.appendingPathComponent("panel.log").path))
            try waitUntil(seconds: 60, "the panel's tray is the StatusNotifierWatcher") {
                (try? self.busctl(["list"]))?.contains("org.kde.StatusNotifierWatcher") ?? false
            }
            self.session = session
        }

        private(set) var session: [String] = []

        /// `busctl --user ARGS` as the child, on their session bus; its standard output.
        func busctl(_ arguments: [String]) throws -> String {
            try CurfewRunner.capture(
                "/usr/bin/env", ["DBUS_SESSION_BUS_ADDRESS=\(busAddress)", "/usr/bin/busctl", "--user"] + arguments, asUser: user.name)
        }

        /// Starts a program in the session as the child.
        func start(_ path: String, _ arguments: [String], log: String) throws -> Int32 {
            let pid = try spawnLogged(
                "/usr/sbin/runuser", ["-u", user.name, "--", "/usr/bin/env", "-i"] + session + [path] + arguments, environment: [:], log: log)
            pids.append(pid)
            return pid
        }

        /// The screen as a PNG (ImageMagick's `import`), and how many of its pixels have `colour` (#RRGGBB)
        /// within the panel (the top 32 rows).
        func screenshot(_ path: String, counting colour: String) throws -> Int {
            _ = try CurfewRunner.runTool("/usr/bin/import", ["-display", display, "-window", "root", path])
            let text = try CurfewRunner.capture("/usr/bin/convert", [path, "-crop", "640x32+0+0", "+repage", "txt:-"])
            return text.split(separator: "\n").filter { $0.uppercased().contains(colour.uppercased()) }.count
        }

        func stop() {
            for pid in pids.reversed() {
                kill(pid, SIGKILL)
                _ = waitForExit(pid)
            }
            // What the panel started (its plugin wrapper, xfconfd, at-spi) belongs to the child.
            _ = try? CurfewRunner.runTool("/usr/bin/pkill", ["-KILL", "-u", user.name])
        }
    }

    func property(_ desktop: Desktop, _ service: String, _ name: String) throws -> String {
        try desktop.busctl(["get-property", service, "/StatusNotifierItem", "org.kde.StatusNotifierItem", name])
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Local clock time `minutes` from now in `zone` (HH:MM), and the next whole minute's.
    static func clock(_ instant: Date, zone: String) -> String {
        let local = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: zone == "Etc/UTC" ? "UTC" : zone)!, from: instant)
        return String(format: "%02d:%02d", local.hour!, local.minute!)
    }

    @Test func theTrayShowsTheItemThatFollowsTheAgentAndAsksForMoreTime() throws {
        let (runner, account, _, _) = try base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        // Not within the hour's last minutes: the bedtime below stays within the local hour 6.
        while Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: Date()).minute! >= 55 {
            usleep(5_000_000)
        }
        let (zone, _, _) = ChildViewTests.morningZone()
        let user = account.name
        // Bedtime starts at the next whole minute but one (60 to 120 s from now), until 05:00.
        let bedtime = Self.clock(Date().addingTimeInterval(120), zone: zone)
        try runner.ok(["timezone", user, zone])
        try runner.ok(["bedtime", user, "\(bedtime)-05:00"])
        // Monitor only: the agent must not end the child's desktop at bedtime (nothing to log out here).
        try runner.ok(["lockout", user, "none"])
        let agent = try AgentProcess(runner)
        defer { agent.killHard() }
        chmod(runner.root.appendingPathComponent("run").path, 0o755)
        let desktop = try Desktop(root: runner.root, user: account)
        defer { desktop.stop() }

        let green = "#2EA043"
        let red = "#D02020"
        let orange = "#F09000"
        let without = try desktop.screenshot(runner.root.appendingPathComponent("without.png").path, counting: green)
        #expect(without == 0)

        let indicatorLog = runner.root.appendingPathComponent("indicator.log").path
        let binary = CurfewRunner.binDirectory.appendingPathComponent("curfew-indicator").path
        let indicator = try desktop.start(binary, ["--socket", agent.socketPath], log: indicatorLog)
        // runuser forks: the indicator's pid is not `indicator`; its name is the one registered.
        _ = indicator
        var registered = ""
        try waitUntil(seconds: 30, "the panel's watcher has the item") {
            registered = (try? desktop.busctl([
                "get-property", "org.kde.StatusNotifierWatcher", "/StatusNotifierWatcher", "org.kde.StatusNotifierWatcher",
                "RegisteredStatusNotifierItems",
            ])) ?? ""
            return registered.contains("org.kde.StatusNotifierItem-")
        }
        let name = try #require(registered.split(separator: "\"").first { $0.hasPrefix("org.kde.StatusNotifierItem-") })
            .split(separator: "/").first.map(String.init) ?? ""
        #expect(registered.hasPrefix("as 1 \"\(name)"), "\(registered)")

        // Before bedtime, with at most two minutes left: the last warning's face, needing attention.
        var title = ""
        try waitUntil(seconds: 20, "the title names tonight's bedtime") {
            title = (try? property(desktop, name, "Title")) ?? ""
            return title.hasSuffix(" left today \\302\\267 bedtime at \(bedtime)\"")
        }
        #expect(title.hasPrefix("s \"Curfew: "), "\(title)")
        #expect(try property(desktop, name, "IconName") == "s \"curfew-warning\"")
        #expect(try property(desktop, name, "Status") == "s \"NeedsAttention\"")
        #expect(try property(desktop, name, "Category") == "s \"SystemServices\"")
        let tooltip = try property(desktop, name, "ToolTip")
        #expect(tooltip.hasPrefix("(sa(iiay)ss) \"curfew-warning\" 1 24 24 2304 "), "\(tooltip.prefix(80))")
        #expect(tooltip.contains(" left today \\302\\267 bedtime at \(bedtime)\" \"Used "), "\(tooltip.suffix(200))")
        #expect(tooltip.hasSuffix(" of 8 h today\\nToday: bedtime 00:00-05:00, bedtime \(bedtime)-24:00\""), "\(tooltip.suffix(200))")
        // The panel draws it: the face's colour where there was none.
        let warning = runner.root.appendingPathComponent("with.png").path
        var drawn = 0
        try waitUntil(seconds: 20, "the panel draws the item") {
            drawn = (try? desktop.screenshot(warning, counting: orange)) ?? 0
            return drawn > 50
        }
        try? FileManager.default.removeItem(atPath: CurfewRunner.repositoryRoot.appendingPathComponent(".build/indicator-panel.png").path)
        try? FileManager.default.copyItem(
            atPath: warning, toPath: CurfewRunner.repositoryRoot.appendingPathComponent(".build/indicator-panel.png").path)
        print("indicator: \(drawn) pixels of the item drawn in the panel; \(without) before (.build/indicator-panel.png)")

        /// Waits for the item's title to pass `accepts`; on timeout says what the title last was, how
        /// long each step took, and the end of the agent's log (a loaded machine is slow, not silent).
        var lastStep = Date()
        func waitForTitle(_ what: String, seconds: Double, _ accepts: (String) -> Bool) throws {
            var last = ""
            do {
                try waitUntil(seconds: seconds, what) {
                    last = (try? property(desktop, name, "Title")) ?? "(no answer)"
                    return accepts(last)
                }
            } catch {
                throw TestFailure("\(error); the title was \(last)\n\(agent.log.suffix(3000))")
            }
            print("indicator: \(what) after \(String(format: "%.1f", Date().timeIntervalSince(lastStep))) s")
            lastStep = Date()
        }

        // Bedtime comes: blocked, and it says until when.
        try waitForTitle("bedtime reaches the item", seconds: 200) {
            $0 == "s \"Curfew: it is bedtime \\302\\267 allowed again tomorrow at 05:00\""
        }
        #expect(try property(desktop, name, "IconName") == "s \"curfew-blocked\"")
        #expect(try property(desktop, name, "Status") == "s \"NeedsAttention\"")
        try waitUntil(seconds: 20, "the panel draws the blocked face") {
            ((try? desktop.screenshot(runner.root.appendingPathComponent("blocked.png").path, counting: red)) ?? 0) > 50
        }
        try? FileManager.default.removeItem(atPath: CurfewRunner.repositoryRoot.appendingPathComponent(".build/indicator-panel-blocked.png").path)
        try? FileManager.default.copyItem(
            atPath: runner.root.appendingPathComponent("blocked.png").path,
            toPath: CurfewRunner.repositoryRoot.appendingPathComponent(".build/indicator-panel-blocked.png").path)

        // The menu: today's figures, the three asks; "Ask for 30 min" files a request with its cause.
        let layout = try desktop.busctl(["call", name, "/MenuBar", "com.canonical.dbusmenu", "GetLayout", "iias", "0", "10", "0"])
        for label in ["Ask for 15 min", "Ask for 30 min", "Ask for 1 hour", "Today: bedtime 00:00-05:00, bedtime \(bedtime)-24:00"] {
            #expect(layout.contains("\"\(label)\""), "\(label) in \(layout)")
        }
        _ = try desktop.busctl(["call", name, "/MenuBar", "com.canonical.dbusmenu", "Event", "isvu", "102", "clicked", "s", "", "0"])
        try waitUntil(seconds: 10, "the request is recorded") { (try? runner.ok(["requests"]).stdout.contains("30m")) ?? false }
        let requests = try runner.ok(["requests", "--json"]).stdout
        #expect(requests.contains("\"reason\": \"asked from the panel: it is bedtime · allowed again tomorrow at 05:00\""), "\(requests)")
        #expect(requests.contains("\"minutes\": 30"))
        try waitUntil(seconds: 10, "the menu says it asked") {
            ((try? desktop.busctl(["call", name, "/MenuBar", "com.canonical.dbusmenu", "GetLayout", "iias", "0", "10", "0"])) ?? "")
                .contains("Asked for 30 min (request 1); a parent will answer")
        }

        // The parent approves with a later bedtime: the item is back to plenty within a second or so.
        let granted = Date()
        // At bedtime, approving moves tonight's bedtime to 30 minutes from now.
        let approved = try runner.ok(["approve", "1"]).stdout
        // `... granted kid until HH:MM (bedtime moved) (record ...)`: the new bedtime, whatever minute the grant arrives in.
        let until = try #require(approved.components(separatedBy: " until ").last?.prefix(5), "\(approved)")
        lastStep = granted
        try waitForTitle("the grant reaches the item", seconds: 60) { title in
            // Bedtime moved to the approval's next whole minute plus 30: 30 to 31 minutes away, which the
            // item rounds up (31 unless the approval came on the minute), 29 or 28 once minutes pass.
            ["31", "30", "29", "28"].contains { title == "s \"Curfew: \($0) min left today \\302\\267 bedtime at \(until)\"" }
        }
        print("indicator: grant to new title on the bus in \(String(format: "%.2f", Date().timeIntervalSince(granted))) s (busctl polling included)")
        #expect(try property(desktop, name, "IconName") == "s \"curfew-plenty\"")
        #expect(try property(desktop, name, "Status") == "s \"Active\"")
        #expect(agent.stop() == 0, "\(agent.log)")
        #expect(((try? String(contentsOfFile: indicatorLog, encoding: .utf8)) ?? "") == "")
    }

    /// An account Curfew does not manage, and root: the indicator exits 0 at once, saying nothing.
    @Test func exitsQuietlyForAccountsCurfewDoesNotManage() throws {
        let (runner, _, _, _) = try base.setUp(account: Self.account)
        defer { runner.cleanUp() }
        let stranger = try TestAccount.ensure("curfewstranger")
        let agent = try AgentProcess(runner)
        defer { agent.killHard() }
        let binary = CurfewRunner.binDirectory.appendingPathComponent("curfew-indicator").path
        for user in [stranger.name, "root"] {
            let log = runner.root.appendingPathComponent("indicator-\(user).log").path
            let pid = try spawnLogged(
                "/usr/sbin/runuser", ["-u", user, "--", binary, "--socket", agent.socketPath], environment: ["PATH": "/usr/bin:/bin"], log: log)
            #expect(waitForExit(pid) == 0, "\(user)")
            #expect(((try? String(contentsOfFile: log, encoding: .utf8)) ?? "") == "", "\(user)")
        }
        #expect(agent.stop() == 0, "\(agent.log)")
    }
}
