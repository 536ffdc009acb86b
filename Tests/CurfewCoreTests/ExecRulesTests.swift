import Testing

@testable import CurfewCore

/// The exec guard: which execs `ExecRules` denies, named from the file alone as the tracker
/// names a process.
@Suite struct ExecRulesTests {
    static let catalog = AppCatalog(
        [
            AppDefinition(name: "game", displayName: "Game", category: .game, executablePaths: ["/usr/games/game"]),
            AppDefinition(name: "homework", displayName: "Homework", category: .education, executableNames: ["homework-tool"]),
            AppDefinition(name: "quest", displayName: "Quest", category: .game, commandLinePatterns: ["*python3*quest.py*"]),
        ],
        interpreters: InterpreterSet(interpreters: ["sh", "python3*"], loaders: ["ld-linux*.so*"]))

    static func rules() -> ExecRules {
        var claims = IdentityClaims()
        claims.claim(["build-id:game"], app: "game", scope: .everyone)
        claims.claim(["sha256:mine"], app: "mygame", scope: .user(1001))
        return ExecRules(
            users: [
                1001: ExecRules.User(
                    name: "kid", rules: ["game": .block, "homework": .allow, "mygame": .block],
                    denied: ["game": .blocked, "mygame": .blocked])
            ],
            subordinates: [
                OwnedSubordinateRange(range: SubordinateRange(owner: "kid", start: 100_000, count: 65_536), ownerUID: 1001)
            ],
            catalog: catalog, claims: claims, interpreterIdentities: ["sha256:python"])
    }

    @Test func theBlockedGameIsDeniedToTheChildOnly() {
        let rules = Self.rules()
        #expect(rules.denial(uid: 1001, path: "/usr/games/game", identities: []) == ExecRules.Denial(user: "kid", app: "game", reason: .blocked))
        #expect(rules.denial(uid: 1002, path: "/usr/games/game", identities: []) == nil)
        #expect(rules.denial(uid: 0, path: "/usr/games/game", identities: []) == nil)
        // In the child's user namespace, under a subordinate uid: still the child.
        #expect(rules.denial(uid: 100_005, path: "/usr/games/game", identities: [])?.user == "kid")
        #expect(rules.denial(uid: 100_000 + 65_536, path: "/usr/games/game", identities: []) == nil)
    }

    @Test func aCopyIsTheGameByItsIdentityAndTheStrictestClaimWins() {
        let rules = Self.rules()
        // Renamed to an allowed app's name, in /dev/shm: the build-id names it the game, and block beats allow.
        #expect(rules.denial(uid: 1001, path: "/dev/shm/homework-tool", identities: ["sha256:x", "build-id:game"])?.app == "game")
        // Unknown identity (not read yet): only the path can tell, and here it tells nothing.
        #expect(rules.denial(uid: 1001, path: "/dev/shm/homework-tool", identities: []) == nil)
        // A child's own claim holds for that child.
        #expect(rules.denial(uid: 1001, path: "/home/kid/renamed", identities: ["sha256:mine"])?.app == "mygame")
        // Blocked by name: the file's name.
        #expect(rules.denial(uid: 1001, path: "/home/kid/mygame", identities: [])?.app == "mygame")
    }

    @Test func interpretersAndLoadersAreNeverDenied() {
        var rules = Self.rules()
        rules.users[1001]?.denied["python3"] = .blocked
        rules.users[1001]?.denied["ld-linux-x86-64.so.2"] = .blocked
        #expect(rules.denial(uid: 1001, path: "/usr/bin/python3", identities: []) == nil)
        #expect(rules.denial(uid: 1001, path: "/lib64/ld-linux-x86-64.so.2", identities: []) == nil)
        // A renamed copy of an interpreter, known by its identity.
        #expect(rules.denial(uid: 1001, path: "/home/kid/game", identities: ["sha256:python"]) == nil)
        // Command-line matches are for after the start: quest's interpreter runs.
        #expect(rules.denial(uid: 1001, path: "/usr/bin/python3.11", identities: []) == nil)
    }

    /// A name is an interpreter's or the loader's only for a file of root's: the game a child copies
    /// to `~/bin/sh`, `~/python3-game` or `~/ld-linux-x86-64.so.2` is still the game by its identity.
    @Test func aChildsFileNamedLikeAnInterpreterIsJudgedByItsIdentity() {
        let rules = Self.rules()
        for path in ["/home/kid/bin/sh", "/home/kid/python3-game", "/home/kid/ld-linux-x86-64.so.2"] {
            #expect(rules.denial(uid: 1001, path: path, identities: ["build-id:game"], fileOwner: 1001)?.app == "game", "\(path)")
            #expect(rules.denial(uid: 1001, path: path, identities: ["build-id:game"], fileOwner: 0) == nil, "\(path) of root's")
        }
        // A copy of the real interpreter is still one, whoever owns it.
        #expect(rules.denial(uid: 1001, path: "/home/kid/game", identities: ["sha256:python"], fileOwner: 1001) == nil)
        #expect(Self.catalog.interpreters.isInterpreter("/home/kid/sh", owner: 1001) == false)
        #expect(Self.catalog.interpreters.isInterpreter("/bin/sh", owner: 0))
        #expect(Self.catalog.interpreters.isLoader("/home/kid/ld-linux-x86-64.so.2", owner: 1001) == false)
        #expect(Self.catalog.interpreters.isLoader("/lib64/ld-linux-x86-64.so.2", owner: 0))
    }

    @Test func nothingDeniedMeansEmpty() {
        #expect(ExecRules().isEmpty)
        #expect(!Self.rules().isEmpty)
        #expect(ExecRules().denial(uid: 1001, path: "/usr/games/game", identities: []) == nil)
    }

    @Test func theCandidatesAreEveryCatalogAppAndEveryRulesApp() {
        let policy = Policy(user: "kid", apps: [AppRule(app: "mygame", rule: .block)])
        #expect(ExecRules.candidates(policy: policy, catalog: Self.catalog) == ["game", "homework", "quest", "mygame"])
    }
}
