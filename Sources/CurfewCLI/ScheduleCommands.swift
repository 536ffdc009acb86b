import ArgumentParser
import CurfewCore
import CurfewSync
import Foundation

struct DowntimeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "downtime",
        abstract: "Add, remove or list a user's downtime windows (named blocked periods besides bedtime).",
        discussion: """
            curfew downtime USER add NAME HH:MM-HH:MM [--day DAYS]; curfew downtime USER remove NAME; \
            curfew downtime USER list. NAME is 1 to 32 letters, digits, '-' or '_'. A window is keyed by the \
            day it starts and may cross midnight (22:00-01:00); --day takes mon-fri, sat,sun, weekend, \
            weekdays or single days (default: every day). At most 16 windows. Adding a window under an \
            existing name replaces it. Always-allowed apps stay usable, as at bedtime.
            """)

    @OptionGroup var options: PublishOptions
    @Argument(help: "The user's login name.", completion: Completions.users) var user: String
    @Argument(help: "add, remove or list.") var action: String
    @Argument(help: "The window's name.") var name: String?
    @Argument(help: "HH:MM-HH:MM (add only).") var window: String?
    @Option(name: .long, help: ArgumentHelp("The days the window starts on (add only).", valueName: "days"))
    var day: [String] = []

    func run() throws {
        switch action {
        case "list":
            try noExtra(name == nil && window == nil && day.isEmpty, "downtime USER list takes no name, window or --day")
            let workspace = Workspace(options.location)
            let (policy, _) = try workspace.currentPolicy(of: user)
            workspace.finish()
            if policy.downtime.isEmpty {
                Output.line("\(user): no downtime windows")
                return
            }
            table(policy.downtime.map { [$0.name, "\($0.start)-\($0.end)", Weekday.describe($0.days)] }, indent: "")
                .forEach { Output.line($0) }
        case "add":
            guard let name else { throw CLIError("missing window name (e.g. curfew downtime \(user) add school 08:00-15:00 --day mon-fri)", .invalidArguments) }
            guard let window else { throw CLIError("missing downtime window HH:MM-HH:MM for \(name)", .invalidArguments) }
            let days = day.isEmpty ? Weekday.allCases : try parseDays(day)
            let added = try DowntimeWindow.parse(name: name, window: window, days: days)
            try editPolicy(options, user: user) { policy in
                policy.downtime.removeAll { $0.name == name }
                policy.downtime.append(added)
                policy.sortScheduleLists()
            } describe: { old, _ in
                let shown = "\(added.start)-\(added.end) \(Weekday.describe(added.days))"
                guard let previous = old.downtime.first(where: { $0.name == name }) else {
                    return "\(user): downtime \(name) is now \(shown)"
                }
                if previous == added { return "\(user): downtime \(name) is already \(shown)" }
                return "\(user): downtime \(name) is now \(shown) (was \(previous.start)-\(previous.end) \(Weekday.describe(previous.days)))"
            }
        case "remove":
            guard let name else { throw CLIError("missing window name to remove", .invalidArguments) }
            try noExtra(window == nil && day.isEmpty, "downtime USER remove NAME takes no window or --day")
            try editPolicy(options, user: user) { policy in
                guard policy.downtime.contains(where: { $0.name == name }) else {
                    throw CLIError("user \(user) has no downtime window \(quoted(name))", .invalidArguments)
                }
                policy.downtime.removeAll { $0.name == name }
            } describe: { old, _ in
                let previous = old.downtime.first { $0.name == name }!
                return "\(user): downtime \(name) removed (was \(previous.start)-\(previous.end) \(Weekday.describe(previous.days)))"
            }
        default:
            throw CLIError("downtime action must be add, remove or list, got \(quoted(action))", .invalidArguments)
        }
    }
}

