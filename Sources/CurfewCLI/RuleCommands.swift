import ArgumentParser
import Foundation
import CurfewCore

struct Limit: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set a user's daily screen-time limit, or a weekday's.",
        discussion: """
            DURATION is 0..8h in steps of 15 minutes (90m, 1h30m, 2h, 0 for no screen time) or unlimited. \
            With --day it sets an override for those weekdays; --day DAY --clear removes the override. \
            --computers all makes the daily limits count the user's screen time on every family computer \
            that shares this directory (from the usage summaries the agents write there); --computers this \
            (the default) counts this computer's time only. It may be given alone: curfew limit kid --computers all. \
            --week sets a weekly budget besides the daily limits (up to 56h in steps of 15 minutes, or off; \
            weeks start on Monday in the policy's time zone): curfew limit kid --week 10h.
            """)

    @OptionGroup var options: PublishOptions
    @Argument(help: "The user's login name.", completion: Completions.users) var user: String
    @Argument(help: "90m, 1h30m, 2h, 0 or unlimited.", completion: Completions.limits) var duration: String?
    @Option(name: .long, help: ArgumentHelp("Only on these weekdays (mon..sun, repeatable or comma-separated).", valueName: "day"), completion: Completions.weekdays)
    var day: [String] = []
    @Flag(name: .long, help: "Remove the weekday override given with --day.") var clear = false
    @Option(name: .long, help: ArgumentHelp("Whose screen time the limits count: this computer's or all computers'.", valueName: "this|all"))
    var computers: String?
    @Option(name: .long, help: ArgumentHelp("A weekly budget (10h, 12h30m) or off.", valueName: "duration"))
    var week: String?

    func run() throws {
        let days = try parseDays(day)
        let scope = try computers.map { text in try LimitScope.parse(text) }
        if let week {
            guard duration == nil, !clear, days.isEmpty, scope == nil else {
                throw CLIError("--week is given alone: curfew limit USER --week 10h (or off)", .invalidArguments)
            }
            let text = week.lowercased()
            let minutes: Int? = text == "off" || text == "unlimited" ? nil : try TimeAllowance.parseMinutes(week)
            try Policy.validateWeekly(minutes)
            func shown(_ value: Int?) -> String { value.map { TimeAllowance.format(minutes: $0) } ?? "off" }
            try editPolicy(options, user: user) { policy in policy.weeklyLimitMinutes = minutes } describe: { old, new in
                old.weeklyLimitMinutes == new.weeklyLimitMinutes
                    ? "\(user): weekly limit is already \(shown(new.weeklyLimitMinutes))"
                    : "\(user): weekly limit is now \(shown(new.weeklyLimitMinutes)) (was \(shown(old.weeklyLimitMinutes)))"
            }
            return
        }
        if let scope, duration == nil, !clear, days.isEmpty {
            try editPolicy(options, user: user) { policy in policy.limitScope = scope } describe: { old, new in
                "\(user): daily limit \(new == old ? "already counts" : "now counts") \(Limit.describe(scope))"
            }
            return
        }
        let allowance = try valueOrClear(duration, clear: clear, days: days, name: "duration", forms: "90m, 1h30m, 2h, 0 or unlimited")
            .map { text in
                let parsed = try TimeAllowance.parse(text)
                let rule = days.isEmpty ? "daily limit" : "daily limit for \(days[0].rawValue)"
                try Policy.validateDaily(parsed, rule: rule)
                return parsed
            }
        try editPolicy(options, user: user) { policy in
            if days.isEmpty {
                policy.dailyLimit = allowance!
            } else {
                for day in days { policy.weekdayLimits[day] = allowance }
            }
            if let scope { policy.limitScope = scope }
        } describe: { old, new in
            let scopeNote = new.limitScope == old.limitScope ? "" : ", counting \(Limit.describe(new.limitScope))"
            if days.isEmpty {
                return (new.dailyLimit == old.dailyLimit
                    ? "\(user): daily limit is already \(new.dailyLimit.text)"
                    : "\(user): daily limit is now \(new.dailyLimit.text) (was \(old.dailyLimit.text))") + scopeNote
            }
            if let allowance {
                return "\(user): limit on \(dayList(days)) is \(new == old ? "already" : "now") \(allowance.text)"
            }
            return "\(user): \(dayList(days)) \(new == old ? "already uses" : "now uses") the daily limit (\(new.dailyLimit.text))"
        }
    }
}

