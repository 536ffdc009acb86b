/// What kind of program an app is; reports group by it and parents pick rules by it.
public enum AppCategory: String, CaseIterable, Sendable {
    case game, launcher, browser, chat, video, education, creativity, other

    public static func parse(_ text: String) throws(PolicyError) -> AppCategory {
        guard let category = AppCategory(rawValue: text) else {
            let names = allCases.map(\.rawValue)
            throw PolicyError(
                "app category must be \(names.dropLast().joined(separator: ", ")) or \(names.last!), got \(quoted(text))")
        }
        return category
    }
}

/// One app of the catalog: a name that policies use, and the matchers that decide which processes
/// belong to it. docs/design.md, "Apps"; the file format is described in `policies/apps/README.md`.
public struct AppDefinition: Sendable, Equatable {
    /// The name policies and reports use; `Policy.validateAppName` rules.
    public var name: String
    public var displayName: String
    public var category: AppCategory
    /// Globs over the resolved `/proc/PID/exe` path, e.g. `/usr/games/supertuxkart`, `*/steamapps/common/*`.
    public var executablePaths: [String]
    /// Exact basenames of the resolved executable, e.g. `firefox-esr`.
    public var executableNames: [String]
    /// Globs over the command line, its arguments joined with single spaces, for programs run by an
    /// interpreter: `java -jar ...minecraft...`, `wine ...`, `python3 -m ...`.
    public var commandLinePatterns: [String]
    /// Exact flatpak application ids, e.g. `com.valvesoftware.Steam`.
    public var flatpakIds: [String]
    /// Exact snap names, e.g. `firefox`.
    public var snapNames: [String]
    /// Globs over the systemd unit (scope or service) that holds the process, from `/proc/PID/cgroup`,
    /// e.g. `app-steam-*.scope`. A unit holds the programs the app starts too, so games started by a
    /// launcher count as the launcher.
    public var systemdUnits: [String]

    public init(
        name: String,
        displayName: String,
        category: AppCategory,
        executablePaths: [String] = [],
        executableNames: [String] = [],
        commandLinePatterns: [String] = [],
        flatpakIds: [String] = [],
        snapNames: [String] = [],
        systemdUnits: [String] = []
    ) {
        self.name = name
        self.displayName = displayName
        self.category = category
        self.executablePaths = executablePaths
        self.executableNames = executableNames
        self.commandLinePatterns = commandLinePatterns
        self.flatpakIds = flatpakIds
        self.snapNames = snapNames
        self.systemdUnits = systemdUnits
    }

    public var hasMatchers: Bool {
        !(executablePaths.isEmpty && executableNames.isEmpty && commandLinePatterns.isEmpty
            && flatpakIds.isEmpty && snapNames.isEmpty && systemdUnits.isEmpty)
    }
}

// MARK: - JSON

extension AppDefinition {
    public static let fieldNames = ["name", "displayName", "category", "match"]
    /// The keys of `match`, in the order `json` writes them.
    public static let matcherNames = ["executablePaths", "executableNames", "commandLine", "flatpak", "snap", "systemdUnits"]

    private var matcherLists: [(key: String, values: [String])] {
        [
            ("executablePaths", executablePaths), ("executableNames", executableNames),
            ("commandLine", commandLinePatterns), ("flatpak", flatpakIds), ("snap", snapNames),
            ("systemdUnits", systemdUnits),
        ]
    }

    /// The catalog file form, fields in documented order; empty matcher lists are left out.
    public var json: JSONValue {
        var match = JSONObject()
        for (key, values) in matcherLists where !values.isEmpty {
            match[key] = .array(values.map { .string($0) })
        }
        return .object(
            JSONObject([
                ("name", .string(name)),
                ("displayName", .string(displayName)),
                ("category", .string(category.rawValue)),
                ("match", .object(match)),
            ]))
    }