struct BreaksCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "breaks",
        abstract: "Make a user pause: after AFTER of screen time without a pause of LENGTH, a break of LENGTH.",
        discussion: """
            curfew breaks USER 45m 10m, or curfew breaks USER off. AFTER is 15m..4h and LENGTH 5m..1h, both \
            in steps of 5 minutes. During a break the lockout applies and logins are refused; the child is \
            warned before it, like before a limit.
            """)

    @OptionGroup var options: PublishOptions
    @Argument(help: "The user's login name.", completion: Completions.users) var user: String
    @Argument(help: "Screen time before a break (45m), or off.") var after: String
    @Argument(help: "The break's length (10m).") var length: String?

    func run() throws {
        var breaks: Breaks? = nil
        if after.lowercased() == "off" {
            try noExtra(length == nil, "breaks USER off takes nothing more")
        } else {
            guard let length else { throw CLIError("missing break length (e.g. curfew breaks \(user) 45m 10m)", .invalidArguments) }
            let value = Breaks(
                afterMinutes: try TimeAllowance.parseMinutes(after),
                lengthMinutes: try TimeAllowance.parseMinutes(length))
            try value.validate()
            breaks = value
        }
        func text(_ value: Breaks?) -> String { value.map { "\($0)" } ?? "off" }
        try editPolicy(options, user: user) { policy in
            policy.breaks = breaks
        } describe: { old, new in
            old.breaks == new.breaks
                ? "\(user): breaks are already \(text(new.breaks))"
                : "\(user): breaks are now \(text(new.breaks)) (were \(text(old.breaks)))"
        }
    }
}

struct ExceptionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exception",
        abstract: "Set, remove or list days with other rules than usual (holidays, free-play days).",
        discussion: """
            curfew exception USER DATE[..DATE] [--limit DURATION] [--bedtime HH:MM-HH:MM|off] [--downtime off]; \
            curfew exception USER remove DATE; curfew exception USER list. A rule left out keeps the usual \
            one; the bedtime is the one starting on those days; --downtime off lifts the downtime windows. \
            Ranges may not overlap (at most 64, each at most 366 days); ranges already over are removed \
            when an exception is set.
            """)

    @OptionGroup var options: PublishOptions
    @Argument(help: "The user's login name.", completion: Completions.users) var user: String
    @Argument(help: "YYYY-MM-DD, YYYY-MM-DD..YYYY-MM-DD, remove or list.") var dates: String
    @Argument(help: "The date whose exception to remove (remove only).") var removing: String?
    @Option(name: .long, help: ArgumentHelp("The daily limit on those days (90m, 2h, 0 or unlimited).", valueName: "duration"))
    var limit: String?
    @Option(name: .long, help: ArgumentHelp("The bedtime starting on those days, or off.", valueName: "window"))
    var bedtime: String?
    @Option(name: .long, help: ArgumentHelp("off: no downtime windows on those days.", valueName: "off"))
    var downtime: String?

    var hasRules: Bool { limit != nil || bedtime != nil || downtime != nil }

    func run() throws {
        switch dates {
        case "list":
            try noExtra(removing == nil && !hasRules, "exception USER list takes nothing more")
            let workspace = Workspace(options.location)
            let (policy, _) = try workspace.currentPolicy(of: user)
            workspace.finish()
            if policy.exceptions.isEmpty {
                Output.line("\(user): no exceptions")
                return
            }
            table(policy.exceptions.map { [$0.range, ExceptionCommand.rules($0)] }, indent: "").forEach { Output.line($0) }
        case "remove":
            guard let removing else { throw CLIError("missing the date of the exception to remove", .invalidArguments) }
            try noExtra(!hasRules, "exception USER remove DATE takes no --limit, --bedtime or --downtime")
            let (from, to) = try PolicyException.parseRange(removing)
            try editPolicy(options, user: user) { policy in
                guard policy.exceptions.contains(where: { $0.from == from && (from == to || $0.to == to) }) else {
                    throw CLIError("user \(user) has no exception starting \(removing)", .invalidArguments)
                }
                policy.exceptions.removeAll { $0.from == from }
            } describe: { old, _ in
                let previous = old.exceptions.first { $0.from == from }!
                return "\(user): exception \(previous.range) removed (was \(ExceptionCommand.rules(previous)))"
            }
        default:
            try noExtra(removing == nil, "exception USER DATE takes one date or range (YYYY-MM-DD..YYYY-MM-DD)")
            guard hasRules else {
                throw CLIError("an exception needs --limit, --bedtime or --downtime off", .invalidArguments)
            }
            let (from, to) = try PolicyException.parseRange(dates)
            var exception = PolicyException(from: from, to: to)
            if let limit {
                let allowance = try TimeAllowance.parse(limit)
                exception.dailyLimit = allowance
            }
            if let bedtime { exception.bedtime = .some(try BedtimeWindow.parse(bedtime)) }
            if let downtime {
                guard downtime.lowercased() == "off" else {
                    throw CLIError("--downtime takes off (no downtime windows those days), got \(quoted(downtime))", .invalidArguments)
                }
                exception.liftsDowntime = true
            }
            try exception.validate()
            var pruned: [PolicyException] = []
            try editPolicy(options, user: user) { policy in
                let today = Schedule.zone(for: policy).localTime(at: Workspace.now()).date
                guard to >= today else {
                    throw CLIError("exception \(exception.range) is already over (today is \(today))", .invalidArguments)
                }
                pruned = policy.exceptions.filter { $0.to < today }
                policy.exceptions.removeAll { $0.from == from || $0.to < today }
                policy.exceptions.append(exception)
                policy.sortScheduleLists()
            } describe: { old, _ in
                let note = pruned.isEmpty ? "" : "; removed past \(pruned.map(\.range).joined(separator: ", "))"
                guard let previous = old.exceptions.first(where: { $0.from == from }) else {
                    return "\(user): exception \(exception.range) is now \(ExceptionCommand.rules(exception))\(note)"
                }
                if previous == exception { return "\(user): exception \(exception.range) is already \(ExceptionCommand.rules(exception))\(note)" }
                return "\(user): exception \(exception.range) is now \(ExceptionCommand.rules(exception)) (was \(ExceptionCommand.rules(previous)))\(note)"
            }
        }
    }

    /// `limit 3h, bedtime 22:00-08:00, no downtime`.
    static func rules(_ exception: PolicyException) -> String {
        String(exception.description.dropFirst(exception.range.count + 2))
    }
}

