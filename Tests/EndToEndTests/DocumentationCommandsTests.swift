import Foundation
import Testing

/// The commands README.md and docs/ show a reader are the built program's: every `curfew` (and
/// `curfewd`) line of a ```sh block names a real subcommand and only flags its `--help` lists, and the
/// ones that only read run in a scratch state directory without a usage error. The pages exist, and
/// their relative links point at files that do.
@Suite struct DocumentationCommandsTests {
    /// The pages of docs/ and who reads them: README.md links to them, the package ships all but the
    /// last two (packaging/deb/build.sh).
    static let pages = [
        "README.md", "docs/parents.md", "docs/children.md", "docs/administrators.md", "docs/security.md",
        "docs/design.md", "docs/architecture.md", "docs/performance.md", "docs/testing.md",
    ]

    static let root = CurfewRunner.repositoryRoot

    /// README.md and every page of docs/ as (path relative to the repository, text).
    static func documents() throws -> [(String, String)] {
        let docs = root.appendingPathComponent("docs")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: docs.path)) ?? []
        let paths = ["README.md"] + names.filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }
        return try paths.compactMap { path in
            let url = root.appendingPathComponent(path)
            guard FileManager.default.fileExists(atPath: url.path) else { return nil }
            return (path, try String(contentsOf: url, encoding: .utf8))
        }
    }

    @Test func everyPageIsThere() {
        for page in Self.pages {
            let path = Self.root.appendingPathComponent(page).path
            let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int
            #expect((size ?? 0) > 0, "\(page) is missing or empty")
        }
    }

    @Test func everyCommandShownIsReal() throws {
        let checker = try DocumentedCommandChecker()
        defer { checker.cleanUp() }
        var problems: [String] = []
        var checked = 0
        for (path, text) in try Self.documents() {
            let commands = ShellBlocks.commands(in: text, file: path)
            checked += commands.count
            for command in commands { problems += checker.problems(with: command) }
        }
        #expect(problems.isEmpty, "\(problems.count) commands in README.md and docs/ are wrong:\n\(problems.joined(separator: "\n"))")
        #expect(checked > 0, "no curfew command found in any ```sh block of README.md and docs/")
    }

    @Test func relativeLinksPointAtFiles() throws {
        var problems: [String] = []
        for (path, text) in try Self.documents() { problems += MarkdownLinks.broken(in: text, file: path, root: Self.root) }
        #expect(problems.isEmpty, "broken links:\n\(problems.joined(separator: "\n"))")
    }

    /// The check fails for real: a wrong subcommand, a wrong long and short flag, a flag given a value it
    /// does not take, a value the command refuses when run, and a broken link are each reported with the
    /// file, the line and the command; the right commands around them are not.
    @Test func aWrongSubcommandOrFlagIsReported() throws {
        let document = """
            # A page with mistakes

            ```sh
            # a comment, then a good command and a continued one
            curfew limit alex 1h --day sat
            sudo curfew schedule alex \\
                --date 2026-03-29
            curfew limitt alex 1h
            sudo curfew policy show alex --jsno
            CURFEW_STATE_DIR=/tmp/scratch curfew policy shwo alex
            curfew schedule alex -z
            curfew user list --json=yes
            curfew schedule alex --date 2026-13-45
            curfew --version && curfew user add sam --no-wait   # a trailing comment
            curfew grant alex 30m --date D
            curfew requests [--all]
            ```

            ```text
            curfew this-is-output --not-checked
            ```

            [a page that exists](README.md) and [one that does not](docs/nowhere.md), `[code](skipped.md)`.
            """
        let checker = try DocumentedCommandChecker()
        defer { checker.cleanUp() }
        let commands = ShellBlocks.commands(in: document, file: "inline.md")
        #expect(commands.map(\.line) == [5, 6, 8, 9, 10, 11, 12, 13, 14, 14, 15, 16])
        let problems = commands.flatMap { checker.problems(with: $0) }
        let expected: [(String, String)] = [
            ("inline.md:8: curfew limitt alex 1h", "curfew has no subcommand \"limitt\""),
            ("inline.md:9: sudo curfew policy show alex --jsno", "curfew policy show has no flag --jsno"),
            ("inline.md:10: CURFEW_STATE_DIR=/tmp/scratch curfew policy shwo alex", "curfew policy has no subcommand \"shwo\""),
            ("inline.md:11: curfew schedule alex -z", "curfew schedule has no flag -z"),
            ("inline.md:12: curfew user list --json=yes", "--json takes no value"),
            ("inline.md:13: curfew schedule alex --date 2026-13-45", "exit 64"),
            ("inline.md:15: curfew grant alex 30m --date D", "\"D\" is a placeholder"),
            ("inline.md:16: curfew requests [--all]", "\"[--all]\" is a placeholder"),
        ]
        #expect(problems.count == expected.count, "\(problems.joined(separator: "\n"))")
        for (location, words) in expected {
            #expect(
                problems.contains { $0.hasPrefix(location) && $0.contains(words) },
                "not reported: \(location) (\(words)); reported:\n\(problems.joined(separator: "\n"))")
        }
        let links = MarkdownLinks.broken(in: document, file: "inline.md", root: Self.root)
        #expect(links == ["inline.md:23: docs/nowhere.md does not exist"])
    }
}