    /// Reads one catalog entry. `name` and `match` are required; `displayName` defaults to the name
    /// and `category` to `other`. Unknown fields, wrong types, empty patterns and an entry without
    /// any matcher are errors naming the field.
    public static func decode(_ value: JSONValue) throws(PolicyError) -> AppDefinition {
        guard case .object(let object) = value else {
            throw PolicyError("an app definition must be a JSON object, got \(value.typeName)")
        }
        for key in object.keys where !fieldNames.contains(key) {
            throw PolicyError(
                "unknown app catalog field \(quoted(key)) (known fields: \(fieldNames.joined(separator: ", ")))")
        }
        guard let nameField = object["name"] else { throw PolicyError("app catalog field \"name\" is missing") }
        let name = try catalogString(nameField, field: "name")
        try Policy.validateAppName(name)

        var displayName = name
        if let field = object["displayName"] {
            displayName = try catalogString(field, field: "displayName")
            guard !displayName.allSatisfy(\.isWhitespace) else {
                throw PolicyError("app catalog field \"displayName\" must not be empty, got \(quoted(displayName))")
            }
        }
        var category = AppCategory.other
        if let field = object["category"] { category = try AppCategory.parse(try catalogString(field, field: "category")) }

        guard let matchField = object["match"] else {
            throw PolicyError("app catalog field \"match\" is missing: app \(quoted(name)) needs at least one matcher")
        }
        guard case .object(let match) = matchField else {
            throw PolicyError("app catalog field \"match\" must be an object, got \(matchField.typeName)")
        }
        for key in match.keys where !matcherNames.contains(key) {
            throw PolicyError(
                "unknown app catalog field \(quoted("match." + key)) (known fields: \(matcherNames.joined(separator: ", ")))")
        }
        func list(_ key: String) throws(PolicyError) -> [String] {
            guard let field = match[key] else { return [] }
            return try patternList(field, field: "match." + key)
        }
        let definition = AppDefinition(
            name: name, displayName: displayName, category: category,
            executablePaths: try list("executablePaths"), executableNames: try list("executableNames"),
            commandLinePatterns: try list("commandLine"), flatpakIds: try list("flatpak"), snapNames: try list("snap"),
            systemdUnits: try list("systemdUnits"))
        for (index, path) in definition.executablePaths.enumerated() where !path.hasPrefix("/") && !path.hasPrefix("*") {
            throw PolicyError(
                "app catalog field \"match.executablePaths[\(index)]\" must be an absolute path or start with *, got \(quoted(path))")
        }
        for (index, basename) in definition.executableNames.enumerated() where basename.contains("/") {
            throw PolicyError(
                "app catalog field \"match.executableNames[\(index)]\" must be a file name without '/', got \(quoted(basename))")
        }
        guard definition.hasMatchers else {
            throw PolicyError(
                "app \(quoted(name)) needs at least one matcher in \"match\" (\(matcherNames.joined(separator: ", ")))")
        }
        return definition
    }

    private static func catalogString(_ value: JSONValue, field: String) throws(PolicyError) -> String {
        guard case .string(let text) = value else {
            throw PolicyError("app catalog field \(quoted(field)) must be a string, got \(value.typeName)")
        }
        return text
    }

    private static func patternList(_ value: JSONValue, field: String) throws(PolicyError) -> [String] {
        guard case .array(let elements) = value else {
            throw PolicyError("app catalog field \(quoted(field)) must be a list of strings, got \(value.typeName)")
        }
        var patterns: [String] = []
        for (index, element) in elements.enumerated() {
            let text = try catalogString(element, field: "\(field)[\(index)]")
            guard !text.isEmpty else {
                throw PolicyError("app catalog field \(quoted("\(field)[\(index)]")) must not be empty")
            }
            patterns.append(text)
        }
        return patterns
    }
}

// MARK: - Glob

