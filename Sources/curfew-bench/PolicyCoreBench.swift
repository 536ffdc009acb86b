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

        let yearStart = schedule.zone.startOfDay(first)
        let step: Int64 = 300
        let decisions = Int(365 * 86_400 / step)
        var allowed = 0
        let decideStart = clock.now
        for index in 0..<decisions {
            let now = yearStart + Int64(index) * step
            let decision = schedule.decide(now: now, usedSeconds: Int64(index % 1440) * 5)
            if decision.state == .allowed { allowed += 1 }
        }
        let decideTime = milliseconds(clock.now - decideStart)
        print("decide every 5 minutes for a year (\(decisions) decisions): \(format(decideTime)) ms, \(format(decideTime * 1000 / Double(decisions))) us each (\(allowed) allowed)")
    }
}