struct AllowanceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "allowance",
        abstract: "Let a user take extra time without asking (curfew extend), a few times a week.",
        discussion: """
            curfew allowance USER 15m --per-week 3, or curfew allowance USER off. The extra time is 5m..2h in \
            steps of 5 minutes, at most 21 times a week; each use is an event a parent sees in curfew requests --all.
            """)

    @OptionGroup var options: PublishOptions
    @Argument(help: "The user's login name.", completion: Completions.users) var user: String
    @Argument(help: "Minutes added per use (15m), or off.") var duration: String
    @Option(name: .customLong("per-week"), help: ArgumentHelp("How many times a week.", valueName: "n")) var perWeek: String?

    func run() throws {
        var allowance: SelfExtension? = nil
        if duration.lowercased() == "off" {
            try noExtra(perWeek == nil, "allowance USER off takes no --per-week")
        } else {
            guard let perWeek else { throw CLIError("missing --per-week N (how many times a week)", .invalidArguments) }
            guard let times = Int(perWeek), perWeek.allSatisfy(\.isASCII) else {
                throw CLIError("uses per week must be a whole number, got \(quoted(perWeek))", .invalidArguments)
            }
            let value = SelfExtension(minutes: try TimeAllowance.parseMinutes(duration), perWeek: times)
            try value.validate()
            allowance = value
        }
        func text(_ value: SelfExtension?) -> String { value.map { "\($0)" } ?? "off" }
        try editPolicy(options, user: user) { policy in
            policy.selfExtension = allowance
        } describe: { old, new in
            old.selfExtension == new.selfExtension
                ? "\(user): self-service extra time is already \(text(new.selfExtension))"
                : "\(user): self-service extra time is now \(text(new.selfExtension)) (was \(text(old.selfExtension)))"
        }
    }
}

/// Refuses arguments a form of a command does not take.
func noExtra(_ fine: Bool, _ message: String) throws {
    guard fine else { throw CLIError(message, .invalidArguments) }
}

struct Extend: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Take the extra time your allowance gives, without asking (run by a child; the agent records it).",
        discussion: """
            How much and how often a week is the parent's choice (curfew allowance USER 15m --per-week 3). Past \
            that the agent refuses with exit status 77; ask with curfew request instead. Parents see each use in \
            curfew requests --all.
            """)

    @Option(help: ArgumentHelp("The agent's socket (default: $CURFEW_SOCKET, else /run/curfew/curfewd.sock).", valueName: "path"))
    var socket: String?
    @Flag(name: .long, help: "Print the result as JSON.") var json = false

    func run() throws {
        let socketPath = Locations.socket(socket, environment: ProcessInfo.processInfo.environment)
        guard let (_, reply) = AgentClient.exchange(.extend, socket: socketPath) else {
            throw CLIError("the agent is not running (cannot reach \(socketPath))", .unavailable)
        }
        guard reply.ok, let use = reply.extended else { throw AgentClient.error(reply) }
        Output.line(json ? use.json.prettyString : use.message)
    }
}