/// Shell-style wildcard matching over Unicode scalars, without `fnmatch`'s path rules.
///
/// - `*` matches any run of characters, including none and **including `/` and spaces**: one
///   pattern covers nested install directories (`/opt/*/steam`) and whole command lines
///   (`*java* -jar *minecraft*`).
/// - `?` matches exactly one character.
/// - `[abc]`, `[a-z]` match one character of the class; `[!a-z]` or `[^a-z]` one character outside
///   it. A `]` right after the opening `[` (or `[!`) is part of the class.
/// - There is no escape character, so Windows paths in wine command lines read naturally
///   (`*\steamapps\common\*`); match a literal `*`, `?` or `[` with `[*]`, `[?]`, `[[]`. A `[` without
///   a closing `]` is an ordinary character.
///
/// Runs in O(pattern × text) time at worst: a mismatch backtracks only to the latest `*`.
public func globMatch(_ pattern: String, _ text: String) -> Bool {
    let pattern = Array(pattern.unicodeScalars)
    let text = Array(text.unicodeScalars)
    var p = 0
    var t = 0
    // Where to resume after a mismatch: the position after the latest `*`, and the text position
    // that star has absorbed up to.
    var starPattern: Int? = nil
    var starText = 0
    while t < text.count {
        if p < pattern.count {
            switch pattern[p] {
            case "*":
                starPattern = p + 1
                starText = t
                p += 1
                continue
            case "?":
                p += 1
                t += 1
                continue
            case "[":
                if let (matches, next) = matchClass(pattern, at: p, text[t]) {
                    if matches {
                        p = next
                        t += 1
                        continue
                    }
                } else if text[t] == "[" {
                    p += 1
                    t += 1
                    continue
                }
            default:
                if pattern[p] == text[t] {
                    p += 1
                    t += 1
                    continue
                }
            }
        }
        guard let resume = starPattern else { return false }
        starText += 1
        p = resume
        t = starText
    }
    while p < pattern.count, pattern[p] == "*" { p += 1 }
    return p == pattern.count
}

/// Whether `scalar` is in the class that opens at `pattern[start]` (a `[`), and the pattern position
/// after the class; nil when the class is not closed.
private func matchClass(_ pattern: [Unicode.Scalar], at start: Int, _ scalar: Unicode.Scalar) -> (Bool, Int)? {
    var index = start + 1
    var negated = false
    if index < pattern.count, pattern[index] == "!" || pattern[index] == "^" {
        negated = true
        index += 1
    }
    var found = false
    var first = true
    while index < pattern.count {
        let low = pattern[index]
        if low == "]" && !first { return (found != negated, index + 1) }
        first = false
        if index + 2 < pattern.count, pattern[index + 1] == "-", pattern[index + 2] != "]" {
            let high = pattern[index + 2]
            if low <= scalar && scalar <= high { found = true }
            index += 3
        } else {
            if low == scalar { found = true }
            index += 1
        }
    }
    return nil
}

// MARK: - Matching processes

/// What the agent learned about one process, the input of `AppCatalog.match`.
public struct ProcessFacts: Sendable, Equatable {
    /// The resolved `/proc/PID/exe`; a trailing ` (deleted)` (the file was replaced by an upgrade
    /// while running) is ignored when matching.
    public var executablePath: String?
    /// `/proc/PID/cmdline` split at its NULs.
    public var commandLine: [String]
    public var flatpakId: String?
    public var snapName: String?
    /// The systemd unit (scope or service) holding the process, e.g. `app-gnome-steam-4242.scope`.
    public var systemdUnit: String?
    /// An opaque hash of the executable's content, computed by the agent.
    public var fileIdentity: String?
    /// The ELF GNU build-id of the executable (`build-id:<hex>`): unchanged by renaming, copying,
    /// appending bytes or running it from a memfd.
    public var buildID: String?
    /// When the process runs the dynamic loader (`ld-linux-x86-64.so.2 PROGRAM`), the loader's path;
    /// `executablePath` and the identities are then those of the program the loader mapped.
    public var loader: String?
    /// The uid owning the executable file: root's files were put there by the system, not a child.
    public var executableOwner: UInt32?

