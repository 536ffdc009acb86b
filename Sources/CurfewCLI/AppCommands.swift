import ArgumentParser
import CurfewCore
import CurfewSync
import Foundation

struct AppCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app",
        abstract: "Block, limit or always allow an app for a user.",
        subcommands: [Block.self, LimitApp.self, Allow.self, Remove.self, List.self, Catalog.self])

    /// APP must be in the app catalog, unless --by-name says it is a program's file name.
    struct AppName: ParsableArguments {
        @Argument(help: "The user's login name.", completion: Completions.users) var user: String
        @Argument(help: "The app's name in the catalog (see curfew app catalog).", completion: Completions.apps) var app: String
        @Flag(name: .long, help: "APP is not in the catalog: match programs whose executable is named APP.")
        var byName = false

        func checked() throws -> String {
            try Policy.validateAppName(app)
            if !byName {
                let catalog = try loadCatalog()
                guard catalog.definition(named: app) != nil else {
                    throw CLIError(
                        "unknown app \(quoted(app)): not in the app catalog (see curfew app catalog; add --by-name to match an executable named \(app))",
                        .invalidArguments)
                }
            }
            return app
        }
    }

    static func set(_ options: PublishOptions, _ name: AppName, _ rule: AppRuleKind) throws {
        let app = try name.checked()
        try editPolicy(options, user: name.user) { policy in
            if let index = policy.apps.firstIndex(where: { $0.app == app }) {
                policy.apps[index].rule = rule
            } else {
                policy.apps.append(AppRule(app: app, rule: rule))
            }
        } describe: { old, new in
            "\(name.user): \(app) is \(old == new ? "already" : "now") \(describe(rule))"
        }
    }

    static func describe(_ rule: AppRuleKind) -> String {
        switch rule {
        case .block: "blocked"
        case .limit(let minutes): "limited to \(TimeAllowance.format(minutes: minutes)) a day"
        case .allow: "always allowed"
        }
    }

    struct Block: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Never allow an app.")
        @OptionGroup var options: PublishOptions
        @OptionGroup var name: AppName
        func run() throws { try AppCommand.set(options, name, .block) }
    }

    struct LimitApp: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "limit", abstract: "Allow an app for at most DURATION a day (15m steps up to 8h).")
        @OptionGroup var options: PublishOptions
        @OptionGroup var name: AppName
        @Argument(help: "90m, 1h30m, 2h.", completion: Completions.durations) var duration: String

        func run() throws {
            guard case .minutes(let minutes) = try TimeAllowance.parse(duration) else {
                throw CLIError(
                    "app limit for \(name.app) must be a duration, got \"unlimited\" (use curfew app allow or remove)",
                    .invalidArguments)
            }
            try Policy.validateAppLimit(minutes, app: name.app)
            try AppCommand.set(options, name, .limit(minutes: minutes))
        }
    }

    struct Allow: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Always allow an app: its time does not count and limits and bedtime do not stop it.")
        @OptionGroup var options: PublishOptions
        @OptionGroup var name: AppName
        func run() throws { try AppCommand.set(options, name, .allow) }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a user's rule for an app.")
        @OptionGroup var options: PublishOptions
        @Argument(help: "The user's login name.", completion: Completions.users) var user: String
        @Argument(help: "The app.", completion: Completions.apps) var app: String

        func run() throws {
            try editPolicy(options, user: user) { policy in
                guard let index = policy.apps.firstIndex(where: { $0.app == app }) else {
                    throw CLIError("user \(user) has no rule for app \(quoted(app))", .invalidArguments)
                }
                policy.apps.remove(at: index)
            } describe: { _, _ in
                "\(user): rule for \(app) removed"
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a user's app rules.")
        @OptionGroup var location: LocationOptions
        @Argument(help: "The user's login name.", completion: Completions.users) var user: String
        @Flag(name: .long, help: "Print the result as JSON.") var json = false

        func run() throws {
            let workspace = Workspace(location)
            let (policy, _) = try workspace.currentPolicy(of: user)
            workspace.finish()
            if json {
                guard case .object(let object) = policy.json, let apps = object["apps"] else { return }
                Output.line(apps.prettyString)
                return
            }
            if policy.apps.isEmpty {
                Output.line("\(user) has no app rules")
                return
            }
            let rows = policy.apps.sorted { $0.app < $1.app }.map { [$0.app, AppCommand.describe($0.rule)] }
            table(rows, indent: "").forEach { Output.line($0) }
        }
    }

    struct Catalog: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the apps Curfew knows ($CURFEW_CATALOG_DIRS, else /etc/curfew/apps and /usr/share/curfew/apps).")
        @Flag(name: .long, help: "Print the result as JSON.") var json = false

        func run() throws {
            let catalog = try loadCatalog()
            if json {
                Output.line(JSONValue.array(catalog.definitions.map(\.json)).prettyString)
                return
            }
            let rows = catalog.definitions.sorted { $0.name < $1.name }.map { [$0.name, $0.category.rawValue, $0.displayName] }
            table([["APP", "CATEGORY", "NAME"]] + rows, indent: "").forEach { Output.line($0) }
        }
    }
}

func loadCatalog() throws -> AppCatalog {
    let directories = CatalogFiles.directories(environment: ProcessInfo.processInfo.environment)
    do {
        return try CatalogFiles.load(directories: directories)
    } catch let error as PolicyError {
        throw CLIError("app catalog: \(error.message)", .badInputData)
    }
}
