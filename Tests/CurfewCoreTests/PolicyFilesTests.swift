import CurfewCore
import Foundation
import Testing

/// The files shipped in `policies/`: every one must load, and mean what its name promises.
@Suite struct PolicyFilesTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // CurfewCoreTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()
    static let policies = root.appendingPathComponent("policies")

    static func jsonFiles(in directory: URL) throws -> [(name: String, bytes: [UInt8])] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(".json") }.sorted()
        return try names.map { name in
            (name, Array(try Data(contentsOf: directory.appendingPathComponent(name))))
        }
    }

    static func catalog() throws -> AppCatalog {
        try AppCatalog.decode(files: try jsonFiles(in: policies.appendingPathComponent("apps")))
    }

    static func policy(_ path: String) throws -> Policy {
        let bytes = Array(try Data(contentsOf: policies.appendingPathComponent(path)))
        return try Policy.decode(try JSONValue.parse(bytes), userOverride: "kid")
    }

    static func window(_ text: String) throws -> BedtimeWindow? { try BedtimeWindow.parse(text) }

    // MARK: App catalog

    @Test func catalogLoads() throws {
        let files = try Self.jsonFiles(in: Self.policies.appendingPathComponent("apps"))
        let catalog = try Self.catalog()
        #expect(catalog.definitions.count >= 24)
        let apps = files.filter { $0.name != "interpreters.json" }
        #expect(catalog.definitions.count == apps.count)
        #expect(catalog.definitions.map { "\($0.name).json" } == apps.map(\.name))
        // The interpreters and loaders are data of the catalog.
        #expect(catalog.interpreters.isInterpreter("/usr/bin/python3.11"))
        #expect(catalog.interpreters.isInterpreter("/usr/bin/dash"))
        #expect(catalog.interpreters.isLoader("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"))
        #expect(!catalog.interpreters.isInterpreter("/usr/games/supertuxkart"))
    }

    @Test func everyCategoryButOtherIsRepresented() throws {
        let catalog = try Self.catalog()
        for category in AppCategory.allCases where category != .other {
            #expect(catalog.definitions.contains { $0.category == category }, "no app of category \(category)")
        }
        let expected: [String: AppCategory] = [
            "steam": .launcher, "prismlauncher": .launcher, "lutris": .launcher, "heroic": .launcher,
            "minecraft": .game, "supertuxkart": .game, "0ad": .game, "luanti": .game, "wesnoth": .game, "roblox": .game,
            "firefox": .browser, "chromium": .browser, "google-chrome": .browser, "brave": .browser,
            "discord": .chat, "signal-desktop": .chat, "telegram-desktop": .chat, "element": .chat,
            "vlc": .video, "mpv": .video, "freetube": .video,
            "gcompris": .education, "tuxmath": .education, "kalzium": .education, "stellarium": .education,
            "libreoffice": .education, "kturtle": .education, "marble": .education, "scratch": .education,
            "krita": .creativity, "tuxpaint": .creativity, "inkscape": .creativity, "gimp": .creativity,
        ]
        for (name, category) in expected {
            #expect(catalog.definition(named: name)?.category == category, "\(name)")
        }
    }

    @Test func catalogFilesRoundTrip() throws {
        for definition in try Self.catalog().definitions {
            #expect(try AppDefinition.decode(definition.json) == definition)
        }
    }

    /// Exact matchers are looked up first-wins; one claimed by two apps would silently favour one.
    @Test func noExactMatcherBelongsToTwoApps() throws {
        var owners: [String: String] = [:]
        for definition in try Self.catalog().definitions {
            let keys =
                definition.flatpakIds.map { "flatpak \($0)" } + definition.snapNames.map { "snap \($0)" }
                + definition.executableNames.map { "executable \($0)" }
            for key in keys {
                if let other = owners[key] {
                    Issue.record("\(key) belongs to both \(other) and \(definition.name)")
                }
                owners[key] = definition.name
            }
        }
    }

    struct ProcessCase: Sendable, CustomTestStringConvertible {
        let label: String
        let facts: ProcessFacts
        let app: String
        init(_ label: String, _ facts: ProcessFacts, _ app: String) {
            self.label = label
            self.facts = facts
            self.app = app
        }
        var testDescription: String { label }
    }

    /// Processes as they look on Debian and Ubuntu machines.
    static let processes: [ProcessCase] = [
        ProcessCase("Debian Firefox ESR", ProcessFacts(executablePath: "/usr/lib/firefox-esr/firefox-esr"), "firefox"),
        ProcessCase(
            "Firefox content process",
            ProcessFacts(
                executablePath: "/usr/lib/firefox/firefox", commandLine: ["/usr/lib/firefox/firefox", "-contentproc"]),
            "firefox"),
        ProcessCase(
            "Ubuntu Firefox snap",
            ProcessFacts(
                executablePath: "/snap/firefox/4173/usr/lib/firefox/firefox", snapName: "firefox",
                systemdUnit: "snap.firefox.firefox-0b1c5e2a.scope"),
            "firefox"),
        ProcessCase(
            "Firefox flatpak", ProcessFacts(executablePath: "/app/lib/firefox/firefox", flatpakId: "org.mozilla.firefox"),
            "firefox"),
        ProcessCase(
            "Chromium snap (its binary is called chrome)",
            ProcessFacts(executablePath: "/snap/chromium/2890/usr/lib/chromium-browser/chrome"), "chromium"),
        ProcessCase("Debian Chromium", ProcessFacts(executablePath: "/usr/lib/chromium/chromium"), "chromium"),
        ProcessCase("Google Chrome", ProcessFacts(executablePath: "/opt/google/chrome/chrome"), "google-chrome"),
        ProcessCase("Brave", ProcessFacts(executablePath: "/opt/brave.com/brave/brave"), "brave"),
        ProcessCase(
            "Steam client", ProcessFacts(executablePath: "/home/kid/.local/share/Steam/ubuntu12_32/steam"), "steam"),
        ProcessCase(
            "native Steam game",
            ProcessFacts(executablePath: "/home/kid/.local/share/Steam/steamapps/common/Portal 2/portal2_linux"),
            "steam"),
        ProcessCase(
            "Proton game",
            ProcessFacts(
                executablePath: "/home/kid/.local/share/Steam/steamapps/common/Proton 9.0 (Beta)/files/bin/wine64-preloader",
                commandLine: [#"Z:\home\kid\.local\share\Steam\steamapps\common\Terraria\Terraria.exe"#]),
            "steam"),
        ProcessCase(
            "game started from Steam on GNOME",
            ProcessFacts(executablePath: "/usr/games/supertuxkart", systemdUnit: "app-gnome-steam-4242.scope"), "steam"),
        ProcessCase(
            "Steam flatpak", ProcessFacts(executablePath: "/app/bin/steam", flatpakId: "com.valvesoftware.Steam"), "steam"),
        ProcessCase(
            "java -jar from ~/.minecraft",
            ProcessFacts(
                executablePath: "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
                commandLine: ["java", "-jar", "/home/kid/.minecraft/versions/1.20.4/1.20.4.jar"]),
            "minecraft"),
        ProcessCase(
            "Minecraft from the official launcher",
            ProcessFacts(
                executablePath: "/home/kid/.minecraft/runtime/java-runtime-gamma/linux/java-runtime-gamma/bin/java",
                commandLine: ["java", "-Xmx2G", "-cp", "client.jar", "net.minecraft.client.main.Main"]),
            "minecraft"),
        ProcessCase(
            "Minecraft with the system Java",
            ProcessFacts(
                executablePath: "/usr/lib/jvm/java-21-openjdk-amd64/bin/java",
                commandLine: ["/usr/lib/jvm/java-21-openjdk-amd64/bin/java", "-cp", "a.jar:b.jar", "net.minecraft.client.main.Main"]),
            "minecraft"),
        ProcessCase(
            "official Minecraft launcher",
            ProcessFacts(executablePath: "/opt/minecraft-launcher/minecraft-launcher"), "minecraft"),
        ProcessCase(
            "Minecraft from Prism Launcher",
            ProcessFacts(
                executablePath: "/usr/lib/jvm/java-21-openjdk-amd64/bin/java",
                commandLine: ["/usr/lib/jvm/java-21-openjdk-amd64/bin/java", "-Xmx4G", "-cp", "NewLaunch.jar", "org.prismlauncher.EntryPoint"]),
            "prismlauncher"),
        ProcessCase(
            "Lutris",
            ProcessFacts(executablePath: "/usr/bin/python3.11", commandLine: ["/usr/bin/python3", "/usr/games/lutris"]),
            "lutris"),
        ProcessCase(
            "Roblox through Sober", ProcessFacts(executablePath: "/app/bin/sober", flatpakId: "org.vinegarhq.Sober"),
            "roblox"),
        ProcessCase(
            "Roblox through wine",
            ProcessFacts(
                executablePath: "/usr/lib/wine/wine64-preloader",
                commandLine: [#"C:\users\kid\AppData\Local\Roblox\Versions\version-1\RobloxPlayerBeta.exe"#, "--app"]),
            "roblox"),
        ProcessCase("Wesnoth 1.16 on Debian", ProcessFacts(executablePath: "/usr/games/wesnoth-1.16"), "wesnoth"),
        ProcessCase("Luanti on Debian trixie", ProcessFacts(executablePath: "/usr/games/luanti"), "luanti"),
        ProcessCase("Minetest flatpak", ProcessFacts(flatpakId: "net.minetest.Minetest"), "luanti"),
        ProcessCase("0 A.D.", ProcessFacts(executablePath: "/usr/games/pyrogenesis"), "0ad"),
        ProcessCase(
            "LibreOffice", ProcessFacts(executablePath: "/usr/lib/libreoffice/program/soffice.bin"), "libreoffice"),
        ProcessCase(
            "LibreOffice from TDF",
            ProcessFacts(executablePath: "/opt/libreoffice24.8/program/soffice.bin"), "libreoffice"),
        ProcessCase("Discord", ProcessFacts(executablePath: "/usr/share/discord/Discord"), "discord"),
        ProcessCase("Signal", ProcessFacts(executablePath: "/opt/Signal/signal-desktop"), "signal-desktop"),
        ProcessCase("Telegram tarball", ProcessFacts(executablePath: "/home/kid/Telegram/Telegram"), "telegram-desktop"),
        ProcessCase("Element", ProcessFacts(executablePath: "/opt/Element/element-desktop"), "element"),
        ProcessCase("GCompris", ProcessFacts(executablePath: "/usr/games/gcompris-qt"), "gcompris"),
        ProcessCase("GIMP", ProcessFacts(executablePath: "/usr/bin/gimp-2.10"), "gimp"),
        ProcessCase("GIMP plug-in", ProcessFacts(executablePath: "/usr/lib/gimp/2.0/plug-ins/file-png/file-png"), "gimp"),
        ProcessCase("Krita AppImage", ProcessFacts(executablePath: "/tmp/.mount_krita-a1b2c3/usr/bin/krita"), "krita"),
        ProcessCase("a shell", ProcessFacts(executablePath: "/usr/bin/bash", commandLine: ["bash"]), "bash"),
        ProcessCase(
            "a terminal's shell is not the app that started the terminal",
            ProcessFacts(executablePath: "/usr/bin/bash", systemdUnit: "vte-spawn-6f1c.scope"), "bash"),
    ]

    @Test(arguments: processes)
    func shippedCatalogMatches(_ process: ProcessCase) throws {
        #expect(try Self.catalog().match(process.facts) == process.app)
    }

    // MARK: Policies

    @Test func everyPolicyFileDecodes() throws {
        var count = 0
        for directory in ["", "examples"] {
            for file in try Self.jsonFiles(in: Self.policies.appendingPathComponent(directory)) {
                let value = try JSONValue.parse(file.bytes)
                guard case .object(let object) = value else {
                    Issue.record("\(directory)/\(file.name) is not an object")
                    continue
                }
                #expect(object["user"] == nil, "\(file.name) is a template and must not name a user")
                #expect(object["timezone"] == .null, "\(file.name) must use the computer's time zone")
                let policy = try Policy.decode(value, userOverride: "kid")
                #expect(try Policy.decode(policy.json) == policy)
                count += 1
            }
        }
        #expect(count >= 3)
    }

    @Test func defaultPolicyIsTheDefaults() throws {
        #expect(try Self.policy("default.json") == Policy.defaults(for: "kid"))
    }

    @Test func schoolNights() throws {
        let policy = try Self.policy("examples/school-nights.json")
        for day in [Weekday.mon, .tue, .wed, .thu] {
            #expect(policy.limit(on: day) == .minutes(90))
            #expect(policy.bedtime(startingOn: day) == (try Self.window("20:30-07:00")))
        }
        #expect(policy.limit(on: .fri) == .minutes(180))
        #expect(policy.limit(on: .sat) == .minutes(180))
        #expect(policy.limit(on: .sun) == .minutes(120))
        #expect(policy.bedtime(startingOn: .fri) == (try Self.window("22:00-08:30")))
        #expect(policy.bedtime(startingOn: .sat) == (try Self.window("22:00-08:30")))
        #expect(policy.bedtime(startingOn: .sun) == (try Self.window("20:30-07:00")))
        #expect(policy.rule(for: "steam") == .limit(minutes: 60))
        let catalog = try Self.catalog()
        let allowed = policy.apps.filter { $0.rule == .allow }.map(\.app)
        #expect(allowed.contains("gcompris"))
        for app in allowed {
            #expect(catalog.definition(named: app)?.category == .education, "\(app)")
        }
        #expect(policy.lockout == .logout)
        #expect(policy.warnMinutes == [15, 5, 1])
    }

    @Test func teenager() throws {
        let policy = try Self.policy("examples/teenager.json")
        #expect(policy.dailyLimit == .minutes(240))
        #expect(policy.weekdayLimits.isEmpty)
        #expect(policy.bedtime(startingOn: .mon) == (try Self.window("23:00-06:30")))
        #expect(policy.bedtime(startingOn: .sun) == (try Self.window("23:00-06:30")))
        for day in [Weekday.fri, .sat] {
            let weekend = try #require(policy.bedtime(startingOn: day))
            // Later, and still the evening of the day it is keyed by (not after midnight).
            #expect(weekend.start > ClockTime(hour: 23, minute: 0))
            #expect(weekend.crossesMidnight)
        }
        #expect(policy.rule(for: "discord") == .limit(minutes: 90))
        #expect(policy.rule(for: "roblox") == .block)
        #expect(policy.rule(for: "libreoffice") == .allow)
        #expect(policy.lockout == .lock)
        #expect(policy.warnMinutes == [30, 10, 5, 1])
        #expect(policy.timezone == nil)
    }

    /// The offline-nights example: the internet off at night, drawing offline goes on; logout at the limit.
    @Test func offlineNights() throws {
        let policy = try Self.policy("examples/offline-nights.json")
        #expect(policy.lockout == .logout && policy.bedtimeLockout == .network)
        #expect(policy.lockout(in: .bedtime) == .network && policy.lockout(in: .downtime) == .network)
        #expect(policy.lockout(in: .limitReached) == .logout && policy.lockout(in: .breakTime) == .logout)
        #expect(policy.rule(for: "krita") == .allow)
    }

    @Test func exampleAppsExistInTheCatalog() throws {
        let catalog = try Self.catalog()
        let examples = try Self.jsonFiles(in: Self.policies.appendingPathComponent("examples")).map { "examples/\($0.name)" }
        #expect(examples.contains("examples/school-nights.json") && examples.contains("examples/teenager.json"))
        for path in ["default.json"] + examples {
            for rule in try Self.policy(path).apps {
                #expect(catalog.definition(named: rule.app) != nil, "\(path) names \(rule.app), which is not in the catalog")
            }
        }
    }
}