    public init(
        executablePath: String? = nil,
        commandLine: [String] = [],
        flatpakId: String? = nil,
        snapName: String? = nil,
        systemdUnit: String? = nil,
        fileIdentity: String? = nil,
        buildID: String? = nil,
        loader: String? = nil,
        executableOwner: UInt32? = nil
    ) {
        self.executablePath = executablePath
        self.commandLine = commandLine
        self.flatpakId = flatpakId
        self.snapName = snapName
        self.systemdUnit = systemdUnit
        self.fileIdentity = fileIdentity
        self.buildID = buildID
        self.loader = loader
        self.executableOwner = executableOwner
    }

    /// Every identity of the executable: its content hash and its build-id.
    public var identities: [String] { [fileIdentity, buildID].compactMap { $0 } }
}

// MARK: - Interpreters and loaders

/// Programs that run other programs: shells, language runtimes, wine, the dynamic loader. They are
/// never an app by themselves: their identity is never learned as an app's (one `python3 quest.py`
/// must not make every Python program that game), and a script they run is named by its file.
/// Data of the catalog (`policies/apps/interpreters.json`), not code, so a family can add theirs.
public struct InterpreterSet: Sendable, Equatable {
    /// Globs over the executable's basename, e.g. `python3*`.
    public var interpreters: [String]
    /// Globs over the executable's basename of dynamic loaders, e.g. `ld-linux*.so*`.
    public var loaders: [String]

    public init(interpreters: [String] = [], loaders: [String] = []) {
        self.interpreters = interpreters
        self.loaders = loaders
    }

    public static let fieldNames = ["interpreters", "loaders"]

    /// Whether `path`'s basename is a loader.
    public func isLoader(_ path: String) -> Bool {
        let name = AppCatalog.basename(AppCatalog.withoutDeletedMarker(path))
        return loaders.contains { globMatch($0, name) }
    }

    /// Whether `path`'s basename is an interpreter or a loader.
    public func isInterpreter(_ path: String) -> Bool {
        let name = AppCatalog.basename(AppCatalog.withoutDeletedMarker(path))
        return interpreters.contains { globMatch($0, name) } || loaders.contains { globMatch($0, name) }
    }

    /// `isLoader` for a file owned by `owner` (nil: not known): only a file of root's is one by its
    /// name. A user's own file called `ld-linux-x86-64.so.2` (a blocked game copied there, say) is a
    /// program like any other; the system's loaders are also known by identity.
    public func isLoader(_ path: String, owner: UInt32?) -> Bool { (owner ?? 0) == 0 && isLoader(path) }

    /// `isInterpreter` for a file owned by `owner` (nil: not known): only a file of root's is one by
    /// its name, so a blocked game a child copies to `~/bin/bash` or `~/python3-game` keeps its learnt
    /// identity (an interpreter's claims are dropped); a copy of a real interpreter is still one by
    /// its identity.
    public func isInterpreter(_ path: String, owner: UInt32?) -> Bool { (owner ?? 0) == 0 && isInterpreter(path) }

    /// Whether a catalog file holds interpreter lists rather than an app (an object without `name`
    /// holding `interpreters` or `loaders`).
    static func describes(_ value: JSONValue) -> Bool {
        guard case .object(let object) = value, object["name"] == nil else { return false }
        return object.keys.contains { fieldNames.contains($0) }
    }

    static func decode(_ value: JSONValue) throws(PolicyError) -> InterpreterSet {
        guard case .object(let object) = value else {
            throw PolicyError("an interpreter list must be a JSON object, got \(value.typeName)")
        }
        for key in object.keys where !fieldNames.contains(key) {
            throw PolicyError(
                "unknown interpreter list field \(quoted(key)) (known fields: \(fieldNames.joined(separator: ", ")))")
        }
        func list(_ key: String) throws(PolicyError) -> [String] {
            guard let field = object[key] else { return [] }
            guard case .array(let elements) = field else {
                throw PolicyError("interpreter list field \(quoted(key)) must be a list of strings, got \(field.typeName)")
            }
            var names: [String] = []
            for (index, element) in elements.enumerated() {
                guard case .string(let text) = element, !text.isEmpty, !text.contains("/") else {
                    throw PolicyError(
                        "interpreter list field \(quoted("\(key)[\(index)]")) must be a file name (a glob) without '/', got \(element)")
                }
                names.append(text)
            }
            return names
        }
        return InterpreterSet(interpreters: try list("interpreters"), loaders: try list("loaders"))
    }

