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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["--norc", "--noprofile", "-c", driver]
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = "\(CurfewRunner.binDirectory.path):/usr/bin:/bin"
        environment["CURFEW_STATE_DIR"] = runner.stateDir
        environment["CURFEW_CATALOG_DIRS"] = runner.catalogDirectory
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qec", "fish --no-config -i -c \"\(driver)\"", "/dev/null"]
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = "\(CurfewRunner.binDirectory.path):/usr/bin:/bin"
        environment["CURFEW_STATE_DIR"] = runner.stateDir
        environment["CURFEW_CATALOG_DIRS"] = runner.catalogDirectory
        environment["TERM"] = "dumb"
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .replacingOccurrences(of: "\r", with: "")
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
        #expect(
            text.split(separator: "\n").map(String.init) == [
                "kid kiddo", "supertuxkart", "logout lock apps none network", "sat sun", "1h 1h30m", "kid kiddo",
            ], "\(text)")
    }
}