/// A command line of a ```sh block: where it is, as written, and its words split as a shell would.
struct ShownCommand {
    var file: String
    var line: Int
    var text: String
    /// The simple command's words after `VAR=value` and `sudo` prefixes: the program, then its arguments.
    var words: [String]
}

/// The shell commands of a Markdown page: the lines of ```sh (or bash, shell) blocks, continued lines
/// joined, comments dropped, split at `&&`, `||`, `;` and `|` into simple commands.
enum ShellBlocks {
    static func commands(in text: String, file: String) -> [ShownCommand] {
        var commands: [ShownCommand] = []
        var inShell = false
        var inOther = false
        var pending: (line: Int, text: String)?
        for (index, raw) in text.components(separatedBy: "\n").enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("```") {
                if inShell || inOther {
                    inShell = false
                    inOther = false
                } else {
                    let language = line.dropFirst(3).trimmingCharacters(in: .whitespaces).lowercased()
                    inShell = ["sh", "bash", "shell"].contains(language)
                    inOther = !inShell
                }
                pending = nil
                continue
            }
            guard inShell else { continue }
            var current = pending ?? (index + 1, "")
            if line.hasSuffix("\\") {
                current.text += line.dropLast() + " "
                pending = current
                continue
            }
            current.text += line
            pending = nil
            let shown = current.text.trimmingCharacters(in: .whitespaces)
            if shown.isEmpty || shown.hasPrefix("#") { continue }
            for words in simpleCommands(shown) {
                let program = programWords(words)
                guard let name = program.first, ["curfew", "curfewd"].contains(name.split(separator: "/").last.map(String.init) ?? "")
                else { continue }
                commands.append(ShownCommand(file: file, line: current.line, text: shown, words: program))
            }
        }
        return commands
    }

    /// The words after environment assignments, `sudo` (and its options) and `env`.
    static func programWords(_ words: [String]) -> [String] {
        var rest = words[...]
        func dropAssignments() {
            while let first = rest.first, first.range(of: "^[A-Za-z_][A-Za-z0-9_]*=", options: .regularExpression) != nil {
                rest = rest.dropFirst()
            }
        }
        dropAssignments()
        while let first = rest.first, first == "sudo" || first == "env" {
            rest = rest.dropFirst()
            while let option = rest.first, option.hasPrefix("-") {
                rest = rest.dropFirst()
                if ["-u", "-g", "-C", "-D", "-p", "-r", "-t", "-U", "-h"].contains(option) { rest = rest.dropFirst() }
            }
            dropAssignments()
        }
        return Array(rest)
    }

    /// Words as sh splits them (quotes and backslashes honoured, `$(...)` kept whole, a word starting with
    /// `#` ends the line, redirections dropped), grouped into simple commands.
    static func simpleCommands(_ line: String) -> [[String]] {
        var commands: [[String]] = [[]]
        var word = ""
        var inWord = false
        var skipNextWord = false
        func endWord() {
            if inWord {
                if skipNextWord { skipNextWord = false } else { commands[commands.count - 1].append(word) }
            }
            word = ""
            inWord = false
        }
        let characters = Array(line)
        var index = 0
        while index < characters.count {
            let character = characters[index]
            switch character {
            case " ", "\t":
                endWord()
            case "#" where !inWord:
                index = characters.count
                continue
            case "'":
                inWord = true
                index += 1
                while index < characters.count, characters[index] != "'" {
                    word.append(characters[index])
                    index += 1
                }
            case "\"":
                inWord = true
                index += 1
                while index < characters.count, characters[index] != "\"" {
                    if characters[index] == "\\", index + 1 < characters.count { index += 1 }
                    word.append(characters[index])
                    index += 1
                }
            case "\\":
                inWord = true
                if index + 1 < characters.count {
                    index += 1
                    word.append(characters[index])
                }
            case "$" where index + 1 < characters.count && characters[index + 1] == "(":
                inWord = true
                var depth = 0
                repeat {
                    if characters[index] == "(" { depth += 1 }
                    if characters[index] == ")" { depth -= 1 }
                    word.append(characters[index])
                    index += 1
                } while index < characters.count && depth > 0
                continue
            case ";", "|", "&":
                // `2>&1` is a redirection (handled below); here `&&`, `||`, `|`, `;`, `&` end a command.
                endWord()
                while index + 1 < characters.count, [";", "|", "&"].contains(characters[index + 1]) { index += 1 }
                commands.append([])
            case ">", "<":
                // A redirection: a file descriptor number before it is part of it, and so is the word after
                // it unless it duplicates a descriptor (`2>&1`).
                if inWord, word.allSatisfy(\.isNumber) {
                    word = ""
                    inWord = false
                }
                endWord()
                while index + 1 < characters.count, [">", "<", "&"].contains(characters[index + 1]) { index += 1 }
                if characters[index] == "&" {
                    while index + 1 < characters.count, characters[index + 1].isNumber || characters[index + 1] == "-" { index += 1 }
                } else {
                    skipNextWord = true
                }
            default:
                inWord = true
                word.append(character)
            }
            index += 1
        }
        endWord()
        return commands.filter { !$0.isEmpty }
    }
}