    /// The file an interpreter runs, by its basename: the first argument after the interpreter that
    /// is not an option (`sh mygame.sh`, `bash ./mygame.sh`, `python3 -u mygame.py`); nil when the
    /// program comes from the command line itself (`sh -c ...`, `python3 -m ...`, `perl -e ...`) or
    /// there is none (an interactive shell).
    public static func scriptName(commandLine: [String]) -> String? {
        guard let index = scriptIndex(commandLine: commandLine) else { return nil }
        let name = AppCatalog.basename(commandLine[index])
        return name.isEmpty ? nil : name.prefix(utf8Bytes: UsageSummaryFormat.maxAppBytes)
    }

    /// Where in `commandLine` the script `scriptName` names is.
    public static func scriptIndex(commandLine: [String]) -> Int? {
        var index = 1
        while index < commandLine.count {
            let argument = commandLine[index]
            if argument == "--" {
                index += 1
                break
            }
            guard argument.hasPrefix("-"), argument.count > 1 else { break }
            if ["-cp", "-classpath", "--class-path", "-W", "-o", "-O", "--rcfile", "--init-file"].contains(argument) {
                // An option taking the next argument as its value.
                index += 2
                continue
            }
            if ["--command", "--eval", "--print"].contains(argument) { return nil }
            let letters = argument.dropFirst()
            // A cluster of short options (`-c`, `-lc`, `-e`, `-m`): the program is inline, no file;
            // `-Xmx2g`, `-Dkey=value` and `--long` options stand alone.
            if !argument.hasPrefix("--"), !argument.hasPrefix("-X"), !argument.hasPrefix("-D"),
                letters.allSatisfy({ $0.isLetter }), letters.contains(where: { "ceEm".contains($0) })
            {
                return nil
            }
            index += 1
        }
        return index < commandLine.count ? index : nil
    }
}

/// How a process was matched, and what the tracker may learn from it.
public struct AppMatch: Sendable, Equatable {
    /// The app the process is counted and ruled under.
    public var app: String
    /// Whether a catalog app claimed the process by its executable path: the only match its
    /// identity may be learned from (a name, command line or unit says nothing about the file).
    public var byExecutablePath: Bool

    public init(app: String, byExecutablePath: Bool = false) {
        self.app = app
        self.byExecutablePath = byExecutablePath
    }
}

/// The known apps. Within one kind of matcher the first definition in catalog order wins;
/// `decode(files:)` orders definitions by file name so the result never depends on directory order.
public struct AppCatalog: Sendable {
    public let definitions: [AppDefinition]
    /// Programs that run other programs, never an app by themselves.
    public let interpreters: InterpreterSet
    private let byName: [String: Int]
    private let byFlatpak: [String: String]
    private let bySnap: [String: String]
    private let byExecutableName: [String: String]

    /// The definitions must have different names (checked by `decode(files:)`; here the first wins).
    public init(_ definitions: [AppDefinition], interpreters: InterpreterSet = InterpreterSet()) {
        self.definitions = definitions
        self.interpreters = interpreters
        var byName: [String: Int] = [:]
        var byFlatpak: [String: String] = [:]
        var bySnap: [String: String] = [:]
        var byExecutableName: [String: String] = [:]
        for (index, definition) in definitions.enumerated() {
            if byName[definition.name] == nil { byName[definition.name] = index }
            for id in definition.flatpakIds where byFlatpak[id] == nil { byFlatpak[id] = definition.name }
            for name in definition.snapNames where bySnap[name] == nil { bySnap[name] = definition.name }
            for name in definition.executableNames where byExecutableName[name] == nil {
                byExecutableName[name] = definition.name
            }
        }
        self.byName = byName
        self.byFlatpak = byFlatpak
        self.bySnap = bySnap
        self.byExecutableName = byExecutableName
    }

