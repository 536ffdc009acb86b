import ArgumentParser
import CurfewCore
import CurfewSync
import Foundation

/// The `curfew` command: parents edit policy and read what it means; children see their time.
public struct Curfew: ParsableCommand {
    public static let version = "0.1.0"

    public static let configuration = CommandConfiguration(
        commandName: "curfew",
        abstract: "Family screen-time rules for Linux: limits, bedtimes and app rules that hold.",
        version: version,
        subcommands: [
            Init.self, UserCommand.self, Limit.self, Bedtime.self, AppCommand.self, Warnings.self,
            LockoutCommand.self, DowntimeCommand.self, BreaksCommand.self, ExceptionCommand.self, AllowanceCommand.self,
            TimeZoneCommand.self, Reset.self, PolicyCommand.self, ScheduleCommand.self,
            Status.self, Report.self, Events.self, Grant.self, Request.self, Extend.self, Requests.self, Approve.self, Deny.self, SyncCommand.self,
            CheckLogin.self, KeyCommand.self, PINCommand.self, Pair.self, Join.self,
        ])

    public init() {}

    /// Parses `arguments`, runs the command, and returns the exit status; errors are printed as one
    /// line on stderr, help and version on stdout. This is the one place errors are translated for
    /// people: commands throw the library's errors as they come (`CLIError(translating:)`).
    public static func main(arguments: [String]) -> Int32 {
        if ZoneDatabase.source == nil { SystemZones.install() }
        if Completions.asksForFishScript(arguments) {
            Output.line(Completions.fishScript())
            return ExitStatus.success.rawValue
        }
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
            return ExitStatus.success.rawValue
        } catch {
            if let translated = CLIError(translating: error) {
                Output.error(translated.message)
                return translated.status.rawValue
            }
            let code = exitCode(for: error)
            if code == .success {
                Output.line(fullMessage(for: error))
                return 0
            }
            if let exit = error as? ExitCode { return exit.rawValue }
            // ArgumentParser's own messages, and those of any other error: keep the first line, which
            // names the problem.
            let message = message(for: error).split(separator: "\n").first.map(String.init) ?? "invalid arguments"
            Output.error(message.hasPrefix("Error: ") ? String(message.dropFirst(7)) : message)
            return code == .validationFailure ? ExitStatus.invalidArguments.rawValue : code.rawValue
        }
    }
}

/// Editing commands publish the user's whole new policy as the next signed record.
struct PublishOptions: ParsableArguments {
    @OptionGroup var location: LocationOptions

    @OptionGroup var waiting: WaitOptions

    @Flag(name: .long, help: "Print the result as JSON.")
    var json = false
}

/// Loads `user`'s policy, applies `change`, validates the result, and publishes it unless nothing
/// changed. `describe` says what changed, for people.
func editPolicy(
    _ options: PublishOptions, user: String, change: (inout Policy) throws -> Void,
    describe: (_ old: Policy, _ new: Policy) -> String
) throws {
    let workspace = Workspace(options.location)
    let (old, current) = try workspace.currentPolicy(of: user)
    var new = old
    try change(&new)
    try new.validate()
    new.warnMinutes.sort(by: >)
    try announce(workspace, user: user, description: describe(old, new), unchanged: new == old, options: options) {
        try workspace.publish(new, for: user, replacing: current, now: Workspace.now())
    }
}

/// Prints what a command changed and publishes it, or says that nothing needed publishing; then waits
/// for the computers that announced themselves in the shared directory to confirm it (exit 75 if one
/// has not in time).
func announce(
    _ workspace: Workspace, user: String, description: String, unchanged: Bool, options: PublishOptions,
    publish: () throws -> (version: Int, id: String)
) throws {
    let waitSeconds = options.waiting.seconds
    let publishedAt = Date().timeIntervalSince1970
    let published = unchanged ? nil : try publish()
    workspace.finish()
    var answers: [ComputerAnswer] = []
    if let (_, id) = published, let seconds = waitSeconds {
        answers = waitForConfirmations(workspace.shared, recordId: id, publishedAt: publishedAt, seconds: seconds)
    }
    let missing = answers.filter { $0.confirmation == nil }
    if options.json {
        Output.json(
            PolicyChangeJSON(
                user: user, changed: !unchanged, version: published?.version, record: published?.id, message: description,
                computers: answers.map(\.json)))
    } else {
        guard let (version, id) = published else {
            Output.line("\(description); nothing to publish")
            return
        }
        Output.line(description)
        if answers.isEmpty && (waitSeconds != nil || !workspace.shared.hasAnyConfirmation()) {
            Output.line("published version \(version); no computer has confirmed it yet")
        } else {
            Output.line("published version \(version) as record \(id)")
            answers.forEach { Output.line(UntrustedText.terminal($0.line)) }
        }
    }
    if let (version, _) = published, !missing.isEmpty, let seconds = waitSeconds {
        throw CLIError(
            "not confirmed within \(String(format: "%g", seconds)) s by \(missing.map(\.host).joined(separator: ", ")) (version \(version) is published; they apply it when they next read the shared directory)",
            .notConfirmed)
    }
}

/// Parses a `--day` value list: `sat`, `sat,sun`, repeated options.
func parseDays(_ values: [String]) throws -> [Weekday] {
    var days: [Weekday] = []
    for value in values {
        for day in try Weekday.parseSet(value) where !days.contains(day) {
            days.append(day)
        }
    }
    return days.sorted()
}

func dayList(_ days: [Weekday]) -> String {
    days.count == 1 ? days[0].name : days.map(\.rawValue).joined(separator: ", ")
}

/// A policy command's `--json` output: the record it published (`null` when nothing changed) and
/// each computer's answer.
struct PolicyChangeJSON: Encodable {
    var user: String
    var changed: Bool
    @OrNull var version: Int?
    @OrNull var record: String?
    var message: String
    var computers: [ComputerAnswer.AnswerJSON]
}
