import ArgumentParser
import CurfewCore
import CurfewSync
import Foundation

/// What the shells' completions offer (bash, zsh and fish scripts from `curfew
/// --generate-completion-script`): managed users and catalog apps are asked of `curfew` itself when
/// the shell completes (the users the agent noted in the state directory, readable by a parent; the
/// apps of the catalog's directories); lockout actions, weekdays and durations are fixed lists.
enum Completions {
    static let users = CompletionKind.custom { _, _, prefix in
        let environment = ProcessInfo.processInfo.environment
        let state = Locations.stateDirectory(nil, environment: environment)
        return (ManagedUsers.read(stateDirectory: state) ?? []).filter { $0.hasPrefix(prefix) }.sorted()
    }

    static let apps = CompletionKind.custom { _, _, prefix in
        let directories = CatalogFiles.directories(environment: ProcessInfo.processInfo.environment)
        let catalog = try? CatalogFiles.load(directories: directories)
        return (catalog?.definitions.map(\.name) ?? []).filter { $0.hasPrefix(prefix) }.sorted()
    }

    static let lockouts = CompletionKind.list(Lockout.allCases.map(\.rawValue))

    static let weekdays = CompletionKind.list(["mon", "tue", "wed", "thu", "fri", "sat", "sun"])

    static let durations = CompletionKind.list(["15m", "30m", "45m", "1h", "1h30m", "2h", "3h", "4h"])

    static let limits = CompletionKind.list(["15m", "30m", "45m", "1h", "1h30m", "2h", "3h", "4h", "0", "unlimited"])
}

extension Completions {
    /// `curfew --generate-completion-script fish`, made to work with fish 3 (Debian 12 ships 3.6).
    /// ArgumentParser's script passes the cursor's place in the current token to `curfew ---completion`
    /// as `commandline -o -tC`, which fish before 4 answers with nothing: the call then lacks an
    /// argument and `curfew` fails ("Invalid state while parsing"), so users and apps were never
    /// offered. On fish 3 the token's length up to the cursor (`commandline -ct`) is that place.
    static func fishScript() -> String {
        patchFish(Curfew.completionScript(for: .fish))
    }

    static func patchFish(_ script: String) -> String {
        script.replacingOccurrences(of: fishTokensBefore, with: fishTokensAfter)
    }

    static let fishTokensBefore = """
        function __curfew_tokens
            if test (string split -m 1 -f 1 -- . "$FISH_VERSION") -gt 3
                commandline --tokens-raw $argv
            else
                commandline -o $argv
            end
        end
        """

    static let fishTokensAfter = """
        function __curfew_tokens
            if test (string split -m 1 -f 1 -- . "$FISH_VERSION") -gt 3
                commandline --tokens-raw $argv
            else if test "$argv" = -tC
                # fish 3: the cursor's place in the current token is the length of the token up to it
                string length -- (commandline -ct)
            else
                commandline -o $argv
            end
        end
        """

    /// Whether `arguments` ask for the fish script (`--generate-completion-script fish` or `=fish`).
    static func asksForFishScript(_ arguments: [String]) -> Bool {
        arguments == ["--generate-completion-script", "fish"] || arguments == ["--generate-completion-script=fish"]
    }
}
