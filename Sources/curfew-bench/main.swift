// Prints Curfew's speed figures (docs/performance.md: `make bench`): the policy core (PolicyCoreBench.swift) and
// tracking (TrackingBench.swift: the /proc sampler, the agent, Timekpr-nExT for comparison) and
// enforcement (EnforcementBench.swift: exec of a blocked app to its death) and sync (SyncBench.swift: record to
// confirmation, catching up after a start) and syncthing (SyncthingBench.swift: one change through two real
// Syncthing instances and back) and reports (ReportBench.swift: a year of 5 children's usage) and
// login (LoginBench.swift: check-login with the agent idle, under a child's socket attack, frozen, stopped) and
// idle (IdleBench.swift: the agent's wakeups and CPU with nothing to count, and counting one user) and network
// (NetworkBench.swift: the network lockout's latency and the cost of its rules) and indicator
// (IndicatorBench.swift: curfew-indicator's RSS, CPU and wakeups idle, a grant to its new title) and
// package (PackageBench.swift: the .deb's sizes, the TZif zone rules against ICU's).
//
// Usage: curfew-bench [policy] [tracking] [enforcement] [sync] [syncthing] [reports] [login] [idle] [network] [indicator]
//   [package]   (no argument: all;
// TrackingOptions.fromEnvironment lists the environment variables that shorten the tracking section;
// CURFEW_BENCH_LOGIN_RUNS sets the check-logins per case, 50 by default; CURFEW_BENCH_IDLE_SECONDS the idle
// section's windows, 30 s by default; CURFEW_BENCH_NETWORK_ROUNDS the network section's rounds, 20 at most and by default;
// CURFEW_BENCH_INDICATOR_SECONDS the indicator's idle window, 60 s)
import Foundation
import CurfewCore
import CurfewSync

#if canImport(Glibc)
    import Glibc
#endif

let known = ["policy", "tracking", "enforcement", "sync", "syncthing", "reports", "login", "idle", "network", "indicator", "package"]
let arguments = Array(CommandLine.arguments.dropFirst())
if let unknown = arguments.first(where: { !known.contains($0) }) {
    print(
        "usage: curfew-bench [policy] [tracking] [enforcement] [sync] [syncthing] [reports] [login] [idle] [network] [indicator] [package]  (unknown: \(unknown))"
    )
    exit(2)
}
let sections = arguments.isEmpty ? known : arguments
SystemZones.install()

let root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-bench-\(getpid())").path
children.atExit(order: 100) { try? FileManager.default.removeItem(atPath: root) }
children.stopOnSignals()

print("curfew benchmark (\(ProcessInfo.processInfo.activeProcessorCount) cores)")
var failed = false
let benchStart = clock.now
do {
    if sections.contains("policy") {
        try runPolicyCoreBenchmarks(root: root)
    }
    if sections.contains("tracking") {
        if sections.contains("policy") { print("") }
        try runTrackingBenchmarks(root: root, options: .fromEnvironment())
    }
    if sections.contains("enforcement") {
        if sections.count > 1 { print("") }
        let launches = ProcessInfo.processInfo.environment["CURFEW_BENCH_LAUNCHES"].flatMap { Int($0) } ?? 200
        try runEnforcementBenchmarks(root: root, launches: launches)
    }
    if sections.contains("sync") {
        if sections.count > 1 { print("") }
        let environment = ProcessInfo.processInfo.environment
        try runSyncBenchmarks(
            root: root, changes: environment["CURFEW_BENCH_SYNC_CHANGES"].flatMap { Int($0) } ?? 200,
            catchUp: environment["CURFEW_BENCH_SYNC_RECORDS"].flatMap { Int($0) } ?? 10_000)
    }
    if sections.contains("syncthing") {
        if sections.count > 1 { print("") }
        try runSyncthingBenchmarks(
            root: root, changes: ProcessInfo.processInfo.environment["CURFEW_BENCH_SYNCTHING_CHANGES"].flatMap { Int($0) } ?? 20)
    }
    if sections.contains("reports") {
        if sections.count > 1 { print("") }
        try runReportBenchmarks(root: root)
    }
    if sections.contains("login") {
        if sections.count > 1 { print("") }
        try runLoginBenchmarks(
            root: root, runs: ProcessInfo.processInfo.environment["CURFEW_BENCH_LOGIN_RUNS"].flatMap { Int($0) } ?? 50)
    }
    if sections.contains("package") {
        if sections.count > 1 { print("") }
        try runPackageBenchmarks()
    }
    if sections.contains("idle") {
        if sections.count > 1 { print("") }
        try runIdleBenchmarks(
            root: root, seconds: ProcessInfo.processInfo.environment["CURFEW_BENCH_IDLE_SECONDS"].flatMap { Double($0) } ?? 30)
    }
    if sections.contains("network") {
        if sections.count > 1 { print("") }
        let rounds = ProcessInfo.processInfo.environment["CURFEW_BENCH_NETWORK_ROUNDS"].flatMap { Int($0) } ?? 20
        try runNetworkBenchmarks(root: root, rounds: min(max(rounds, 1), 20))
    }
    if sections.contains("indicator") {
        if sections.count > 1 { print("") }
        try runIndicatorBenchmarks(
            root: root, seconds: ProcessInfo.processInfo.environment["CURFEW_BENCH_INDICATOR_SECONDS"].flatMap { Double($0) } ?? 60)
    }
} catch {
    print("benchmark failed: \(error)")
    failed = true
}
children.stopEverything()
print("benchmark time: \(format(milliseconds(clock.now - benchStart) / 1000)) s")
exit(failed ? 1 : 0)
