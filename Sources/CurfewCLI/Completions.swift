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
