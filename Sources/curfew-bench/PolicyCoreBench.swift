// The policy-core figures. Targets from the policy-core issue: `curfew policy show` cold start
// under 30 ms, folding 10,000 records of one user under 100 ms.
import CurfewCore
import CurfewStore
import CurfewSync
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A benchmark could not run (a missing binary, a wrong result): one line for people.
struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Cold start of `curfew policy show`, folding 10,000 records, a year of schedule evaluation. `root`
/// is a scratch directory.
func runPolicyCoreBenchmarks(root: String) throws {
    let curfew = "\(binDirectory)/curfew"

    // 1. Cold start of `curfew policy show` (a new process each time, one user, a few records).
    do {
        let state = "\(root)/small"
        let env = ["CURFEW_STATE_DIR": state]
        guard run(curfew, ["init"], environment: env) == 0, run(curfew, ["user", "add", "kid"], environment: env) == 0,
            run(curfew, ["limit", "kid", "90m"], environment: env) == 0
        else {
            throw BenchFailure("cannot run \(curfew); build it first (swift build -c release)")
        }
        var samples: [Double] = []
        for _ in 0..<40 {
            let start = clock.now
            _ = run(curfew, ["policy", "show", "kid"], environment: env)
            samples.append(milliseconds(clock.now - start))
        }
        print("policy show, cold start (40 processes): median \(format(percentile(samples, 0.5))) ms, p90 \(format(percentile(samples, 0.9))) ms (target < 30 ms)")
    }

    // 2. Folding 10,000 records of one user.
    do {
        let shared = SharedDirectory(path: "\(root)/fold/shared")
        try shared.create()
        let key = SigningKey()
        let trusted = [key.id: key.publicKey]
        let count = 10_000
        var policy = Policy.defaults(for: "kid")
        policy.apps = [AppRule(app: "steam", rule: .block), AppRule(app: "minecraft", rule: .limit(minutes: 60))]
        let makeStart = clock.now
        for version in 1...count {
            policy.dailyLimit = .minutes(15 * (version % 33))
            let record = PolicyRecord(
                user: "kid", version: version, baseVersion: version - 1, author: key.id, time: 1_790_000_000 + Int64(version),
                policy: policy)
            _ = try shared.publish(record, signedBy: key)
        }
        print("published \(count) records in \(format(milliseconds(clock.now - makeStart))) ms")

        let coldStart = clock.now
        let cold = try RecordScan.scan(shared, trusted: trusted, index: [:])
        let coldTime = milliseconds(clock.now - coldStart)
        guard cold.current(for: "kid")?.version == count else { throw BenchFailure("fold picked the wrong record") }
        print("fold \(count) records, first time (every signature verified): \(format(coldTime)) ms")

        let store = try StateStore(path: "\(root)/fold/curfew.db")
        try store.write { try RecordIndex.save(cold.newIndexEntries, $0) }
        var warm: [Double] = []
        for _ in 0..<10 {
            let start = clock.now
            let index = try store.read { try RecordIndex.all($0) }
            let scan = try RecordScan.scan(shared, trusted: trusted, index: index)
            guard let current = scan.current(for: "kid"), current.version == count else {
                throw BenchFailure("fold with the index picked the wrong record")
            }
            // The winner is read and verified again before use, as the CLI does.
            _ = try RecordVerifier.load(path: "\(shared.recordsPath)/\(current.id)", name: current.id, trusted: trusted).get()
            warm.append(milliseconds(clock.now - start))
        }
        print("fold \(count) records, with the record index (read index + stat every file + verify the winner): median \(format(percentile(warm, 0.5))) ms, max \(format(warm.max()!)) ms (target < 100 ms)")

        // The whole command on that directory.
        let state = "\(root)/fold"
        let env = ["CURFEW_STATE_DIR": state, "CURFEW_SHARED_DIR": shared.path]
        let keyring = KeyRing(stateDirectory: state)
        try keyring.trust(key.publicKey)
        _ = run(curfew, ["policy", "show", "kid"], environment: env)  // fills the CLI's index
        var command: [Double] = []
        for _ in 0..<10 {
            let start = clock.now
            _ = run(curfew, ["policy", "show", "kid"], environment: env)
            command.append(milliseconds(clock.now - start))
        }
        print("policy show with \(count) records (new process each time): median \(format(percentile(command, 0.5))) ms")
    }

    // 3. A year of schedule evaluation.
    do {
        var policy = Policy.defaults(for: "kid")
        policy.timezone = "Europe/Berlin"
        policy.weekdayLimits = [.sat: .minutes(180), .sun: .minutes(180)]
        policy.weekdayBedtimes = [.fri: try BedtimeWindow.parse("22:00-08:30"), .sat: try BedtimeWindow.parse("22:00-08:30")]
        let schedule = Schedule(policy: policy, zone: ZoneRules(identifier: "Europe/Berlin")!)
        let first = LocalDate(year: 2026, month: 1, day: 1)!
        var periods = 0
        let periodStart = clock.now
        for offset in 0..<365 { periods += schedule.periods(on: first.adding(days: offset)).count }
        let periodTime = milliseconds(clock.now - periodStart)
        print("periods of 365 days: \(format(periodTime)) ms (\(periods) periods)")

        let yearStart = schedule.zone.start(of: first)
        let step: Int64 = 300
        let decisions = Int(365 * 86_400 / step)
        var allowed = 0
        let decideStart = clock.now
        for index in 0..<decisions {
            let now = yearStart + .seconds(Int64(index) * step)
            let decision = schedule.decide(now: now, usedSeconds: Int64(index % 1440) * 5)
            if decision.state == .allowed { allowed += 1 }
        }
        let decideTime = milliseconds(clock.now - decideStart)
        print("decide every 5 minutes for a year (\(decisions) decisions): \(format(decideTime)) ms, \(format(decideTime * 1000 / Double(decisions))) us each (\(allowed) allowed)")
    }

    // 4. The schedules families use: 16 downtime windows, breaks, a weekly budget and 64
    // exceptions; decide() for a year at 5-minute steps, and `curfew schedule` cold start.
    do {
        var policy = Policy.defaults(for: "kid")
        policy.timezone = "Europe/Berlin"
        policy.weekdayLimits = [.sat: .minutes(180), .sun: .minutes(180)]
        policy.weekdayBedtimes = [.fri: try BedtimeWindow.parse("22:00-08:30"), .sat: try BedtimeWindow.parse("22:00-08:30")]
        policy.weeklyLimitMinutes = 900
        policy.breaks = Breaks(afterMinutes: 45, lengthMinutes: 10)
        let starts = ["06:30", "08:00", "09:15", "10:40", "12:00", "13:20", "14:45", "16:00", "17:30", "18:45", "19:30", "23:00", "00:30", "02:00", "03:30", "05:00"]
        let ends = ["07:00", "08:45", "09:50", "11:15", "12:30", "13:55", "15:20", "16:40", "18:00", "19:10", "19:50", "00:15", "01:00", "02:30", "04:00", "05:30"]
        let daySets: [[Weekday]] = [[.mon, .tue, .wed, .thu, .fri], [.sat, .sun], Weekday.allCases, [.mon, .wed, .fri]]
        for index in 0..<16 {
            policy.downtime.append(
                DowntimeWindow(
                    name: "window-\(index)", start: try ClockTime.parse(starts[index]), end: try ClockTime.parse(ends[index]),
                    days: daySets[index % daySets.count]))
        }
        let first = LocalDate(year: 2026, month: 1, day: 1)!
        for index in 0..<64 {
            let from = first.adding(days: index * 5 + 1)
            policy.exceptions.append(
                PolicyException(
                    from: from, to: from.adding(days: index % 3), dailyLimit: index % 2 == 0 ? .unlimited : .minutes(240),
                    bedtime: index % 4 == 0 ? .some(nil) : nil, liftsDowntime: index % 3 == 0))
        }
        policy.sortScheduleLists()
        try policy.validate()
        let schedule = Schedule(policy: policy, zone: ZoneRules(identifier: "Europe/Berlin")!)
        let yearStart = schedule.zone.start(of: first)
        let step: Int64 = 300
        let decisions = Int(365 * 86_400 / step)
        var states: [UseState: Int] = [:]
        let decideStart = clock.now
        for index in 0..<decisions {
            let now = yearStart + .seconds(Int64(index) * step)
            // Up to 4 hours a day and 2.5 a day before it in the week, so every state occurs.
            let used = Int64(index % 288) * 50
            let usage = ScheduleUsage(
                daySeconds: used, weekSeconds: used + Int64(index / 288 % 7) * 9000, continuousSeconds: Int64(index % 12) * 300,
                pauseSeconds: index % 5 == 0 ? 300 : 0)
            states[schedule.decide(now: now, usage: usage).state, default: 0] += 1
        }
        let decideTime = milliseconds(clock.now - decideStart)
        let counts = UseState.allCases.map { "\(states[$0] ?? 0) \($0.rawValue)" }.joined(separator: ", ")
        print("decide every 5 minutes for a year with 16 downtime windows, breaks, a weekly budget and 64 exceptions (\(decisions) decisions): \(format(decideTime)) ms, \(format(decideTime * 1000 / Double(decisions))) us each (target < 50 us; \(counts))")

        let state = "\(root)/rules"
        let env = ["CURFEW_STATE_DIR": state]
        let file = "\(root)/rules-policy.json"
        try Data(policy.json.prettyString.utf8).write(to: URL(fileURLWithPath: file))
        guard run(curfew, ["init"], environment: env) == 0, run(curfew, ["policy", "import", file, "--no-wait"], environment: env) == 0 else {
            throw BenchFailure("cannot import the schedule-rules policy with \(curfew)")
        }
        var samples: [Double] = []
        for _ in 0..<40 {
            let start = clock.now
            _ = run(curfew, ["schedule", "kid", "--date", "2026-03-29"], environment: env)
            samples.append(milliseconds(clock.now - start))
        }
        print("schedule with those rules, cold start (40 processes): median \(format(percentile(samples, 0.5))) ms, p90 \(format(percentile(samples, 0.9))) ms (target < 30 ms)")
    }
}