extension Limit {
    static func describe(_ scope: LimitScope) -> String {
        switch scope {
        case .thisComputer: "this computer's screen time only"
        case .allComputers: "screen time on every family computer"
        }
    }
}

struct Bedtime: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set a user's bedtime window, or a weekday's.",
        discussion: """
            WINDOW is HH:MM-HH:MM in local time (21:00-07:00 crosses midnight) or off. A weekday's window \
            is keyed by the day it starts: --day fri sets Friday night (until Saturday morning). \
            --day DAY --clear removes the override.
            """)

    @OptionGroup var options: PublishOptions
    @Argument(help: "The user's login name.", completion: Completions.users) var user: String
    @Argument(help: "HH:MM-HH:MM or off.") var window: String?
    @Option(name: .long, help: ArgumentHelp("Only for windows starting on these weekdays.", valueName: "day"), completion: Completions.weekdays)
    var day: [String] = []
    @Flag(name: .long, help: "Remove the weekday override given with --day.") var clear = false

    func run() throws {
        let days = try parseDays(day)
        let newWindow: BedtimeWindow?? = try valueOrClear(
            window, clear: clear, days: days, name: "bedtime window", forms: "HH:MM-HH:MM or off"
        ).map { text in try BedtimeWindow.parse(text) }
        func text(_ window: BedtimeWindow?) -> String { window.map { "\($0)" } ?? "off" }
        try editPolicy(options, user: user) { policy in
            if days.isEmpty {
                policy.bedtime = newWindow!
            } else {
                for day in days { policy.weekdayBedtimes[day] = newWindow }
            }
        } describe: { old, new in
            if days.isEmpty {
                return new == old
                    ? "\(user): bedtime is already \(text(new.bedtime))"
                    : "\(user): bedtime is now \(text(new.bedtime)) (was \(text(old.bedtime)))"
            }
            if let newWindow {
                return "\(user): bedtime starting on \(dayList(days)) is \(new == old ? "already" : "now") \(text(newWindow))"
            }
            return "\(user): \(dayList(days)) \(new == old ? "already uses" : "now uses") the usual bedtime (\(text(new.bedtime)))"
        }
    }
}

struct Warnings: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set when a user is warned before a limit or bedtime (minutes, e.g. 15,5,1; or off).")

    @OptionGroup var options: PublishOptions
    @Argument(help: "The user's login name.", completion: Completions.users) var user: String
    @Argument(help: "Comma-separated minutes, e.g. 15,5,1, or off.") var minutes: String

    func run() throws {
        var values: [Int] = []
        if minutes.lowercased() != "off" {
            for part in minutes.split(separator: ",", omittingEmptySubsequences: false) {
                let text = part.trimmingCharacters(in: .whitespaces)
                guard let value = Int(text), text.allSatisfy(\.isASCII) else {
                    throw CLIError(
                        "warnings must be comma-separated whole minutes like 15,5,1 or off, got \(quoted(minutes))",
                        .invalidArguments)
                }
                values.append(value)
            }
        }
        try Policy.validateWarnings(values)
        func text(_ list: [Int]) -> String {
            list.isEmpty ? "off" : list.map(String.init).joined(separator: ", ") + " minutes before"
        }
        try editPolicy(options, user: user) { policy in
            policy.warnMinutes = values
        } describe: { old, new in
            "\(user): warnings are \(new.warnMinutes == old.warnMinutes ? "already" : "now") \(text(new.warnMinutes.sorted(by: >)))"
        }
    }
}