/// What one command's `--help` lists.
struct CommandHelp {
    /// Subcommand names.
    var subcommands: [String] = []
    /// Each flag or option name (`--day`, `-o`) and whether it takes a value.
    var options: [String: Bool] = [:]
    /// Whether the command takes positional arguments.
    var takesArguments = false

    /// ArgumentParser's help: sections (`OPTIONS:`, `ARGUMENTS:`, `SUBCOMMANDS:`, titled option groups)
    /// whose entries are indented two spaces; an option's names come before its `<value>`, separated by
    /// `, ` (`-o, --output <file>`) or `/` (`--wait/--no-wait`).
    init(parsing help: String) {
        var section = ""
        for line in help.components(separatedBy: "\n") {
            if !line.hasPrefix(" "), line.hasSuffix(":") {
                section = line
                continue
            }
            guard line.hasPrefix("  "), !line.hasPrefix("   ") else { continue }
            let entry = line.dropFirst(2)
            let synopsis = entry.components(separatedBy: "  ").first ?? ""
            if section == "SUBCOMMANDS:" {
                let name = synopsis.split(separator: " ").first.map(String.init) ?? ""
                if name.range(of: "^[a-z][a-z0-9-]*$", options: .regularExpression) != nil { subcommands.append(name) }
            } else if section == "ARGUMENTS:" {
                takesArguments = true
            } else if synopsis.hasPrefix("-") {
                for part in synopsis.components(separatedBy: ", ") {
                    let pieces = part.split(separator: " ", maxSplits: 1)
                    guard let names = pieces.first else { continue }
                    let takesValue = pieces.count > 1 && pieces[1].hasPrefix("<")
                    for name in names.split(separator: "/") where name.hasPrefix("-") { options[String(name)] = takesValue }
                }
            }
        }
    }
}

/// Checks shown commands against the built binaries' `--help`, and runs the ones that only read in a
/// scratch state directory where `alex`, `sam` and `kid` (the examples) are managed.
final class DocumentedCommandChecker {
    let scratch: CurfewRunner
    private var helps: [String: CommandHelp] = [:]

    /// Subcommand paths that change nothing outside their state directory's database, run there.
    static let readers: Set<String> = [
        "curfew schedule", "curfew policy show", "curfew policy export", "curfew user list",
        "curfew app list", "curfew app catalog", "curfew events", "curfew report", "curfew key show", "curfew requests",
        "curfew status", "curfew sync status", "curfew check-login",
    ]
    /// Readers a child runs about themself when they name nobody.
    static let childsOwn: Set<String> = ["curfew status", "curfew schedule", "curfew report"]
    /// Flags that point a command elsewhere than the scratch state directory: such a command is only checked.
    static let elsewhere: Set<String> = ["--state-dir", "--shared-dir", "--socket", "--output", "-o"]
    /// Words that stand for a value instead of being one (`[--json]`, `<minutes>`, `USER`, `D`): a reader
    /// types the commands of a ```sh block as they are, so they hold examples (docs/ uses alex and sam).
    static let placeholderWords: Set<String> = [
        "USER", "USERS", "ID", "FILE", "DATE", "DIR", "CODE", "APP", "DURATION", "DAY", "DAYS", "NAME", "PATH", "SECONDS",
        "MINUTES", "WINDOW", "KEY", "PIN", "TIME", "VALUE", "ADDRESS", "HH:MM", "HH:MM-HH:MM", "...",
    ]

