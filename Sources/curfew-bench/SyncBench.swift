import CurfewCore
import CurfewLinux
import CurfewSync
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The shared directory with a real `curfewd` on a local directory: from a record written to its
/// confirmation written, and catching up on 10,000 records after a start.
func runSyncBenchmarks(root: String, changes: Int, catchUp: Int) throws {
    print("sync (a real curfewd, shared directory on a local file system)")
    let latencies = try measureConfirmationLatency(directory: "\(root)/sync-latency", changes: changes)
    print(
        "  record written -> confirmation written, \(changes) changes: p50 \(format(percentile(latencies, 0.5))) ms, "
            + "p99 \(format(percentile(latencies, 0.99))) ms, max \(format(latencies.max() ?? 0)) ms (target p50 < 100 ms)")
    let (seconds, setup, cpu) = try measureCatchUp(directory: "\(root)/sync-catch-up", records: catchUp)
    print(
        "  catching up \(catchUp) records of one user after a start: \(format(seconds)) s from spawn until every record "
            + "has a confirmation (target < 5 s; curfewd's CPU time meanwhile \(format(cpu)) s; writing the records "
            + "took \(format(setup)) s)")
}

/// A parent key trusted by a fresh agent state directory, and the agent's environment.
private struct SyncSetup {
    let state: String
    let shared: SharedDirectory
    let key = SigningKey()
    let log: String

    init(directory: String) throws {
        try? FileManager.default.removeItem(atPath: directory)
        state = "\(directory)/state"
        shared = SharedDirectory(path: "\(directory)/shared")
        log = "\(directory)/curfewd.log"
        try shared.create()
        try KeyRing(stateDirectory: state).trust(key.publicKey)
    }

    func record(_ version: Int) -> PolicyRecord {
        var policy = Policy.defaults(for: "benchsynckid")
        policy.dailyLimit = .minutes(15 * (1 + version % 30))
        return PolicyRecord(
            user: "benchsynckid", version: version, baseVersion: version - 1, author: key.id,
            time: 1_790_000_000 + Int64(version), policy: policy)
    }

    func startAgent() throws -> pid_t {
        let curfewd = "\(binDirectory)/curfewd"
        guard access(curfewd, X_OK) == 0 else {
            throw BenchFailure("\(curfewd) not found; build it first (swift build -c release --product curfewd)")
        }
        let environment = childEnvironment(
            ["CURFEW_STATE_DIR": state, "CURFEW_LOG": "stderr", "CURFEW_CATALOG_DIRS": "\(packageRoot)/policies/apps"],
            unset: ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "CURFEW_DEBUG", "CURFEW_SHARED_DIR", "CURFEW_SOCKET"])
        let pid: pid_t
        switch spawnChild(
            curfewd,
            [
                "--logind-bus", "none", "--socket", "\(state)/s.sock", "--shared-dir", shared.path, "--machine-id", "bench",
                "--no-process-connector",
            ], environment: environment, output: log, processGroup: 0)
        {
        case .success(let started): pid = started
        case .failure(let error): throw error
        }
        children.add(pid, stopSignal: SIGTERM)
        return pid
    }

    func stopAgent(_ pid: pid_t) {
        kill(pid, SIGTERM)
        waitForExit(pid)
        children.remove(pid)
    }

    func waitForReady(_ pid: pid_t) throws {
        let deadline = clock.now + .seconds(30)
        while !(readText(log) ?? "").contains("curfewd ready") {
            guard clock.now < deadline, waitpid(pid, nil, WNOHANG) == 0 else {
                throw BenchFailure("curfewd did not start: \(readText(log) ?? "")")
            }
            usleep(10_000)
        }
    }

    var confirmations: String { shared.confirmationsPath(of: "bench") }
}

private func measureConfirmationLatency(directory: String, changes: Int) throws -> [Double] {
    let setup = try SyncSetup(directory: directory)
    _ = try setup.shared.publish(setup.record(1), signedBy: setup.key)
    let pid = try setup.startAgent()
    defer { setup.stopAgent(pid) }
    try setup.waitForReady(pid)
    var latencies: [Double] = []
    for version in 2..<(2 + changes) {
        let id = try setup.shared.publish(setup.record(version), signedBy: setup.key)
        // "Written": the record is in place under its final name.
        let written = clock.now
        let target = "\(setup.confirmations)/\(id)"
        let deadline = written + .seconds(10)
        // Seen when it lands (inotify on the confirmations directory), not at the next look of a poll.
        let confirmed = DirectoryWatch.lookUntilFound(
            in: setup.confirmations, remainingMilliseconds: { Int64(milliseconds(deadline - clock.now).rounded(.up)) }
        ) { access(target, F_OK) == 0 ? clock.now : nil }
        guard let confirmed else { throw BenchFailure("no confirmation of \(id) within 10 s") }
        latencies.append(milliseconds(confirmed - written))
    }
    return latencies
}

/// Also the agent's CPU time (user and system, all threads) until then: less at the mercy of other
/// load on the machine than the wall-clock figure.
private func measureCatchUp(directory: String, records: Int) throws -> (seconds: Double, setup: Double, cpu: Double) {
    let setup = try SyncSetup(directory: directory)
    let started = clock.now
    for version in 1...records {
        let record = setup.record(version)
        let bytes = try setup.key.signedFile(record)
        try Data(bytes).write(to: URL(fileURLWithPath: "\(setup.shared.recordsPath)/\(sha256Hex(bytes)).json"))
    }
    let written = milliseconds(clock.now - started) / 1000
    let spawned = clock.now
    let pid = try setup.startAgent()
    defer { setup.stopAgent(pid) }
    let deadline = spawned + .seconds(120)
    while true {
        let count = ((try? Files.list(setup.confirmations)) ?? []).filter { !$0.hasPrefix(".") }.count
        if count >= records { break }
        guard clock.now < deadline, waitpid(pid, nil, WNOHANG) == 0 else {
            throw BenchFailure("only \(count) of \(records) confirmations; curfewd's log: \(readText(setup.log) ?? "")")
        }
        usleep(5_000)
    }
    let elapsed = milliseconds(clock.now - spawned) / 1000
    guard let ticks = AgentProbe.cpuTicks(pid) else { throw BenchFailure("cannot read curfewd's CPU time") }
    return (elapsed, written, Double(ticks) / Double(sysconf(Int32(_SC_CLK_TCK))))
}
