import Foundation
import Testing

/// The bash completion from `curfew --generate-completion-script bash`, loaded into a real bash and
/// driven through `complete`: managed users and catalog apps come from `curfew` itself, lockout
/// actions, weekdays and durations from fixed lists. (PackageContainerTests checks the installed one.)
@Suite struct CompletionTests {
    @Test func bashCompletesUsersAppsLockoutsWeekdaysAndDurations() throws {
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        try runner.ok(["init"])
        // The agent's list of whom it manages (LoginServiceTests shows a real agent writing it).
        try "kid\nkiddo\n".write(toFile: "\(runner.stateDir)/managed-users", atomically: true, encoding: .utf8)
        let script = try runner.ok(["--generate-completion-script", "bash"]).stdout
        let scriptPath = runner.root.appendingPathComponent("curfew.bash").path
        try script.write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let driver = """
            source \(scriptPath)
            function=$(complete -p curfew | sed 's/.*-F \\([^ ]*\\) .*/\\1/')
            try() {
                COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
                COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
                "$function" curfew "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"
                echo "${COMPREPLY[*]}"
            }
            try curfew limit ki
            try curfew app block kid supert
            try curfew lockout kid ""
            try curfew bedtime kid 21:00-07:00 --day s
            try curfew grant kid 1h
            """
        let (status, text) = try Self.shell(runner, "/bin/bash", ["--norc", "--noprofile", "-c", driver])
        #expect(status == 0)
        #expect(
            text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) == [
                "kid kiddo", "supertuxkart", "logout lock apps none network", "sat sun", "1h 1h30m", "",
            ], "\(text)")
    }

    /// The fish completion from `curfew --generate-completion-script fish` in a real interactive fish
    /// (Debian 12's 3.6, on a pseudo-terminal from script(1): `commandline` needs one), through
    /// `complete -C`: users and apps come from `curfew` itself (ArgumentParser's own script asks
    /// fish 3 for the cursor's place in a way it does not answer, and offered neither), the rest
    /// from the lists.
    @Test func fishCompletesUsersAppsLockoutsWeekdaysAndDurations() throws {
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        try runner.ok(["init"])
        try "kid\nkiddo\n".write(toFile: "\(runner.stateDir)/managed-users", atomically: true, encoding: .utf8)
        let script = try runner.ok(["--generate-completion-script", "fish"]).stdout
        #expect(try runner.ok(["--generate-completion-script=fish"]).stdout == script)
        let scriptPath = runner.root.appendingPathComponent("curfew.fish").path
        try script.write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let lines = [
            "curfew limit ki", "curfew app block kid supert", "curfew lockout kid ", "curfew bedtime kid 21:00-07:00 --day s",
            "curfew grant kid 1h", "curfew status ",
        ]
        let driver = (["source \(scriptPath)"] + lines.map { "complete -C'\($0)' | string split -f 1 \\t | string join ' '" })
            .joined(separator: "; ")
        let (status, output) = try Self.shell(
            runner, "/usr/bin/script", ["-qec", "fish --no-config -i -c \"\(driver)\"", "/dev/null"], extra: ["TERM": "dumb"])
        let text = output.replacingOccurrences(of: "\r", with: "")
        #expect(status == 0, "\(text)")
        #expect(
            text.split(separator: "\n").map(String.init) == [
                "kid kiddo", "supertuxkart", "logout lock apps none network", "sat sun", "1h 1h30m", "kid kiddo",
            ], "\(text)")
    }

    /// The zsh completion from `curfew --generate-completion-script zsh` (what the package installs as
    /// `_curfew`) through compinit in a real interactive zsh on a pseudo-terminal (zsh/zpty), one
    /// Tab per line; the words it offers are caught where zsh's `compadd` adds them.
    @Test func zshCompletesUsersAppsLockoutsWeekdaysAndDurations() throws {
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        try runner.ok(["init"])
        try "kid\nkiddo\n".write(toFile: "\(runner.stateDir)/managed-users", atomically: true, encoding: .utf8)
        let functions = runner.root.appendingPathComponent("functions")
        try FileManager.default.createDirectory(at: functions, withIntermediateDirectories: true)
        let script = try runner.ok(["--generate-completion-script", "zsh"]).stdout
        #expect(script.hasPrefix("#compdef curfew\n"))
        try script.write(to: functions.appendingPathComponent("_curfew"), atomically: true, encoding: .utf8)
        let capture = runner.root.appendingPathComponent("capture.zsh")
        try Self.zshCapture.write(to: capture, atomically: true, encoding: .utf8)
        let lines = [
            "curfew limit ki", "curfew app block kid supert", "curfew lockout kid ", "curfew bedtime kid 21:00-07:00 --day s",
            "curfew grant kid 1h", "curfew status ",
        ]
        let (status, text) = try Self.shell(
            runner, "/usr/bin/timeout", ["120", "zsh", "-f", capture.path, functions.path] + lines, extra: ["HOME": runner.root.path])
        #expect(status == 0, "\(text)")
        #expect(
            text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) == [
                "kid kiddo", "supertuxkart", "apps lock logout network none", "sat sun", "1h 1h30m", "kid kiddo", "",
            ], "\(text)")
    }

    /// Runs a shell with the built `curfew` first on PATH, the runner's state directory and the
    /// repository's catalog (and `extra`), input from /dev/null; its exit status and what it printed.
    static func shell(
        _ runner: CurfewRunner, _ program: String, _ arguments: [String], extra: [String: String] = [:]
    ) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = "\(CurfewRunner.binDirectory.path):/usr/bin:/bin"
        environment["CURFEW_STATE_DIR"] = runner.stateDir
        environment["CURFEW_CATALOG_DIRS"] = runner.catalogDirectory
        environment.merge(extra) { $1 }
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    /// For each line given after the directory of completion functions: a new interactive zsh on a
    /// pseudo-terminal, compinit, the line and a Tab; prints the words offered (sorted, once each).
    /// `compadd` calls that only fill arrays (-O, -A, -D) pass through; the others are the offers.
    static let zshCapture = #"""
        zmodload zsh/zpty
        functions_dir=$1; shift
        for input in "$@"; do
          zpty z zsh -f -i
          # The markers are made by expansion, so the terminal's echo of these lines never holds them.
          zpty -w z "PS1=''; __m=OFF; fpath=($functions_dir \$fpath); autoload -U compinit; compinit -u -D"
          zpty -w z 'compadd () { if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi; local -a __hits; builtin compadd -A __hits "$@"; print -r -- "${__m}ERED ${(j: :)__hits}"; builtin compadd "$@" }'
          zpty -w z 'bindkey "^I" complete-word; comppostfuncs=(__done); __done () { print -r -- "${__m}FIN"; exit }'
          zpty -w z "$input"$'\t'
          hits=()
          while zpty -r z line; do
            # The terminal's carriage returns (line ends, redraws) are not words.
            line=${${line//$'\r'/}//$'\n'/}
            [[ $line == *OFFFIN* ]] && break
            [[ $line == *OFFERED\ * ]] && hits+=(${=${line#*OFFERED }})
          done
          zpty -d z
          print -r -- ${(j: :)${(ou)hits}}
        done
        """#
}