    static func isPlaceholder(_ word: String) -> Bool {
        placeholderWords.contains(word) || word.hasPrefix("[") || (word.hasPrefix("<") && word.hasSuffix(">"))
            || word.range(of: "^[A-Z]$", options: .regularExpression) != nil
    }

    static func placeholderProblem(_ word: String) -> String {
        "\"\(word)\" is a placeholder; show an example value (placeholders go in prose or a text block)"
    }

    /// Flags ArgumentParser adds to every command without listing them all in `--help`.
    static let builtIn: [String: Bool] = ["-h": false, "--help": false, "--generate-completion-script": true, "--experimental-dump-help": false]

    init() throws {
        scratch = try CurfewRunner()
        for arguments in [["init"], ["user", "add", "alex", "--no-wait"], ["user", "add", "sam", "--no-wait"], ["user", "add", "kid", "--no-wait"]] {
            let result = try scratch.run(arguments)
            guard result.status == 0 else { throw TestFailure("curfew \(arguments.joined(separator: " ")): \(result)") }
        }
    }

    func cleanUp() { scratch.cleanUp() }

    func help(_ path: [String]) -> CommandHelp? {
        let key = path.joined(separator: " ")
        if let known = helps[key] { return known }
        let binary = CurfewRunner.binDirectory.appendingPathComponent(path[0]).path
        guard let result = try? run(binary, Array(path.dropFirst()) + ["--help"], environment: [:]), result.status == 0 else {
            return nil
        }
        let help = CommandHelp(parsing: result.stdout)
        helps[key] = help
        return help
    }

