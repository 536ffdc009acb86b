import ArgumentParser
import CurfewCore
import CurfewLinux
import CurfewSync

#if canImport(Glibc)
    import Glibc
#endif

struct UserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Add, list or remove managed users.",
        subcommands: [Add.self, List.self, Remove.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Manage a user, starting from the default policy (2h a day, bedtime 20:00-07:00).")

        @OptionGroup var options: PublishOptions
        @OptionGroup var admin: AdminOption
        @Argument(help: "The user's login name.", completion: Completions.users) var user: String

        func run() throws {
            try Policy.validateUserName(user)
            try admin.requireManageable(user)
            let workspace = Workspace(options.location)
            let scan = try workspace.scan(warningsFor: user)
            let current = scan.current(for: user)
            if let current, !current.removesUser {
                throw CLIError("user \(quoted(user)) is already managed (version \(current.version))", .invalidArguments)
            }
            if Accounts.account(named: user) == nil {
                Output.warning("there is no account \(quoted(user)) on this computer (yet); the policy applies once there is")
            }
            try announce(
                workspace, user: user, description: "\(user) is now managed with the default policy", unchanged: false,
                options: options
            ) {
                try workspace.publish(Policy.defaults(for: user), for: user, replacing: current, now: Workspace.now())
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the managed users.")

        @OptionGroup var location: LocationOptions
        @Flag(name: .long, help: "Print the result as JSON.") var json = false

        func run() throws {
            let workspace = Workspace(location)
            let current = try workspace.scan().currentByUser.sorted { $0.key < $1.key }
            var rows: [[String]] = [["USER", "VERSION", "DAILY LIMIT", "BEDTIME", "LOCKOUT"]]
            var entries: [UserJSON] = []
            for (user, summary) in current {
                guard let policy = try workspace.policyState(of: user).policy else { continue }
                rows.append([
                    user, "\(summary.version)", policy.dailyLimit.text, policy.bedtime.map { "\($0)" } ?? "off",
                    LockoutCommand.summary(policy),
                ])
                entries.append(UserJSON(user: user, version: summary.version, record: summary.id, policy: policy.json))
            }
            workspace.finish()
            if json {
                Output.json(entries)
            } else if current.isEmpty {
                Output.line("no managed users (add one with curfew user add USER)")
            } else {
                table(rows, indent: "").forEach { Output.line($0) }
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop managing a user (their usage history is kept).")

        @OptionGroup var options: PublishOptions
        @Argument(help: "The user's login name.", completion: Completions.users) var user: String
        @Flag(name: .long, help: "Do not ask for confirmation.") var yes = false

        func run() throws {
            let workspace = Workspace(options.location)
            let (_, current) = try workspace.currentPolicy(of: user)
            guard yes || Output.confirm("Stop managing \(user)? Their limits and bedtime will no longer apply.") else {
                throw CLIError("not confirmed; nothing changed", .failure)
            }
            try announce(
                workspace, user: user, description: "\(user) is no longer managed", unchanged: false, options: options
            ) {
                try workspace.publish(nil, for: user, replacing: current, now: Workspace.now())
            }
        }
    }
}

struct Reset: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Put a user's policy back to the defaults (2h a day, bedtime 20:00-07:00, no app rules).")

    @OptionGroup var options: PublishOptions
    @Argument(help: "The user's login name.", completion: Completions.users) var user: String
    @Flag(name: .long, help: "Do not ask for confirmation.") var yes = false

    func run() throws {
        let workspace = Workspace(options.location)
        let (old, current) = try workspace.currentPolicy(of: user)
        let new = Policy.defaults(for: user)
        if new != old {
            guard yes || Output.confirm("Reset every rule of \(user) to the defaults?") else {
                throw CLIError("not confirmed; nothing changed", .failure)
            }
        }
        try announce(
            workspace, user: user,
            description: new == old ? "\(user) already has the default policy" : "\(user) is back to the default policy",
            unchanged: new == old, options: options
        ) {
            try workspace.publish(new, for: user, replacing: current, now: Workspace.now())
        }
    }
}

/// `--allow-admin`, for the commands that make a user managed: root (any account of uid 0) is never
/// managed, and an administrator (group sudo, wheel or admin) only when the parent says so, since the
/// parent may be locking themself out of their own computer.
struct AdminOption: ParsableArguments {
    @Flag(name: .long, help: "Manage the user even if they are an administrator (group sudo, wheel or admin).")
    var allowAdmin = false

    /// `newlyManaged`: whether the command makes the user managed (an administrator already managed
    /// with --allow-admin keeps being edited without it).
    func requireManageable(_ user: String, newlyManaged: Bool = true) throws {
        guard !Accounts.isSuperuser(user) else {
            throw CLIError("root is never managed (Curfew never locks out the administrator), got \(quoted(user)), an account of uid 0", .invalidArguments)
        }
        let groups = newlyManaged ? Accounts.administratorGroups(of: user) : []
        guard !groups.isEmpty else { return }
        let list = groups.joined(separator: ", ")
        guard allowAdmin else {
            throw CLIError(
                "administrators are managed only with --allow-admin, got \(quoted(user)), a member of \(list) (managing them may lock a parent out)",
                .invalidArguments)
        }
        Output.warning("\(user) is an administrator (\(list)): at bedtime or with no time left they cannot log in, use sudo or su; make sure another administrator can")
    }
}

/// One managed user in `curfew user list --json`: the record in force and its policy document.
struct UserJSON: Encodable {
    var user: String
    var version: Int
    var record: String
    var policy: JSONValue
}
