import CurfewCore
import Testing

/// Which app a process is, when identities are claimed, and how scripts are named.
@Suite struct AppIdentityTests {
    static let catalog = AppCatalog(
        [
            AppDefinition(
                name: "quest", displayName: "Quest", category: .game, commandLinePatterns: ["*python3*quest.py*"]),
            AppDefinition(name: "game", displayName: "Game", category: .game, executablePaths: ["/usr/games/game"]),
            AppDefinition(name: "homework", displayName: "Homework", category: .education, executableNames: ["homework-tool"]),
            AppDefinition(
                name: "launcher", displayName: "Launcher", category: .launcher, executablePaths: ["*/launcher/*"]),
        ],
        interpreters: InterpreterSet(interpreters: ["sh", "dash", "bash", "python3*", "java"], loaders: ["ld-linux*.so*"]))

    static func strictness(_ rules: [String: AppRuleKind]) -> (String) -> Int {
        { rules[$0]?.strictness ?? AppRuleKind.noRuleStrictness }
    }

    @Test func onlyAnExecutablePathMatchMayTeachAnIdentity() {
        let path = Self.catalog.resolve(ProcessFacts(executablePath: "/usr/games/game", fileIdentity: "sha256:g"))
        #expect(path == AppMatch(app: "game", byExecutablePath: true))
        let name = Self.catalog.resolve(ProcessFacts(executablePath: "/home/kid/homework-tool", fileIdentity: "sha256:g"))
        #expect(name == AppMatch(app: "homework", byExecutablePath: false))
        let commandLine = Self.catalog.resolve(
            ProcessFacts(executablePath: "/usr/bin/python3.11", commandLine: ["python3", "quest.py"]), isInterpreter: true)
        #expect(commandLine == AppMatch(app: "quest", byExecutablePath: false))
    }

