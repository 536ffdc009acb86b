import ArgumentParser
import CurfewReports
import CurfewCore
import CurfewSync
import CurfewLinux
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

struct PolicyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "Show, export or import a user's whole policy.",
        subcommands: [Show.self, Export.self, Import.self])

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a user's policy.")
        @OptionGroup var location: LocationOptions
        @Argument(help: "The user's login name.", completion: Completions.users) var user: String
        @Flag(name: .long, help: "Print the policy as JSON (the documented field names).") var json = false

        func run() throws {
            let workspace = Workspace(location)
            let (policy, record) = try workspace.currentPolicy(of: user)
            let state = try workspace.policyState(of: user)
            let missing = workspace.missingRecordInForce(of: user)
            workspace.finish()
            if let missing {
                Output.warning(
                    "the record in force, version \(missing), is missing from the shared directory; this computer keeps enforcing it (the next change publishes it anew)"
                )
            }
            if json {
                Output.line(policy.json.prettyString)
            } else {
                PolicyCommand.describe(policy, record: record).forEach { Output.line($0) }
                PolicyCommand.describeMerge(state).forEach { Output.line($0) }
            }
        }
    }

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a user's policy as JSON, for editing or for policy import.")
        @OptionGroup var location: LocationOptions
        @Argument(help: "The user's login name.", completion: Completions.users) var user: String
        @Option(name: .long, help: ArgumentHelp("Write to this file instead of standard output.", valueName: "file"))
        var output: String?

        func run() throws {
            let workspace = Workspace(location)
            let (policy, _) = try workspace.currentPolicy(of: user)
            let text = policy.json.prettyString + "\n"
            if let output {
                do {
                    try Data(text.utf8).write(to: URL(fileURLWithPath: output), options: .atomic)
                } catch {
                    throw CLIError("cannot write \(output): \(error.localizedDescription)", .failure)
                }
            } else {
                print(text, terminator: "")
            }
            workspace.finish()
        }
    }

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace a user's whole policy with one from a JSON file (validated completely first).",
            discussion: """
                The file uses the field names of curfew policy show --json. Fields left out take their \
                defaults; unknown fields are errors. --user applies the file to that user (the files in \
                policies/ are templates without a user). An unmanaged user becomes managed.
                """)
        @OptionGroup var options: PublishOptions
        @OptionGroup var admin: AdminOption
        @Argument(help: "The policy file.") var file: String
        @Option(name: .long, help: ArgumentHelp("Apply the file to this user instead of its \"user\" field.", valueName: "user"))
        var user: String?

        func run() throws {
            if let user { try Policy.validateUserName(user) }
            let bytes: [UInt8]
            do {
                bytes = try Files.readRegularFile(file, maxBytes: 1 << 20)
            } catch {
                throw CLIError(error.description, error.isPermissionDenied ? .notPermitted : .invalidArguments)
            }
            let policy: Policy
            do {
                policy = try Policy.decode(try JSONValue.parse(bytes), userOverride: user)
            } catch let error as JSONSyntaxError {
                throw CLIError("policy file \(file): not valid JSON: \(error)", .badInputData)
            } catch let error as PolicyError {
                throw CLIError("policy file \(file): \(error.message)", .badInputData)
            }
            let workspace = Workspace(options.location)
            let state = try workspace.policyState(of: policy.user)
            let current = state.record
            let old = state.policy
            try admin.requireManageable(policy.user, newlyManaged: old == nil)
            let description =
                old == nil ? "\(policy.user) is now managed with the policy from \(file)"
                : old == policy ? "\(policy.user) already has the policy in \(file)"
                : "\(policy.user) now has the policy from \(file)"
            try announce(workspace, user: policy.user, description: description, unchanged: old == policy, options: options) {
                try workspace.publish(policy, for: policy.user, replacing: current, now: Workspace.now())
            }
        }
    }

    /// What the fold merged into the version in force, if anything:
    /// `merged 2 records of version 2: <id>, <id>` and, when fields were in conflict,
    /// `conflicting fields (the later record's value kept): dailyLimitMinutes`.
    static func describeMerge(_ state: PolicyMerge.Result) -> [String] {
        guard let top = state.top else { return [] }
        var lines = ["merged \(top.records.count) records of version \(top.version): \(top.records.joined(separator: ", "))"]
        if !top.conflicts.isEmpty {
            lines.append("conflicting fields (the later record's value kept): \(top.conflicts.joined(separator: ", "))")
        }
        if let fallback = top.fallback { lines.append(fallback) }
        return lines
    }

    /// A policy for people, one setting a line.
    static func describe(_ policy: Policy, record: RecordSummary) -> [String] {
        var rows: [[String]] = []
        rows.append(["daily limit", policy.dailyLimit.text])
        for (day, limit) in policy.weekdayLimits.sorted(by: { $0.key < $1.key }) {
            rows.append(["", "\(day.rawValue) \(limit.text)"])
        }
        if policy.limitScope == .allComputers { rows.append(["", "counts \(Limit.describe(.allComputers))"]) }
        if let weekly = policy.weeklyLimitMinutes { rows.append(["weekly limit", TimeAllowance.format(minutes: weekly)]) }
        rows.append(["bedtime", policy.bedtime.map { "\($0)" } ?? "off"])
        for (day, window) in policy.weekdayBedtimes.sorted(by: { $0.key < $1.key }) {
            rows.append(["", "\(day.rawValue) \(window.map { "\($0)" } ?? "off")"])
        }
        for (index, window) in policy.downtime.enumerated() {
            rows.append([index == 0 ? "downtime" : "", "\(window)"])
        }
        if let breaks = policy.breaks { rows.append(["breaks", "\(breaks)"]) }
        for (index, exception) in policy.exceptions.enumerated() {
            rows.append([index == 0 ? "exceptions" : "", "\(exception)"])
        }
        if let allowance = policy.selfExtension { rows.append(["extra time", "\(allowance) without asking"]) }
        if policy.apps.isEmpty {
            rows.append(["apps", "no rules"])
        }
        for (index, rule) in policy.apps.sorted(by: { $0.app < $1.app }).enumerated() {
            rows.append([index == 0 ? "apps" : "", "\(rule.app): \(AppCommand.describe(rule.rule))"])
        }
        rows.append([
            "warnings",
            policy.warnMinutes.isEmpty ? "off" : policy.warnMinutes.map(String.init).joined(separator: ", ") + " minutes before",
        ])
        rows.append(["lockout", LockoutCommand.summary(policy)])
        rows.append(["time zone", policy.timezone ?? "the computer's own (\(ZoneRules.system.identifier))"])
        return ["\(policy.user): version \(record.version), signed by key \(record.author) at \(utcTimestamp(record.time))"]
            + table(rows)
    }
}

