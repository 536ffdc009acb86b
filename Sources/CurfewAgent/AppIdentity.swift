import CurfewCore
import CurfewLinux
import Foundation
import Logging

/// Which app a process is (`AppCatalog.resolve`): the catalog's matchers, the executable identities
/// apps claimed, the interpreters and loaders installed on the system (never claimed), the managed
/// users' rules (the strictest of several apps claiming one binary wins), and the desktop entries'
/// names that counting reports.
///
/// Owned by the tracker's thread.
final class AppIdentity {
    /// The app a process is ruled under and the name it counts under in reports and status.
    struct Names: Equatable {
        var app: String
        var counted: String
    }

    /// The names found for a process, good as long as it is the same process with the same facts
    /// (an exec keeps the PID and start time but changes the executable: a launcher becomes the game)
    /// and the claims and rules are those of `generation`.
    struct Known {
        var startTime: UInt64
        var facts: ProcessFacts
        var generation: UInt64
        var names: Names
    }

    /// The identities of the interpreters and loaders installed on the system.
    struct Installed: Equatable {
        var interpreters: Set<String>
        var loaders: Set<String>
    }

    let catalog: AppCatalog
    let logger: Logger
    /// Executable identities (content hash, build-id) -> the apps that claimed them, learnt from
    /// literal catalog paths, from processes a catalog app matched by executable path, and from
    /// programs a `--by-name` rule named, so a renamed, copied or modified binary is still that app.
    var claims = IdentityClaims()
    /// The claims' generation last written to the database.
    var persistedClaimsGeneration: UInt64 = 0
    /// The identities of the interpreters and loaders installed on the system (the catalog's globs,
    /// looked up in the usual directories): a renamed copy of one is one too, and never claimed.
    let interpreterIdentities: Set<String>
    let loaderIdentities: Set<String>
    /// Each managed user's app rules, by uid: which of several apps claiming a binary is the strictest.
    var rulesByUID: [UInt32: [String: AppRuleKind]] = [:]
    /// Changes with the claims and the rules: a cached app is only good for the generation it was found in.
    var matchGeneration: UInt64 = 0
    /// The names of each process, as long as they are good (`Known`).
    var appOfProcess: [Int32: Known] = [:]
    /// Program file name -> desktop entry id, from the system's desktop entries (read at start).
    let desktopPrograms: [String: String]

    /// Looks up the installed interpreters and loaders and reads the desktop entries; the claims are
    /// learnt after (`learnCatalogPaths`, `restoreClaims`).
    init(catalog: AppCatalog, logger: Logger, identities: FileIdentityCache) {
        self.catalog = catalog
        self.logger = logger
        let installed = Self.installedInterpreters(catalog.interpreters, identities: identities)
        interpreterIdentities = installed.interpreters
        loaderIdentities = installed.loaders
        desktopPrograms = DesktopEntries.load()
    }

    /// Whether the program at a path, with its identity, is a loader (the sampler's `isLoader`).
    func loaderTest() -> (String, FileIdentityCache.Identity?) -> Bool {
        let interpreters = catalog.interpreters
        let loaderIdentities = self.loaderIdentities
        return { path, identity in
            interpreters.isLoader(path, owner: identity?.owner) || (identity?.all.contains(where: loaderIdentities.contains) ?? false)
        }
    }

    /// Claims the identities of the catalog's literal executable paths (not interpreters) for their apps.
    func learnCatalogPaths(identities: FileIdentityCache) {
        let interpreters = catalog.interpreters
        for definition in catalog.definitions {
            for path in definition.executablePaths where !path.contains(where: { "*?[".contains($0) }) {
                guard let identity = identities.identities(ofFile: path),
                    !interpreters.isInterpreter(path, owner: identity.owner), !identity.all.contains(where: interpreterIdentities.contains)
                else { continue }
                learn(identity.all, app: definition.name, scope: identity.owner == 0 ? .everyone : .user(identity.owner))
            }
        }
    }

    /// Takes back what earlier runs learnt (`kept`, as the database holds it; a renamed --by-name copy
    /// stays blocked after a restart).
    func restoreClaims(_ kept: String?) {
        if let kept {
            claims.restore(kept)
            matchGeneration &+= 1
        }
        persistedClaimsGeneration = claims.generation
    }

    /// The claims as the database keeps them, and the generation they are of.
    struct KeptClaims {
        var generation: UInt64
        var text: String
    }

    /// The claims to write to the database, when they changed since they last were.
    var claimsToKeep: KeptClaims? {
        claims.generation != persistedClaimsGeneration ? KeptClaims(generation: claims.generation, text: claims.persisted) : nil
    }

    /// Directories where interpreters and loaders are installed.
    static let interpreterDirectories = [
        "/bin", "/usr/bin", "/usr/local/bin", "/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu", "/usr/lib/i386-linux-gnu",
    ]