    /// One line per mistake: `file:line: command: what is wrong`.
    func problems(with command: ShownCommand) -> [String] {
        let program = command.words[0].split(separator: "/").last.map(String.init) ?? command.words[0]
        var path = [program]
        var problems: [String] = []
        var flags: [String] = []
        func report(_ what: String) { problems.append("\(command.file):\(command.line): \(command.text): \(what)") }
        guard var help = self.help(path) else { return ["\(command.file):\(command.line): \(command.text): \(program) --help fails"] }
        var descending = true
        var asksForHelp = false
        var positionals = 0
        var index = 1
        let words = command.words
        while index < words.count {
            let word = words[index]
            index += 1
            if word == "--" { break }
            if word.hasPrefix("-"), word.count > 1 {
                let options = help.options.merging(Self.builtIn) { listed, _ in listed }
                let here = path.joined(separator: " ")
                if word.hasPrefix("--") {
                    let parts = word.split(separator: "=", maxSplits: 1)
                    let name = String(parts[0])
                    flags.append(name)
                    guard let takesValue = options[name] else {
                        report("\(here) has no flag \(name) (its --help lists \(help.options.keys.sorted().joined(separator: " ")))")
                        continue
                    }
                    if takesValue, parts.count == 1 {
                        if index < words.count, Self.isPlaceholder(words[index]) { report(Self.placeholderProblem(words[index])) }
                        index += 1
                    }
                    if !takesValue, parts.count == 2 { report("\(name) takes no value") }
                } else {
                    // Short flags, perhaps several in one word (`-abc`); one that takes a value takes the
                    // rest of the word, or the next word.
                    let letters = Array(word.dropFirst())
                    for (position, letter) in letters.enumerated() {
                        let name = "-\(letter)"
                        flags.append(name)
                        guard let takesValue = options[name] else {
                            report("\(here) has no flag \(name) (its --help lists \(help.options.keys.sorted().joined(separator: " ")))")
                            break
                        }
                        if takesValue {
                            if position == letters.count - 1 {
                                if index < words.count, Self.isPlaceholder(words[index]) { report(Self.placeholderProblem(words[index])) }
                                index += 1
                            }
                            break
                        }
                    }
                }
                continue
            }
            if Self.isPlaceholder(word) {
                report(Self.placeholderProblem(word))
                return problems
            }
            // `curfew help sync status` is `curfew sync status --help`: the words after `help` are a path.
            if descending, !asksForHelp, word == "help", !help.subcommands.isEmpty {
                asksForHelp = true
                continue
            }
            if descending, help.subcommands.contains(word) {
                path.append(word)
                guard let next = self.help(path) else {
                    report("\(path.joined(separator: " ")) --help fails")
                    return problems
                }
                help = next
                continue
            }
            if descending, !help.subcommands.isEmpty, !help.takesArguments || asksForHelp {
                report("\(path.joined(separator: " ")) has no subcommand \"\(word)\" (its --help lists \(help.subcommands.joined(separator: ", ")))")
                return problems
            }
            if !help.takesArguments {
                report("\(path.joined(separator: " ")) takes no argument, got \"\(word)\"")
                return problems
            }
            if asksForHelp {
                report("\(path.joined(separator: " ")) has no subcommand \"\(word)\"")
                return problems
            }
            descending = false
            positionals += 1
        }
        guard problems.isEmpty else { return problems }
        // Run what only reads, in the scratch state directory (the page's own VAR= prefixes and sudo left out).
        let key = path.joined(separator: " ")
        let onlyAsks = asksForHelp || flags.contains { ["--help", "-h", "--version"].contains($0) }
        // A child's own status, schedule and report (no user named) ask the agent as that child: not run.
        let childsOwn = Self.childsOwn.contains(key) && positionals == 0
        guard onlyAsks || (Self.readers.contains(key) && !childsOwn), !flags.contains(where: Self.elsewhere.contains) else {
            return problems
        }
        let binary = CurfewRunner.binDirectory.appendingPathComponent(program).path
        let environment = [
            "CURFEW_STATE_DIR": scratch.stateDir, "CURFEW_CATALOG_DIRS": scratch.catalogDirectory, "TZ": "UTC", "NO_COLOR": "1",
            "CURFEW_SOCKET": scratch.root.appendingPathComponent("no-agent.sock").path,
        ]
        do {
            let result = try run(binary, Array(words.dropFirst()), environment: environment)
            // 69 (no agent), 75 (not confirmed) and 77 (not permitted, a login refused) depend on the
            // computer; a usage error, a bad value, a failure or a crash do not.
            if ![0, 69, 75, 77].contains(result.status) {
                report("exit \(result.status) in a scratch state directory: \(result.stderr.trimmingCharacters(in: .whitespacesAndNewlines))")
            }
        } catch {
            report("could not run: \(error)")
        }
        return problems
    }

    func run(_ binary: String, _ arguments: [String], environment: [String: String]) throws -> CurfewRunner.Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.currentDirectoryURL = scratch.root
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "CURFEW_SHARED_DIR")
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        return CurfewRunner.Result(status: status, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }
}

/// Relative links and images of a Markdown page (`[text](path)`, `![alt](path)`, `[name]: path`),
/// outside code, that do not point at a file of the repository.
enum MarkdownLinks {
    static func broken(in text: String, file: String, root: URL) -> [String] {
        let directory = root.appendingPathComponent(file).deletingLastPathComponent()
        var problems: [String] = []
        var inFence = false
        for (index, raw) in text.components(separatedBy: "\n").enumerated() {
            if raw.trimmingCharacters(in: .whitespaces).hasPrefix("```") {
                inFence.toggle()
                continue
            }
            guard !inFence else { continue }
            // Inline code is not a link.
            let line = raw.replacingOccurrences(of: "`[^`]*`", with: "", options: .regularExpression)
            var targets: [String] = []
            for pattern in [#"\]\(([^)\s]+)(?:\s+"[^"]*")?\)"#, #"^\s*\[[^\]]+\]:\s+(\S+)"#] {
                let expression = try! NSRegularExpression(pattern: pattern)
                for match in expression.matches(in: line, range: NSRange(line.startIndex..., in: line)) {
                    if let range = Range(match.range(at: 1), in: line) { targets.append(String(line[range])) }
                }
            }
            for target in targets {
                if target.hasPrefix("#") || target.contains("://") || target.hasPrefix("mailto:") { continue }
                let path = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
                let url = directory.appendingPathComponent(String(path)).standardizedFileURL
                if !FileManager.default.fileExists(atPath: url.path) {
                    problems.append("\(file):\(index + 1): \(target) does not exist")
                }
            }
        }
        return problems
    }
}
