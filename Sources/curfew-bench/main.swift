// Prints Curfew's speed figures (README: `make bench`). Targets from the policy-core issue:
// `curfew policy show` cold start under 30 ms, folding 10,000 records of one user under 100 ms.
import CurfewCore
import CurfewStore
import CurfewSync
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

let clock = ContinuousClock()

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

func format(_ value: Double) -> String { String(format: "%.2f", value) }

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction + 0.5))]
}

/// Runs a binary to completion through posix_spawn (Foundation's Process adds ~30 ms of its own),
/// output discarded; returns its exit status.
func run(_ path: String, _ arguments: [String], environment: [String: String]) -> Int32 {
    let env = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0)=\($1)" }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    let envp = env.map { strdup($0) } + [nil]
    defer {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
    var pid: pid_t = 0
    guard posix_spawn(&pid, path, &actions, nil, argv, envp) == 0 else { return -1 }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return (status >> 8) & 0xFF
}

let binDirectory = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
    .deletingLastPathComponent().path
let curfew = "\(binDirectory)/curfew"
let root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-bench-\(getpid())").path
defer { try? FileManager.default.removeItem(atPath: root) }

print("curfew benchmark (\(ProcessInfo.processInfo.activeProcessorCount) cores)")

// 1. Cold start of `curfew policy show` (a new process each time, one user, a few records).
do {
    let state = "\(root)/small"
    let env = ["CURFEW_STATE_DIR": state]
    guard run(curfew, ["init"], environment: env) == 0, run(curfew, ["user", "add", "kid"], environment: env) == 0,
        run(curfew, ["limit", "kid", "90m"], environment: env) == 0
    else {
        print("cannot run \(curfew); build it first (swift build -c release)")
        exit(1)
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
    guard cold.current(for: "kid")?.version == count else { print("fold picked the wrong record"); exit(1) }
    print("fold \(count) records, first time (every signature verified): \(format(coldTime)) ms")

    let store = try StateStore(path: "\(root)/fold/curfew.db")
    try store.write { try RecordIndex.save(cold.newIndexEntries, $0) }
    var warm: [Double] = []
    for _ in 0..<10 {
        let start = clock.now
        let index = try store.read { try RecordIndex.all($0) }
        let scan = try RecordScan.scan(shared, trusted: trusted, index: index)
        guard let current = scan.current(for: "kid"), current.version == count else { exit(1) }
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