    /// The identities of the files in `interpreterDirectories` (and each JVM's `bin`) whose names the
    /// catalog lists as interpreters, and those of its loaders.
    static func installedInterpreters(_ set: InterpreterSet, identities: FileIdentityCache) -> Installed {
        var interpreters = Set<String>()
        var loaders = Set<String>()
        guard !set.interpreters.isEmpty || !set.loaders.isEmpty else { return Installed(interpreters: [], loaders: []) }
        let files = FileManager.default
        var directories = interpreterDirectories
        for jvm in (try? files.contentsOfDirectory(atPath: "/usr/lib/jvm")) ?? [] { directories.append("/usr/lib/jvm/\(jvm)/bin") }
        for directory in directories {
            for name in (try? files.contentsOfDirectory(atPath: directory)) ?? [] where set.isInterpreter(name) {
                // Root's files only: a user's file in /usr/local/bin is not the system's interpreter.
                guard let identity = identities.identities(ofFile: "\(directory)/\(name)"), identity.owner == 0 else { continue }
                interpreters.formUnion(identity.all)
                if set.isLoader(name) { loaders.formUnion(identity.all) }
            }
        }
        return Installed(interpreters: interpreters, loaders: loaders)
    }

    /// Records that `app` claims `identities`; a second app claiming one is logged once.
    func learn(_ identities: [String], app: String, scope: IdentityClaims.Scope) {
        let before = claims.generation
        for conflict in claims.claim(identities, app: app, scope: scope) {
            logger.notice(
                "several apps claim one executable; the strictest rule applies",
                metadata: ["identity": "\(conflict.identity)", "apps": "\(conflict.apps.joined(separator: ","))"])
        }
        if claims.generation != before { matchGeneration &+= 1 }
    }

    /// Takes each managed user's app rules from `policies` (`uids`: the managed users' uids, by name).
    func refreshRules(_ policies: [String: Policy], uids: [String: UInt32]) {
        var table: [UInt32: [String: AppRuleKind]] = [:]
        for (user, policy) in policies {
            guard let uid = uids[user] else { continue }
            var rules: [String: AppRuleKind] = [:]
            for rule in policy.apps where rules[rule.app] == nil { rules[rule.app] = rule.rule }
            table[uid] = rules
        }
        if table != rulesByUID {
            rulesByUID = table
            matchGeneration &+= 1
        }
    }

    /// The app `process` is counted and ruled under (`AppCatalog.resolve`) and the name it counts
    /// under in reports and status (`AppCatalog.countedName`), learning its identity when that is
    /// safe: a catalog app's executable-path match, or a program a `--by-name` rule of its user names;
    /// never an interpreter's or a loader's. `owner`: the managed user the process belongs to
    /// (`ProcessWatch.ownerUID`).
    func names(of process: TrackedProcess, owner: UInt32) -> Names {
        if let known = appOfProcess[process.pid], known.startTime == process.startTime, known.facts == process.facts,
            known.generation == matchGeneration
        {
            return known.names
        }
        let facts = process.facts
        let identities = facts.identities
        let interpreter =
            catalog.interpreters.isInterpreter(facts.executablePath ?? "", owner: facts.executableOwner)
            || identities.contains(where: interpreterIdentities.contains)
        let rules = rulesByUID[owner] ?? [:]
        let match = catalog.resolve(
            facts, claimed: interpreter ? [] : claims.apps(claiming: identities, uid: owner), isInterpreter: interpreter
        ) { rules[$0]?.strictness ?? AppRuleKind.noRuleStrictness }
        if !interpreter && !identities.isEmpty {
            if match.byExecutablePath {
                learn(identities, app: match.app, scope: facts.executableOwner == 0 ? .everyone : .user(owner))
            } else if rules[match.app] != nil && catalog.definition(named: match.app) == nil {
                learn(identities, app: match.app, scope: .user(owner))
            }
        }
        let desktopPrograms = self.desktopPrograms
        let counted = catalog.countedName(
            of: match.app, facts: facts, isInterpreter: interpreter, hasRule: rules[match.app] != nil
        ) { desktopPrograms[$0] }
        let names = Names(app: match.app, counted: counted)
        appOfProcess[process.pid] = Known(startTime: process.startTime, facts: process.facts, generation: matchGeneration, names: names)
        return names
    }

    /// Forgets the names of a process that exited.
    func forget(pid: Int32) { appOfProcess[pid] = nil }

    /// Forgets the names of processes that are gone, once there are many more names than `processes`
    /// (without connector events nothing else does).
    func forgetGone(_ processes: [Int32: TrackedProcess]) {
        if appOfProcess.count > processes.count * 2 + 64 {
            appOfProcess = appOfProcess.filter { processes[$0.key]?.startTime == $0.value.startTime }
        }
    }
}