struct LockoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lockout",
        abstract: "Set what happens at zero and at bedtime: logout, lock, apps, network or none.",
        discussion: """
            logout ends the sessions and refuses logins until use is allowed; lock locks the sessions and \
            locks again on unlock, ending a session that cannot be locked (a text console, ssh, a desktop with \
            no screen locker); apps stops the tracked apps that are not always allowed; network cuts the \
            user's network traffic (loopback excepted) and lets the session and offline apps go on, logins \
            included; none only monitors. --at bedtime sets the lockout at bedtime and in downtime windows, \
            --at limit the one at the daily or weekly limit and in breaks (bedtime keeps what it had); \
            without --at both are set. Example: curfew lockout kid network --at bedtime.
            """)

    @OptionGroup var options: PublishOptions
    @Argument(help: "The user's login name.", completion: Completions.users) var user: String
    @Argument(help: "logout, lock, apps, network or none.", completion: Completions.lockouts) var action: String
    @Option(name: .long, help: ArgumentHelp("bedtime or limit (default: both).", valueName: "cause")) var at: String?

    func run() throws {
        let lockout = try Lockout.parse(action)
        let cause = try at.map { text in try LockoutCause.parse(text) }
        try editPolicy(options, user: user) { policy in
            LockoutCommand.set(lockout, at: cause, in: &policy)
        } describe: { old, new in
            LockoutCommand.describe(user: user, old: old, new: new, cause: cause)
        }
    }

    /// Sets the lockout for a cause (nil: both); `bedtimeLockout` is kept only where it differs from
    /// `lockout`, so a policy whose lockouts agree reads as before the field existed.
    static func set(_ lockout: Lockout, at cause: LockoutCause?, in policy: inout Policy) {
        switch cause {
        case nil:
            policy.lockout = lockout
            policy.bedtimeLockout = nil
        case .limit:
            policy.bedtimeLockout = policy.lockout(for: .bedtime)
            policy.lockout = lockout
        case .bedtime:
            policy.bedtimeLockout = lockout
        }
        if policy.bedtimeLockout == policy.lockout { policy.bedtimeLockout = nil }
    }

    static func describe(user: String, old: Policy, new: Policy, cause: LockoutCause?) -> String {
        let same = old.lockout(for: .limit) == new.lockout(for: .limit) && old.lockout(for: .bedtime) == new.lockout(for: .bedtime)
        let verb = same ? "already" : "now"
        switch cause {
        case nil:
            let was = old.bedtimeLockout.map { " (was \($0.rawValue) at bedtime)" } ?? ""
            return "\(user): lockout is \(verb) \(new.lockout.rawValue)\(same ? "" : was)"
        case .limit:
            return "\(user): lockout at the limit is \(verb) \(new.lockout.rawValue) (at bedtime: \(new.lockout(for: .bedtime).rawValue))"
        case .bedtime:
            return "\(user): lockout at bedtime is \(verb) \(new.lockout(for: .bedtime).rawValue) (at the limit: \(new.lockout.rawValue))"
        }
    }

    /// `logout`, or `logout at the limit, network at bedtime` when they differ.
    static func summary(_ policy: Policy) -> String {
        guard let bedtime = policy.bedtimeLockout, bedtime != policy.lockout else { return policy.lockout.rawValue }
        return "\(policy.lockout.rawValue) at the limit, \(bedtime.rawValue) at bedtime"
    }
}

struct TimeZoneCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "timezone",
        abstract: "Set the time zone a user's days and bedtimes are counted in (an IANA name, or system).")

    @OptionGroup var options: PublishOptions
    @Argument(help: "The user's login name.", completion: Completions.users) var user: String
    @Argument(help: "An IANA zone such as Europe/Berlin, or system for this computer's zone.") var zone: String

    func run() throws {
        let timezone: String? = zone == "system" ? nil : zone
        if let timezone { try Policy.validateTimeZone(timezone) }
        try editPolicy(options, user: user) { policy in
            policy.timezone = timezone
        } describe: { old, new in
            "\(user): time zone is \(old == new ? "already" : "now") \(timezone ?? "the computer's own")"
        }
    }
}

/// The value argument of `limit` and `bedtime`: required, unless `--clear` removes the weekday
/// override given with `--day` (then nil).
func valueOrClear(_ value: String?, clear: Bool, days: [Weekday], name: String, forms: String) throws -> String? {
    switch (value, clear) {
    case (let text?, false): return text
    case (nil, true):
        guard !days.isEmpty else { throw CLIError("--clear needs --day DAY", .invalidArguments) }
        return nil
    case (_?, true): throw CLIError("give either a \(name) or --clear, not both", .invalidArguments)
    case (nil, false): throw CLIError("missing \(name) (\(forms))", .invalidArguments)
    }
}
