import CurfewCore
import Testing

@Suite struct AppCatalogTests {
    // MARK: Glob

    struct GlobCase: Sendable, CustomTestStringConvertible {
        let pattern: String
        let text: String
        let matches: Bool
        init(_ pattern: String, _ text: String, _ matches: Bool) {
            self.pattern = pattern
            self.text = text
            self.matches = matches
        }
        var testDescription: String { "\(pattern) ~ \(text) → \(matches)" }
    }

    static let globCases: [GlobCase] = [
        GlobCase("", "", true),
        GlobCase("", "a", false),
        GlobCase("*", "", true),
        GlobCase("*", "anything at/all", true),
        GlobCase("steam", "steam", true),
        GlobCase("steam", "Steam", false),
        GlobCase("steam", "steamwebhelper", false),
        GlobCase("/usr/games/supertuxkart", "/usr/games/supertuxkart", true),
        // `*` crosses `/`, unlike a shell glob.
        GlobCase("/opt/*/steam", "/opt/valve/steam", true),
        GlobCase("/opt/*/steam", "/opt/a/b/steam", true),
        GlobCase("/opt/*/steam", "/opt/steam", false),
        GlobCase("/opt/*/steam", "/opt/valve/steam2", false),
        GlobCase("*/steamapps/common/*", "/home/kid/.local/share/Steam/steamapps/common/Portal 2/portal2_linux", true),
        GlobCase("app-steam-*.scope", "app-steam-4242.scope", true),
        GlobCase("app-steam-*.scope", "app-steam-4242.service", false),
        GlobCase("app-steam-*.scope", "app-gnome-steam-4242.scope", false),
        // Command lines: spaces are ordinary characters.
        GlobCase("*java* -jar *minecraft*", "/usr/bin/java -Xmx2G -jar /home/kid/.minecraft/launcher.jar", true),
        GlobCase("*java* -jar *minecraft*", "/usr/bin/java -cp minecraft.jar Main", false),
        GlobCase("python3 -m *", "python3 -m http.server", true),
        // Several stars that must backtrack.
        GlobCase("*a*b*c", "xxaxxbxxbxxc", true),
        GlobCase("*a*b*c", "xxaxxbxxbxxcx", false),
        GlobCase("a*a*a*a*b", String(repeating: "a", count: 60), false),
        GlobCase("**", "x", true),
        // `?`
        GlobCase("wesnoth-1.1?", "wesnoth-1.18", true),
        GlobCase("wesnoth-1.1?", "wesnoth-1.1", false),
        GlobCase("?", "é", true),
        GlobCase("??", "é", false),
        // Classes.
        GlobCase("gimp-[23].*", "gimp-2.10", true),
        GlobCase("gimp-[23].*", "gimp-4.0", false),
        GlobCase("python3.[0-9]*", "python3.12", true),
        GlobCase("python3.[0-9]*", "python3.x", false),
        GlobCase("[!a-z]*", "Discord", true),
        GlobCase("[!a-z]*", "discord", false),
        GlobCase("[^a-z]*", "Discord", true),
        GlobCase("[]]", "]", true),
        GlobCase("[!]]", "]", false),
        GlobCase("[a-]", "-", true),
        GlobCase("[*]", "*", true),
        GlobCase("[*]", "x", false),
        GlobCase("[?]", "?", true),
        GlobCase("[[]x", "[x", true),
        // An unclosed `[` is an ordinary character.
        GlobCase("/opt/[steam", "/opt/[steam", true),
        GlobCase("/opt/[steam", "/opt/s", false),
        // No escape character: backslashes are literal (wine command lines).
        GlobCase(#"*\steamapps\common\*"#, #"Z:\home\kid\steamapps\common\Game\game.exe"#, true),
        GlobCase(#"a\*"#, #"a\bc"#, true),
        GlobCase(#"a\*"#, "a*", false),
    ]

    @Test(arguments: globCases)
    func glob(_ globCase: GlobCase) {
        #expect(globMatch(globCase.pattern, globCase.text) == globCase.matches)
    }

    // MARK: Matching

    static let catalog = AppCatalog([
        AppDefinition(
            name: "steam", displayName: "Steam", category: .launcher,
            executablePaths: ["*/ubuntu12_32/steam", "*/steamapps/common/*"], executableNames: ["steam"],
            flatpakIds: ["com.valvesoftware.Steam"], snapNames: ["steam"], systemdUnits: ["app-steam-*.scope"]),
        AppDefinition(
            name: "supertuxkart", displayName: "SuperTuxKart", category: .game,
            executablePaths: ["/usr/games/supertuxkart"], executableNames: ["supertuxkart"],
            flatpakIds: ["net.supertuxkart.SuperTuxKart"]),
        AppDefinition(
            name: "minecraft", displayName: "Minecraft", category: .game,
            commandLinePatterns: ["*java* -jar *.minecraft/*"]),
        AppDefinition(
            name: "firefox", displayName: "Firefox", category: .browser,
            executablePaths: ["/usr/lib/firefox-esr/*"], executableNames: ["firefox", "firefox-esr"],
            flatpakIds: ["org.mozilla.firefox"], snapNames: ["firefox"]),
        AppDefinition(
            name: "lutris", displayName: "Lutris", category: .launcher,
            commandLinePatterns: ["*python3* /usr/games/lutris*"], systemdUnits: ["app-net.lutris.Lutris-*.scope"]),
    ])

    struct MatchCase: Sendable, CustomTestStringConvertible {
        let label: String
        let facts: ProcessFacts
        let known: [String: String]
        let app: String
        init(_ label: String, _ facts: ProcessFacts, known: [String: String] = [:], _ app: String) {
            self.label = label
            self.facts = facts
            self.known = known
            self.app = app
        }
        var testDescription: String { label }
    }

    static let matchCases: [MatchCase] = [
        MatchCase("exact executable path", ProcessFacts(executablePath: "/usr/games/supertuxkart"), "supertuxkart"),
        MatchCase("executable basename", ProcessFacts(executablePath: "/home/kid/bin/supertuxkart"), "supertuxkart"),
        MatchCase("path glob", ProcessFacts(executablePath: "/usr/lib/firefox-esr/glxtest"), "firefox"),
        MatchCase(
            "flatpak id wins over the executable name",
            ProcessFacts(executablePath: "/app/bin/supertuxkart", flatpakId: "org.mozilla.firefox"), "firefox"),
        MatchCase(
            "snap name wins over the systemd unit",
            ProcessFacts(executablePath: "/usr/games/supertuxkart", snapName: "firefox", systemdUnit: "app-steam-1.scope"),
            "firefox"),
        MatchCase(
            "flatpak id wins over the snap name",
            ProcessFacts(flatpakId: "net.supertuxkart.SuperTuxKart", snapName: "firefox"), "supertuxkart"),
        MatchCase(
            "a game in the launcher's unit counts as the launcher",
            ProcessFacts(executablePath: "/usr/games/supertuxkart", systemdUnit: "app-steam-4242.scope"), "steam"),
        MatchCase(
            "an unknown unit falls through to the executable",
            ProcessFacts(executablePath: "/usr/games/supertuxkart", systemdUnit: "app-gnome-org.gnome.Terminal-7.scope"),
            "supertuxkart"),
        MatchCase(
            "path glob wins over the basename",
            ProcessFacts(executablePath: "/home/kid/.local/share/Steam/steamapps/common/STK/supertuxkart"), "steam"),
        MatchCase(
            "basename wins over the command line",
            ProcessFacts(executablePath: "/usr/bin/firefox", commandLine: ["java", "-jar", "/home/kid/.minecraft/x.jar"]),
            "firefox"),
        MatchCase(
            "java -jar minecraft",
            ProcessFacts(
                executablePath: "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
                commandLine: ["java", "-Xmx2G", "-jar", "/home/kid/.minecraft/versions/1.20.4/1.20.4.jar"]),
            "minecraft"),
        MatchCase(
            "python script",
            ProcessFacts(executablePath: "/usr/bin/python3.11", commandLine: ["/usr/bin/python3", "/usr/games/lutris"]),
            "lutris"),
        MatchCase(
            "a renamed copy is matched through its identity",
            ProcessFacts(executablePath: "/home/kid/homework", fileIdentity: "sha256:abc"),
            known: ["sha256:abc": "supertuxkart"], "supertuxkart"),
        MatchCase(
            "an identity and a direct match with the same rule: the direct match",
            ProcessFacts(executablePath: "/usr/bin/firefox", flatpakId: "org.mozilla.firefox", fileIdentity: "sha256:abc"),
            known: ["sha256:abc": "supertuxkart"], "firefox"),
        MatchCase(
            "a modified copy is matched through its build-id",
            ProcessFacts(executablePath: "/dev/shm/x", fileIdentity: "sha256:other", buildID: "build-id:0011223344556677"),
            known: ["build-id:0011223344556677": "supertuxkart"], "supertuxkart"),
        MatchCase(
            "an unknown identity falls through",
            ProcessFacts(executablePath: "/home/kid/homework", fileIdentity: "sha256:def"),
            known: ["sha256:abc": "supertuxkart"], "homework"),
        MatchCase(
            "an upgraded binary that was replaced while running",
            ProcessFacts(executablePath: "/usr/lib/firefox-esr/firefox-esr (deleted)"), "firefox"),
        MatchCase("unmatched: the executable's basename", ProcessFacts(executablePath: "/usr/bin/bash"), "bash"),
        MatchCase(
            "unmatched: the executable wins over the command line",
            ProcessFacts(executablePath: "/usr/bin/python3.12", commandLine: ["/usr/bin/python3", "game.py"]),
            "python3.12"),
        MatchCase(
            "unmatched without executable: the first argument's basename",
            ProcessFacts(commandLine: ["/usr/local/bin/mygame", "--fullscreen"]), "mygame"),
        MatchCase("unmatched, nothing known", ProcessFacts(), "unknown"),
        MatchCase("unmatched, unknown flatpak", ProcessFacts(flatpakId: "org.example.Game"), "unknown"),
    ]

    @Test(arguments: matchCases)
    func match(_ matchCase: MatchCase) {
        #expect(Self.catalog.match(matchCase.facts, knownIdentities: matchCase.known) == matchCase.app)
    }

    @Test func firstDefinitionWinsWithinOneKind() {
        let catalog = AppCatalog([
            AppDefinition(name: "a", displayName: "A", category: .other, commandLinePatterns: ["*game*"]),
            AppDefinition(name: "b", displayName: "B", category: .other, commandLinePatterns: ["*game*"]),
        ])
        #expect(catalog.match(ProcessFacts(commandLine: ["game"])) == "a")
    }

    @Test func definitionNamed() {
        #expect(Self.catalog.definition(named: "minecraft")?.category == .game)
        #expect(Self.catalog.definition(named: "roblox") == nil)
    }

    // MARK: JSON

    @Test func decodesAndWritesBack() throws {
        let text = """
            {"name": "steam", "displayName": "Steam", "category": "launcher", "match": {
              "executablePaths": ["*/ubuntu12_32/steam"], "executableNames": ["steam"],
              "commandLine": ["*/Steam/steam.sh*"], "flatpak": ["com.valvesoftware.Steam"],
              "snap": ["steam"], "systemdUnits": ["app-steam-*.scope"]}}
            """
        let definition = try AppDefinition.decode(try JSONValue.parse(text))
        #expect(
            definition
                == AppDefinition(
                    name: "steam", displayName: "Steam", category: .launcher,
                    executablePaths: ["*/ubuntu12_32/steam"], executableNames: ["steam"],
                    commandLinePatterns: ["*/Steam/steam.sh*"], flatpakIds: ["com.valvesoftware.Steam"],
                    snapNames: ["steam"], systemdUnits: ["app-steam-*.scope"]))
        #expect(
            definition.json.prettyString == """
                {
                  "name": "steam",
                  "displayName": "Steam",
                  "category": "launcher",
                  "match": {
                    "executablePaths": ["*/ubuntu12_32/steam"],
                    "executableNames": ["steam"],
                    "commandLine": ["*/Steam/steam.sh*"],
                    "flatpak": ["com.valvesoftware.Steam"],
                    "snap": ["steam"],
                    "systemdUnits": ["app-steam-*.scope"]
                  }
                }
                """)
        #expect(try AppDefinition.decode(definition.json) == definition)
    }

    @Test func writingLeavesOutEmptyMatchers() throws {
        let definition = AppDefinition(name: "vlc", displayName: "VLC", category: .video, flatpakIds: ["org.videolan.VLC"])
        #expect(
            definition.json.canonicalString
                == #"{"category":"video","displayName":"VLC","match":{"flatpak":["org.videolan.VLC"]},"name":"vlc"}"#)
        #expect(try AppDefinition.decode(definition.json) == definition)
    }

    @Test func displayNameAndCategoryHaveDefaults() throws {
        let definition = try AppDefinition.decode(
            try JSONValue.parse(#"{"name": "etr", "match": {"executableNames": ["etr"], "snap": []}}"#))
        #expect(definition == AppDefinition(name: "etr", displayName: "etr", category: .other, executableNames: ["etr"]))
    }

    struct DecodeError: Sendable, CustomTestStringConvertible {
        let json: String
        let message: String
        init(_ json: String, _ message: String) {
            self.json = json
            self.message = message
        }
        var testDescription: String { message }
    }

    static let decodeErrors: [DecodeError] = [
        DecodeError(#"["steam"]"#, "an app definition must be a JSON object, got a list"),
        DecodeError(
            #"{"name": "steam", "match": {"snap": ["steam"]}, "icon": "steam.png"}"#,
            #"unknown app catalog field "icon" (known fields: name, displayName, category, match)"#),
        DecodeError(
            #"{"name": "steam", "match": {"snap": ["steam"], "flatpakId": ["x"]}}"#,
            #"unknown app catalog field "match.flatpakId" (known fields: executablePaths, executableNames, commandLine, flatpak, snap, systemdUnits)"#
        ),
        DecodeError(#"{"match": {"snap": ["steam"]}}"#, #"app catalog field "name" is missing"#),
        DecodeError(#"{"name": 7, "match": {"snap": ["steam"]}}"#, #"app catalog field "name" must be a string, got a number"#),
        DecodeError(
            #"{"name": "Steam", "match": {"snap": ["steam"]}}"#,
            #"app name must be 1 to 64 lowercase letters, digits, '-', '_', '.' or '+', starting with a letter or digit, got "Steam""#
        ),
        DecodeError(
            #"{"name": "steam", "displayName": null, "match": {"snap": ["steam"]}}"#,
            #"app catalog field "displayName" must be a string, got null"#),
        DecodeError(
            #"{"name": "steam", "displayName": " ", "match": {"snap": ["steam"]}}"#,
            #"app catalog field "displayName" must not be empty, got " ""#),
        DecodeError(
            #"{"name": "steam", "category": ["game"], "match": {"snap": ["steam"]}}"#,
            #"app catalog field "category" must be a string, got a list"#),
        DecodeError(
            #"{"name": "steam", "category": "games", "match": {"snap": ["steam"]}}"#,
            #"app category must be game, launcher, browser, chat, video, education, creativity or other, got "games""#),
        DecodeError(
            #"{"name": "steam"}"#, #"app catalog field "match" is missing: app "steam" needs at least one matcher"#),
        DecodeError(
            #"{"name": "steam", "match": ["steam"]}"#, #"app catalog field "match" must be an object, got a list"#),
        DecodeError(
            #"{"name": "steam", "match": {"flatpak": 3}}"#,
            #"app catalog field "match.flatpak" must be a list of strings, got a number"#),
        DecodeError(
            #"{"name": "steam", "match": {"executableNames": "steam"}}"#,
            #"app catalog field "match.executableNames" must be a list of strings, got a string"#),
        DecodeError(
            #"{"name": "steam", "match": {"snap": ["steam", true]}}"#,
            #"app catalog field "match.snap[1]" must be a string, got a boolean"#),
        DecodeError(
            #"{"name": "steam", "match": {"commandLine": [""]}}"#,
            #"app catalog field "match.commandLine[0]" must not be empty"#),
        DecodeError(
            #"{"name": "steam", "match": {"executablePaths": ["usr/games/steam"]}}"#,
            #"app catalog field "match.executablePaths[0]" must be an absolute path or start with *, got "usr/games/steam""#
        ),
        DecodeError(
            #"{"name": "steam", "match": {"executableNames": ["bin/steam"]}}"#,
            #"app catalog field "match.executableNames[0]" must be a file name without '/', got "bin/steam""#),
        DecodeError(
            #"{"name": "steam", "match": {}}"#,
            #"app "steam" needs at least one matcher in "match" (executablePaths, executableNames, commandLine, flatpak, snap, systemdUnits)"#
        ),
        DecodeError(
            #"{"name": "steam", "match": {"flatpak": [], "snap": []}}"#,
            #"app "steam" needs at least one matcher in "match" (executablePaths, executableNames, commandLine, flatpak, snap, systemdUnits)"#
        ),
    ]

    @Test(arguments: decodeErrors)
    func decodeError(_ decodeError: DecodeError) throws {
        let value = try JSONValue.parse(decodeError.json)
        #expect(throws: PolicyError(decodeError.message)) { try AppDefinition.decode(value) }
    }

    // MARK: Catalog files

    static func file(_ name: String, _ json: String) -> (name: String, bytes: [UInt8]) { (name, Array(json.utf8)) }

    @Test func catalogFromFilesIsOrderedByFileName() throws {
        let catalog = try AppCatalog.decode(files: [
            Self.file("b.json", #"{"name": "b", "match": {"commandLine": ["*game*"]}}"#),
            Self.file("a.json", #"{"name": "a", "match": {"commandLine": ["*game*"]}}"#),
        ])
        #expect(catalog.definitions.map(\.name) == ["a", "b"])
        #expect(catalog.match(ProcessFacts(commandLine: ["game"])) == "a")
    }

    @Test func emptyCatalog() throws {
        let catalog = try AppCatalog.decode(files: [])
        #expect(catalog.definitions.isEmpty)
        #expect(catalog.match(ProcessFacts(executablePath: "/usr/bin/steam")) == "steam")
    }

    @Test func duplicateNamesNameBothFiles() {
        #expect(throws: PolicyError(#"app "steam" is defined twice, in "steam.json" and "valve.json""#)) {
            try AppCatalog.decode(files: [
                Self.file("valve.json", #"{"name": "steam", "match": {"snap": ["steam"]}}"#),
                Self.file("steam.json", #"{"name": "steam", "match": {"flatpak": ["com.valvesoftware.Steam"]}}"#),
            ])
        }
    }

    @Test func fileErrorsNameTheFile() {
        #expect(throws: PolicyError(#"steam.json: app catalog field "match.flatpak" must be a list of strings, got a number"#)) {
            try AppCatalog.decode(files: [Self.file("steam.json", #"{"name": "steam", "match": {"flatpak": 1}}"#)])
        }
        #expect(throws: PolicyError("steam.json: not valid JSON: expected ',' or '}' at byte 17")) {
            try AppCatalog.decode(files: [Self.file("steam.json", #"{"name": "steam" "match": {}}"#)])
        }
        #expect(throws: PolicyError(#"steam.json: not valid JSON: duplicate key "name" at byte 18"#)) {
            try AppCatalog.decode(files: [Self.file("steam.json", #"{"name": "steam", "name": "x"}"#)])
        }
    }
}