    /// Reads catalog files, each holding one app definition object or interpreter lists (an object
    /// with `interpreters` and/or `loaders`, all such files adding up). Errors start with the file's name.
    public static func decode(files: [(name: String, bytes: [UInt8])]) throws(PolicyError) -> AppCatalog {
        var definitions: [AppDefinition] = []
        var interpreters = InterpreterSet()
        var fileOfApp: [String: String] = [:]
        for file in files.sorted(by: { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }) {
            let value: JSONValue
            do {
                value = try JSONValue.parse(file.bytes)
            } catch {
                throw PolicyError("\(file.name): not valid JSON: \(error)")
            }
            if InterpreterSet.describes(value) {
                do {
                    let set = try InterpreterSet.decode(value)
                    interpreters.interpreters += set.interpreters.filter { !interpreters.interpreters.contains($0) }
                    interpreters.loaders += set.loaders.filter { !interpreters.loaders.contains($0) }
                } catch {
                    throw PolicyError("\(file.name): \(error.message)")
                }
                continue
            }
            let definition: AppDefinition
            do {
                definition = try AppDefinition.decode(value)
            } catch {
                throw PolicyError("\(file.name): \(error.message)")
            }
            if let other = fileOfApp[definition.name] {
                throw PolicyError("app \(quoted(definition.name)) is defined twice, in \(quoted(other)) and \(quoted(file.name))")
            }
            fileOfApp[definition.name] = file.name
            definitions.append(definition)
        }
        return AppCatalog(definitions, interpreters: interpreters)
    }

    public func definition(named name: String) -> AppDefinition? {
        byName[name].map { definitions[$0] }
    }

    /// The app a process belongs to, with `knownIdentities` (identity → app) standing for the apps
    /// that claimed its executable's identities; see `resolve`.
    public func match(_ facts: ProcessFacts, knownIdentities: [String: String] = [:]) -> String {
        let claimed = Set(facts.identities.compactMap { knownIdentities[$0] })
        return resolve(
            facts, claimed: claimed, isInterpreter: interpreters.isInterpreter(facts.executablePath ?? "", owner: facts.executableOwner)
        ).app
    }

    /// The app a process belongs to.
    ///
    /// The candidates are the apps that claimed the executable's identity (`claimed`: a renamed,
    /// copied or modified binary stays the same app) and the catalog's own match, which is, in order
    /// of precedence: flatpak id, snap name, systemd unit, executable path, executable basename,
    /// command line. Of several candidates the strictest for the user wins (`strictness`: block over
    /// limit over no rule over allow), so a child cannot make a blocked game an allowed app by
    /// copying it; on a tie the catalog's own match, then the first name.
    ///
    /// A process that matches nothing is named by its file (`fileName`): a script an interpreter runs
    /// (`isInterpreter`; `sh mygame.sh` is `mygame.sh`), else its executable's basename, else its
    /// first argument's basename, else `unknown`. An interpreter's identity claims nothing.
    public func resolve(
        _ facts: ProcessFacts, claimed: Set<String> = [], isInterpreter: Bool = false, strictness: (String) -> Int = { _ in 0 }
    ) -> AppMatch {
        let direct = catalogMatch(facts)
        var candidates = isInterpreter ? [] : claimed
        if let direct { candidates.insert(direct.app) }
        if let best = candidates.max(by: { a, b in
            let (rankA, rankB) = (strictness(a), strictness(b))
            if rankA != rankB { return rankA < rankB }
            // Equal: the direct match, then the first name, is the larger.
            if a == direct?.app || b == direct?.app { return b == direct?.app }
            return a > b
        }) {
            return AppMatch(app: best, byExecutablePath: best == direct?.app && direct?.byExecutablePath == true)
        }
        return AppMatch(app: fileName(facts, isInterpreter: isInterpreter))
    }