    @Test func theStrictestClaimWins() {
        // A blocked game copied to an allowed app's name stays blocked, and so does the real game.
        let rules: [String: AppRuleKind] = ["game": .block, "homework": .allow]
        let copy = ProcessFacts(executablePath: "/home/kid/homework-tool", fileIdentity: "sha256:g")
        #expect(Self.catalog.resolve(copy, claimed: ["game"], strictness: Self.strictness(rules)).app == "game")
        let real = ProcessFacts(executablePath: "/usr/games/game", fileIdentity: "sha256:g")
        #expect(Self.catalog.resolve(real, claimed: ["homework", "game"], strictness: Self.strictness(rules)).app == "game")
        // Limit over no rule over allow.
        let limited: [String: AppRuleKind] = ["launcher": .limit(minutes: 30), "homework": .allow]
        #expect(
            Self.catalog.resolve(copy, claimed: ["launcher"], strictness: Self.strictness(limited)).app == "launcher")
        #expect(Self.catalog.resolve(copy, claimed: ["other"], strictness: Self.strictness(limited)).app == "other")
        // Equal: the catalog's own match.
        #expect(Self.catalog.resolve(real, claimed: ["launcher"]).app == "game")
    }

    @Test func anInterpretersIdentityClaimsNothingAndItsScriptIsTheApp() {
        let homework = ProcessFacts(
            executablePath: "/usr/bin/python3.11", commandLine: ["python3", "homework.py"], fileIdentity: "sha256:py")
        #expect(Self.catalog.resolve(homework, claimed: ["quest"], isInterpreter: true).app == "homework.py")
        #expect(Self.catalog.resolve(homework, claimed: ["quest"], isInterpreter: false).app == "quest")
    }

    @Test func aFileCarryingACatalogNameWithoutMatchingIsNotThatApp() {
        // `game` is matched by its path only: another program called `game` is not the game.
        #expect(Self.catalog.resolve(ProcessFacts(executablePath: "/home/kid/bin/game")).app == "game (other)")
        #expect(Self.catalog.resolve(ProcessFacts(executablePath: "/usr/games/game")).app == "game")
        #expect(
            Self.catalog.resolve(ProcessFacts(executablePath: "/usr/bin/dash", commandLine: ["sh", "quest"]), isInterpreter: true).app
                == "quest (other)")
    }

    struct ScriptCase: Sendable, CustomTestStringConvertible {
        let commandLine: [String]
        let name: String?
        var testDescription: String { commandLine.joined(separator: " ") }
    }

    static let scripts: [ScriptCase] = [
        ScriptCase(commandLine: ["sh", "mygame.sh"], name: "mygame.sh"),
        ScriptCase(commandLine: ["bash", "./mygame.sh", "--level", "3"], name: "mygame.sh"),
        ScriptCase(commandLine: ["/bin/sh", "/home/kid/games/mygame.sh"], name: "mygame.sh"),
        ScriptCase(commandLine: ["python3", "mygame.py"], name: "mygame.py"),
        ScriptCase(commandLine: ["python3", "-u", "-B", "mygame.py"], name: "mygame.py"),
        ScriptCase(commandLine: ["bash", "--", "mygame.sh"], name: "mygame.sh"),
        ScriptCase(commandLine: ["java", "-Xmx2g", "-Dx=y", "-jar", "game.jar"], name: "game.jar"),
        ScriptCase(commandLine: ["java", "-cp", "lib.jar", "Main"], name: "Main"),
        ScriptCase(commandLine: ["sh", "-c", "mygame.sh"], name: nil),
        ScriptCase(commandLine: ["bash", "-lc", "mygame.sh"], name: nil),
        ScriptCase(commandLine: ["python3", "-m", "mygame"], name: nil),
        ScriptCase(commandLine: ["perl", "-e", "print 1"], name: nil),
        ScriptCase(commandLine: ["-bash"], name: nil),
        ScriptCase(commandLine: ["bash", "-i"], name: nil),
        ScriptCase(commandLine: [], name: nil),
    ]

    @Test(arguments: scripts)
    func scriptName(_ script: ScriptCase) {
        #expect(InterpreterSet.scriptName(commandLine: script.commandLine) == script.name)
    }

    @Test func claimsAreScopedAndConflictsReportedOnce() {
        var claims = IdentityClaims()
        #expect(claims.claim(["sha256:g", "build-id:01"], app: "game", scope: .everyone).isEmpty)
        #expect(claims.claim(["sha256:g"], app: "game", scope: .everyone).isEmpty)
        let conflicts = claims.claim(["build-id:01"], app: "launcher", scope: .user(1001))
        #expect(conflicts == [IdentityClaims.Conflict(identity: "build-id:01", apps: ["game", "launcher"])])
        #expect(claims.claim(["build-id:01"], app: "launcher", scope: .user(1002)).isEmpty, "once per pair")
        #expect(claims.apps(claiming: ["build-id:01"], uid: 1001) == ["game", "launcher"])
        #expect(claims.apps(claiming: ["build-id:01"], uid: 1003) == ["game"], "another child's claim does not apply")
        #expect(claims.apps(claiming: ["sha256:other"], uid: 1001).isEmpty)
    }

    /// The agent keeps its claims across restarts: read back, every claim is as it was, and a line
    /// that is not one (a hand-edited or cut value) is skipped.
    @Test func claimsReadBackAsTheyWere() {
        var claims = IdentityClaims()
        claims.claim(["sha256:g", "build-id:01"], app: "game", scope: .everyone)
        claims.claim(["sha256:mine"], app: "mygame", scope: .user(1001))
        claims.claim(["build-id:01"], app: "launcher", scope: .user(1002))
        let text = claims.persisted
        #expect(text.split(separator: "\n").count == 4, "\(text)")
        var restored = IdentityClaims()
        restored.restore(text + "\nbroken line\nsha256:x\tapp\tnobody\n\tapp\teveryone")
        #expect(restored.entries.map { "\($0.identity) \($0.app) \($0.scope.word)" } == claims.entries.map { "\($0.identity) \($0.app) \($0.scope.word)" })
        #expect(restored.apps(claiming: ["sha256:mine"], uid: 1001) == ["mygame"])
        #expect(restored.apps(claiming: ["sha256:mine"], uid: 1002).isEmpty)
        #expect(restored.apps(claiming: ["build-id:01"], uid: 1002) == ["game", "launcher"])
    }

    @Test func userClaimsPastCapacityAreDroppedNotSystemOnes() {
        var claims = IdentityClaims(capacity: 4)
        claims.claim(["sha256:system"], app: "game", scope: .everyone)
        for index in 0..<10 { claims.claim(["sha256:\(index)"], app: "x", scope: .user(1001)) }
        #expect(claims.count <= 4)
        #expect(claims.apps(claiming: ["sha256:system"], uid: 1001) == ["game"])
    }

    @Test func interpreterListsDecodeAndAddUp() throws {
        let files: [(name: String, bytes: [UInt8])] = [
            ("interpreters.json", Array(#"{"interpreters": ["sh", "python3*"], "loaders": ["ld-linux*.so*"]}"#.utf8)),
            ("local.json", Array(#"{"interpreters": ["tclsh", "sh"]}"#.utf8)),
        ]
        let catalog = try AppCatalog.decode(files: files)
        #expect(catalog.definitions.isEmpty)
        #expect(catalog.interpreters == InterpreterSet(interpreters: ["sh", "python3*", "tclsh"], loaders: ["ld-linux*.so*"]))
        #expect(throws: PolicyError.self) {
            try AppCatalog.decode(files: [("bad.json", Array(#"{"interpreters": ["/bin/sh"]}"#.utf8))])
        }
        #expect(throws: PolicyError.self) {
            try AppCatalog.decode(files: [("bad.json", Array(#"{"interpreters": ["sh"], "extra": 1}"#.utf8))])
        }
    }

    struct CountedCase: Sendable, CustomTestStringConvertible {
        let label: String
        let app: String
        let facts: ProcessFacts
        var isInterpreter = false
        var hasRule = false
        let counted: String
        var testDescription: String { label }
    }

    static let countedCases: [CountedCase] = [
        CountedCase(label: "a catalog app", app: "game", facts: ProcessFacts(executablePath: "/usr/games/game"), counted: "game"),
        CountedCase(label: "a system tool", app: "sleep", facts: ProcessFacts(executablePath: "/usr/bin/sleep"), counted: "terminal"),
        CountedCase(label: "script(1)", app: "script", facts: ProcessFacts(executablePath: "/usr/bin/script"), counted: "terminal"),
        CountedCase(label: "session plumbing stays out", app: "bash", facts: ProcessFacts(executablePath: "/usr/bin/bash"), counted: "bash"),
        CountedCase(
            label: "a program in a home directory", app: "mygame",
            facts: ProcessFacts(executablePath: "/home/kid/bin/mygame"), counted: "mygame"),
        CountedCase(label: "/usr/local", app: "tool", facts: ProcessFacts(executablePath: "/usr/local/bin/tool"), counted: "tool"),
        CountedCase(label: "/opt", app: "thing", facts: ProcessFacts(executablePath: "/opt/thing/thing"), counted: "thing"),
        CountedCase(
            label: "a system tool with a rule", app: "sleep", facts: ProcessFacts(executablePath: "/usr/bin/sleep"), hasRule: true,
            counted: "sleep"),
        CountedCase(
            label: "a desktop app by its scope", app: "gnome-maps",
            facts: ProcessFacts(executablePath: "/usr/bin/gjs-console", systemdUnit: "app-gnome-org.gnome.Maps-1234.scope"),
            counted: "org.gnome.Maps"),
        CountedCase(
            label: "a desktop app by its Exec", app: "gedit", facts: ProcessFacts(executablePath: "/usr/bin/gedit"),
            counted: "org.gnome.gedit"),
        CountedCase(
            label: "a script of the child's", app: "homework.py",
            facts: ProcessFacts(executablePath: "/usr/bin/python3.11", commandLine: ["python3", "homework.py"]), isInterpreter: true,
            counted: "homework.py"),
        CountedCase(
            label: "a system script", app: "lsb_release",
            facts: ProcessFacts(executablePath: "/usr/bin/python3.11", commandLine: ["python3", "/usr/bin/lsb_release"]),
            isInterpreter: true, counted: "terminal"),
        CountedCase(
            label: "python3 -c", app: "python3.11",
            facts: ProcessFacts(executablePath: "/usr/bin/python3.11", commandLine: ["python3", "-c", "1"]), isInterpreter: true,
            counted: "terminal"),
    ]

    @Test(arguments: countedCases)
    func countedName(_ countedCase: CountedCase) {
        let counted = Self.catalog.countedName(
            of: countedCase.app, facts: countedCase.facts, isInterpreter: countedCase.isInterpreter, hasRule: countedCase.hasRule
        ) { $0 == "gedit" ? "org.gnome.gedit" : nil }
        #expect(counted == countedCase.counted)
    }

    @Test func desktopEntriesOfUnits() {
        #expect(AppCatalog.desktopEntry(unit: "app-gnome-org.gnome.Maps-1234.scope") == "org.gnome.Maps")
        #expect(AppCatalog.desktopEntry(unit: "app-org.gnome.Maps-1234.scope") == "org.gnome.Maps")
        #expect(AppCatalog.desktopEntry(unit: "app-kde-org.kde.kate@a1b2.service") == "org.kde.kate")
        #expect(AppCatalog.desktopEntry(unit: "app-gnome-minecraft\\x2dlauncher-42.scope") == "minecraft-launcher")
        #expect(AppCatalog.desktopEntry(unit: "vte-spawn-6f1c.scope") == nil)
        #expect(AppCatalog.desktopEntry(unit: "session-3.scope") == nil)
        #expect(AppCatalog.desktopEntry(unit: "app-flatpak-org.mozilla.firefox-1.scope") == nil)
        #expect(AppCatalog.desktopExecProgram("env FOO=1 /usr/bin/gedit %U") == "gedit")
        #expect(AppCatalog.desktopExecProgram("\"/opt/My App/app\" --x") == "app")
        #expect(AppCatalog.desktopExecProgram("") == nil)
    }
}

@Suite struct SubordinateIDTests {
    @Test func parse() {
        let ranges = SubordinateRange.parse(
            "kid:100000:65536\n1002:165536:65536\n# comment\nbad\nzero:0:10\nempty:5:0\nhuge:4294967290:100\n:1:1\nx:1:2:3\n")
        #expect(
            ranges == [
                SubordinateRange(owner: "kid", start: 100000, count: 65536),
                SubordinateRange(owner: "1002", start: 165536, count: 65536),
            ])
        #expect(ranges[0].contains(100000) && ranges[0].contains(165535) && !ranges[0].contains(165536) && !ranges[0].contains(99999))
    }
}