struct ScheduleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schedule",
        abstract: "Show a day's allowed, bedtime and downtime periods for a user, in the policy's time zone.",
        discussion: """
            Also says what happens at the limit and at bedtime when that is not the default (logout): \
            the lockout of each cause (curfew lockout USER ACTION --at bedtime|limit).
            """)

    @OptionGroup var location: LocationOptions
    @Argument(help: "The user's login name (default: you).", completion: Completions.users) var user: String?
    @Option(name: .long, help: ArgumentHelp("The day, YYYY-MM-DD (default: today).", valueName: "date"))
    var date: String?
    @Flag(name: .long, help: "Print the result as JSON.") var json = false
    @Option(help: ArgumentHelp("The agent's socket, for a child's own schedule (default: $CURFEW_SOCKET, else /run/curfew/curfewd.sock).", valueName: "path"))
    var socket: String?

    func run() throws {
        let requested = try date.map { text in try LocalDate.parse(text) }
        let workspace = Workspace(location)
        let user = try self.user ?? ChildView.me()
        try Policy.validateUserName(user)
        // A child cannot read the state directory: their own rules come through the agent.
        let throughAgent = getuid() != 0 && !workspace.stateDirectoryReadable
        if throughAgent { try ChildView.requireOwn(user, what: "schedule") }
        let (policy, adjustments) =
            try throughAgent
            ? ChildView.rules(of: user, socket: socket)
            : (workspace.currentPolicy(of: user).policy, workspace.scan(warningsFor: user).adjustments[user] ?? [:])
        let zone = Schedule.zone(for: policy)
        let now = Workspace.now()
        let day = requested ?? zone.localTime(at: now).date
        let schedule = Schedule(policy: policy, zone: zone, adjustments: adjustments)
        // The day's grants, with last night's delay while its window runs into the day.
        let adjustment = schedule.adjustmentInForce(on: day, now: requested == nil ? now : zone.start(of: day))
        let periods = schedule.periods(on: day)
        workspace.finish()
        let limit = schedule.limitMinutes(on: day)
        let exception = schedule.exception(on: day)
        if json {
            Output.json(
                DayPreviewJSON(
                    user: user, date: "\(day)", timezone: zone.identifier, limitMinutes: limit, extraMinutes: adjustment.extraMinutes,
                    bedtimeDelayMinutes: adjustment.bedtimeDelayMinutes,
                    periods: periods.map { period in
                        .init(start: zone.iso8601(period.start), end: zone.iso8601(period.end), state: period.state.rawValue, window: period.window)
                    },
                    lockout: .init(limit: policy.lockout(for: .limit).rawValue, bedtime: policy.lockout(for: .bedtime).rawValue),
                    exception: exception?.range, weeklyLimitMinutes: policy.weeklyLimitMinutes,
                    breaks: policy.breaks.map { .init(afterMinutes: $0.afterMinutes, lengthMinutes: $0.lengthMinutes) }))
            return
        }
        let length = periods.reduce(0) { $0 + $1.seconds }
        let allowed = periods.filter { $0.state == .allowed }.reduce(0) { $0 + $1.seconds }
        Output.line("\(user) on \(day.weekday.name) \(day) (\(zone.identifier), a day of \(hours(length)))")
        let dayStart = zone.start(of: day)
        let dayEnd = zone.start(of: day.adding(days: 1))
        func clock(_ instant: Instant) -> String {
            if instant == dayEnd { return "24:00" }
            let second = zone.localTime(at: instant).secondOfDay
            let time = ClockTime(hour: second / 3600, minute: second / 60 % 60)
            return instant == dayStart || second % 60 == 0 ? "\(time)" : "\(time):\(second % 60)"
        }
        let rows = periods.map { period in
            ["\(clock(period.start))-\(clock(period.end))", period.window.map { "downtime \($0)" } ?? period.state.rawValue, hours(period.seconds)]
        }
        table(rows).forEach { Output.line($0) }
        let limitText = limit.map { TimeAllowance.format(minutes: $0) } ?? "unlimited"
        let granted =
            [
                adjustment.extraMinutes > 0 ? "\(TimeAllowance.format(minutes: adjustment.extraMinutes)) extra" : nil,
                adjustment.bedtimeDelayMinutes > 0
                    ? "bedtime \(TimeAllowance.format(minutes: adjustment.bedtimeDelayMinutes)) later" : nil,
            ].compactMap { $0 }
            + adjustment.downtimeDelayMinutes.sorted { $0.key < $1.key }.map { "downtime \($0.key) \(TimeAllowance.format(minutes: $0.value)) later" }
            + adjustment.appExtraMinutes.sorted { $0.key < $1.key }.map { "\(TimeAllowance.format(minutes: $0.value)) more of \($0.key)" }
        let grantText = granted.isEmpty ? "" : " (granted: \(granted.joined(separator: ", ")))"
        Output.line("daily limit \(limitText) within \(hours(allowed)) allowed\(grantText)")
        if let exception { Output.line("exception \(exception)") }
        if let weekly = policy.weeklyLimitMinutes { Output.line("weekly limit \(TimeAllowance.format(minutes: weekly)), from Monday") }
        if let breaks = policy.breaks { Output.line("breaks: \(breaks)") }
        // The default (logout whatever the cause) goes without saying, as other rules that are off.
        if policy.lockout(for: .limit) != .logout || policy.lockout(for: .bedtime) != .logout {
            Output.line(Self.lockoutPreview(policy))
        }
    }

    /// What happens at the limit and at bedtime: `at the limit: logout (sessions end, logins are
    /// refused); at bedtime and in downtime: network (the internet is off; the session goes on)`.
    static func lockoutPreview(_ policy: Policy) -> String {
        func effect(_ lockout: Lockout) -> String {
            switch lockout {
            case .logout: "sessions end, logins are refused"
            case .lock: "sessions are locked, logins are refused"
            case .apps: "tracked apps are stopped, logins are refused"
            case .network: "the internet is off; the session goes on"
            case .none: "nothing is stopped (monitor only)"
            }
        }
        let limit = policy.lockout(for: .limit)
        let bedtime = policy.lockout(for: .bedtime)
        if limit == bedtime { return "at the limit and at bedtime: \(limit.rawValue) (\(effect(limit)))" }
        return "at the limit: \(limit.rawValue) (\(effect(limit))); at bedtime and in downtime: \(bedtime.rawValue) (\(effect(bedtime)))"
    }

    /// `24h`, `23h`, `24h30m`, `6h`, `45m`.
    func hours(_ seconds: Int64) -> String {
        let minutes = Int((seconds + 59) / 60)
        return TimeAllowance.format(minutes: minutes)
    }
}

/// `curfew schedule --json`: the day's figures, its periods in local ISO 8601 times, the lockouts, and
/// the exception, weekly budget and breaks only when the policy has them.
struct DayPreviewJSON: Encodable {
    struct Period: Encodable {
        var start: String
        var end: String
        var state: String
        var window: String?
    }

    struct Lockouts: Encodable {
        var limit: String
        var bedtime: String
    }

    struct Breaks: Encodable {
        var afterMinutes: Int
        var lengthMinutes: Int
    }

    var user: String
    var date: String
    var timezone: String
    @OrNull var limitMinutes: Int?
    var extraMinutes: Int
    var bedtimeDelayMinutes: Int
    var periods: [Period]
    var lockout: Lockouts
    var exception: String?
    var weeklyLimitMinutes: Int?
    var breaks: Breaks?
}