    /// The name of a process no app claims: its script, executable or first argument's file name.
    /// A file that happens to carry a catalog app's name without matching it is not that app: its
    /// name gets ` (other)` (a homework program called `supertuxkart` is not the game).
    func fileName(_ facts: ProcessFacts, isInterpreter: Bool) -> String {
        // Names a process chose (argv[0] can be any length): cut to what a usage summary holds, so
        // the same name is kept in the database, shown in reports and shared with other computers.
        var name = "unknown"
        let path = facts.executablePath.map(Self.withoutDeletedMarker)
        if isInterpreter, let script = InterpreterSet.scriptName(commandLine: facts.commandLine) {
            name = script
        } else if let path, !Self.basename(path).isEmpty {
            name = Self.basename(path)
        } else if let first = facts.commandLine.first, !Self.basename(first).isEmpty {
            name = Self.basename(first)
        }
        if byName[name] != nil { name = name.prefix(utf8Bytes: UsageSummaryFormat.maxAppBytes - 8) + " (other)" }
        return name.prefix(utf8Bytes: UsageSummaryFormat.maxAppBytes)
    }

    /// The catalog app that claims the process by its matchers, and whether by executable path.
    func catalogMatch(_ facts: ProcessFacts) -> AppMatch? {
        if let id = facts.flatpakId, let app = byFlatpak[id] { return AppMatch(app: app) }
        if let name = facts.snapName, let app = bySnap[name] { return AppMatch(app: app) }
        if let unit = facts.systemdUnit,
            let app = definitions.first(where: { $0.systemdUnits.contains { globMatch($0, unit) } })
        {
            return AppMatch(app: app.name)
        }
        let path = facts.executablePath.map(Self.withoutDeletedMarker)
        if let path, !path.isEmpty {
            if let app = definitions.first(where: { $0.executablePaths.contains { globMatch($0, path) } }) {
                return AppMatch(app: app.name, byExecutablePath: true)
            }
            if let app = byExecutableName[Self.basename(path)] { return AppMatch(app: app) }
        }
        if !facts.commandLine.isEmpty {
            let commandLine = facts.commandLine.joined(separator: " ")
            if let app = definitions.first(where: { $0.commandLinePatterns.contains { globMatch($0, commandLine) } }) {
                return AppMatch(app: app.name)
            }
        }
        return nil
    }

    public static func basename(_ path: String) -> String {
        String(path.split(separator: "/", omittingEmptySubsequences: true).last ?? "")
    }

    public static func withoutDeletedMarker(_ path: String) -> String {
        path.hasSuffix(" (deleted)") ? String(path.dropLast(" (deleted)".count)) : path
    }
}

// MARK: - What reports count a process under

extension AppCatalog {
    /// The directories of the system's own programs: a program elsewhere (a home directory, /tmp,
    /// /opt, /usr/local, a memfd) is something the family installed or made, reported by its name.
    public static let systemDirectories = ["/usr/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/"]
    /// The app the system's command-line tools (`sleep`, `cat`, `script`, ...) count under.
    public static let terminalApp = "terminal"

    public static func isSystemPath(_ path: String) -> Bool {
        systemDirectories.contains { path.hasPrefix($0) } && !path.hasPrefix("/usr/local/")
    }

    /// The app a process counts under in reports and status, given the app it is ruled under
    /// (`resolve`): a catalog app, an app a rule names and session plumbing stay as they are; else
    /// a desktop app by its desktop entry (from the unit a desktop started it in, else from
    /// `desktopEntry`, the desktop entries whose `Exec` names the program); else a program or script
    /// from outside the system's directories by its file name; else `terminal`. Blocking and screen
    /// time do not change: only the name time is reported under.
    public func countedName(
        of app: String, facts: ProcessFacts, isInterpreter: Bool, hasRule: Bool,
        desktopEntry: (String) -> String? = { _ in nil }
    ) -> String {
        if hasRule || definition(named: app) != nil || Accounting.sessionPlumbing.contains(app) { return app }
        if let unit = facts.systemdUnit, let entry = Self.desktopEntry(unit: unit) { return entry }
        let path = facts.executablePath.map(Self.withoutDeletedMarker) ?? ""
        if isInterpreter {
            // A script: named unless it is one of the system's own (an absolute path in its directories).
            guard let index = InterpreterSet.scriptIndex(commandLine: facts.commandLine) else { return Self.terminalApp }
            let script = facts.commandLine[index]
            return script.hasPrefix("/") && Self.isSystemPath(script) ? Self.terminalApp : app
        }
        if !path.isEmpty, let entry = desktopEntry(Self.basename(path)) { return entry }
        if !path.isEmpty && !Self.isSystemPath(path) { return app }
        return Self.terminalApp
    }

    /// The desktop entry id of a unit a desktop started an app in, as systemd's desktop-environment
    /// convention names them: `app[-<launcher>]-<entry>-<random>.scope` or
    /// `app[-<launcher>]-<entry>@<random>.service`, dashes in the entry escaped as `\x2d`
    /// (`app-gnome-org.gnome.Maps-1234.scope` → `org.gnome.Maps`). Flatpak units are left to the catalog.
    public static func desktopEntry(unit: String) -> String? {
        guard unit.hasPrefix("app-"), !unit.hasPrefix("app-flatpak-") else { return nil }
        var name = Substring(unit.dropFirst(4))
        if name.hasSuffix(".scope") {
            name = name.dropLast(6)
            guard let dash = name.lastIndex(of: "-") else { return nil }
            name = name[..<dash]
        } else if name.hasSuffix(".service") {
            name = name.dropLast(8)
            if let at = name.firstIndex(of: "@") { name = name[..<at] }
        } else {
            return nil
        }
        // What is left is `[<launcher>-]<entry>`; the entry's own dashes are escaped.
        if let dash = name.firstIndex(of: "-") { name = name[name.index(after: dash)...] }
        let entry = Self.unescapeUnit(name)
        return entry.isEmpty ? nil : entry.prefix(utf8Bytes: UsageSummaryFormat.maxAppBytes)
    }

    /// systemd unit-name escaping (systemd.unit(5), `systemd-escape`): `\xNN` stands for the byte NN.
    public static func unescapeUnit(_ escaped: Substring) -> String {
        guard escaped.contains("\\") else { return String(escaped) }
        var bytes: [UInt8] = []
        let utf8 = Array(escaped.utf8)
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "\\"), index + 3 < utf8.count, utf8[index + 1] == UInt8(ascii: "x"),
                let high = hexValue(utf8[index + 2]), let low = hexValue(utf8[index + 3])
            {
                bytes.append(high << 4 | low)
                index += 4
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The program a desktop entry's `Exec` line starts, by its file name (`Exec=env FOO=1 /usr/bin/gedit %U`
    /// → `gedit`); nil for an empty line.
    public static func desktopExecProgram(_ exec: String) -> String? {
        // Words separated by spaces; a double-quoted word may hold spaces (the Desktop Entry spec's quoting).
        var words: [String] = []
        var word = ""
        var quoted = false
        for character in exec {
            if character == "\"" {
                quoted.toggle()
            } else if character == " " && !quoted {
                if !word.isEmpty { words.append(word) }
                word = ""
            } else {
                word.append(character)
            }
        }
        if !word.isEmpty { words.append(word) }
        var rest = words[...]
        if rest.first == "env" || rest.first == "/usr/bin/env" {
            rest = rest.dropFirst().drop { $0.contains("=") || $0.hasPrefix("-") }
        }
        guard let first = rest.first else { return nil }
        let name = basename(first)
        return name.isEmpty ? nil : name
    }
}
