// The indicator's figures (docs/performance.md): curfew-indicator's RSS, CPU and wakeups over a window in which
// nothing changes (a managed child who is not counting: python-dbusmock's logind knows no session of
// theirs), and the time from a parent's grant to the new Title on the child's session bus.
// Targets: under 10 MiB, no wakeups while nothing changes, a grant shown within 1 s.
// CURFEW_BENCH_INDICATOR_BINARY measures another build of the indicator (the package's static one).
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

func runIndicatorBenchmarks(root: String, seconds: Double) throws {
    let account = try BenchAccount.resolve()
    guard account.switchesUser else { throw BenchFailure("the indicator section needs root (it runs the indicator as \(account.name))") }
    let directory = "\(root)/indicator"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    chmod(root, 0o755)
    chmod(directory, 0o755)
    let curfew = "\(binDirectory)/curfew"
    // CURFEW_BENCH_INDICATOR_BINARY: another build of it (the package's, static and optimised).
    let indicator =
        ProcessInfo.processInfo.environment["CURFEW_BENCH_INDICATOR_BINARY"].flatMap { $0.isEmpty ? nil : $0 }
        ?? "\(binDirectory)/curfew-indicator"
    guard access(indicator, X_OK) == 0 else { throw BenchFailure("\(indicator) not found; build it first") }
    let state = "\(directory)/state"
    let socket = "\(directory)/s.sock"
    var environment = childEnvironment(
        ["CURFEW_STATE_DIR": state, "CURFEW_LOG": "stderr"],
        unset: ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "CURFEW_SHARED_DIR", "CURFEW_SOCKET"])
    if (environment["CURFEW_CATALOG_DIRS"] ?? "").isEmpty { environment["CURFEW_CATALOG_DIRS"] = "\(packageRoot)/policies/apps" }
    for arguments in [["init"], ["user", "add", account.name], ["limit", account.name, "2h"], ["bedtime", account.name, "off"]] {
        let result = capture(curfew, arguments, fullEnvironment: environment, in: directory)
        guard result.status == 0 else { throw BenchFailure("curfew \(arguments.joined(separator: " ")) failed: \(result.output)") }
    }

    // A private bus with python-dbusmock's logind (no sessions: nothing counts), for the agent.
    let systemBus = "unix:path=\(directory)/system-bus"
    let busPid = try start(
        "/usr/bin/dbus-daemon", ["--session", "--nofork", "--nopidfile", "--address=\(systemBus)"], environment: environment,
        log: "\(directory)/system-bus.log")
    try waitFor("the private bus", seconds: 10) { FileManager.default.fileExists(atPath: "\(directory)/system-bus") }
    _ = try start(
        "/usr/bin/python3", ["-m", "dbusmock", "--template", "logind"],
        environment: environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": systemBus]) { $1 }, log: "\(directory)/logind.log")
    usleep(1_500_000)
    _ = try start(
        "\(binDirectory)/curfewd", ["--logind-bus", systemBus, "--socket", socket], environment: environment, log: "\(directory)/curfewd.log")
    try waitFor("curfewd", seconds: 20) { (readText("\(directory)/curfewd.log") ?? "").contains("curfewd ready") }
    _ = busPid

    // The child's session bus and their indicator, both as the account.
    let home = "\(directory)/home"
    try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
    chown(home, account.uid, account.gid)
    let sessionBus = "unix:path=\(home)/session-bus"
    let asChild = ["--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--"]
    let childEnvironment = ["PATH": "/usr/bin:/bin", "HOME": home, "DBUS_SESSION_BUS_ADDRESS": sessionBus]
    _ = try start(
        "/usr/bin/setpriv", asChild + ["/usr/bin/dbus-daemon", "--session", "--nofork", "--nopidfile", "--address=\(sessionBus)"],
        environment: childEnvironment, log: "\(directory)/session-bus.log")
    try waitFor("the session bus", seconds: 10) { FileManager.default.fileExists(atPath: "\(home)/session-bus") }
    let wrapper = try start(
        "/usr/bin/setpriv", asChild + [indicator, "--socket", socket], environment: childEnvironment, log: "\(directory)/indicator.log")
    // setpriv execs: the indicator has the wrapper's pid.
    let pid = wrapper
    func title() -> String {
        let result = capture(
            "/usr/bin/setpriv",
            asChild + [
                "/usr/bin/env", "DBUS_SESSION_BUS_ADDRESS=\(sessionBus)", "/usr/bin/busctl", "--user", "get-property",
                "org.kde.StatusNotifierItem-\(pid)-1", "/StatusNotifierItem", "org.kde.StatusNotifierItem", "Title",
            ], fullEnvironment: childEnvironment, in: directory)
        return result.status == 0 ? result.output.trimmingCharacters(in: .whitespacesAndNewlines) : ""
    }
    try waitFor("the indicator's title", seconds: 20) { title().hasPrefix("s \"Curfew: ") }
    let first = title()
    usleep(2_000_000)

    let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
    guard let startTicks = AgentProbe.cpuTicks(pid) else { throw BenchFailure("the indicator exited: \(readText("\(directory)/indicator.log") ?? "")") }
    let startSwitches = AgentProbe.voluntarySwitches(pid)
    let start = clock.now
    usleep(UInt32(seconds * 1_000_000))
    guard let endTicks = AgentProbe.cpuTicks(pid) else { throw BenchFailure("the indicator exited") }
    let endSwitches = AgentProbe.voluntarySwitches(pid)
    let window = milliseconds(clock.now - start) / 1000
    let status = AgentProbe.status(pid)
    let switches = endSwitches.reduce(0) { $0 + $1.value - (startSwitches[$1.key] ?? 0) }
    let cpu = Double(endTicks - startTicks) * 1000 / ticksPerSecond
    print("indicator: \(indicator) as \(account.name), watching a real curfewd; \(first)")
    print(
        "indicator idle \(format(window)) s: RSS \(format(Double(status["VmRSS"] ?? 0) / 1024)) MiB (anonymous "
            + "\(format(Double(status["RssAnon"] ?? 0) / 1024)) MiB, peak \(format(Double(status["VmHWM"] ?? 0) / 1024)) MiB), "
            + "CPU \(format(cpu)) ms (10 ms resolution), \(switches) wakeups (voluntary context switches of \(status["Threads"] ?? 0) threads)")
    print("  resident by mapping: " + AgentProbe.residentByMapping(pid).prefix(6).map { "\($0.name) \($0.kib) KiB" }.joined(separator: ", "))
    print(
        "target: RSS under 10 MiB: \((status["VmRSS"] ?? 0) < 10 * 1024 ? "met" : "NOT met"); no wakeups while nothing changes: "
            + "\(switches == 0 ? "met" : "NOT met (\(switches))")")

    // A grant: from the moment `curfew grant` has published it to the new Title on the bus.
    var latencies: [Double] = []
    for round in 1...3 {
        let before = title()
        let started = clock.now
        let result = capture(curfew, ["grant", account.name, "15m"], fullEnvironment: environment, in: directory)
        guard result.status == 0 else { throw BenchFailure("curfew grant failed: \(result.output)") }
        let published = clock.now
        try waitFor("the grant's title", seconds: 10) { title() != before }
        latencies.append(milliseconds(clock.now - published))
        if round == 3 { print("  grant \(round): curfew grant took \(format(milliseconds(published - started))) ms; title now \(title())") }
    }
    print(
        "grant to new title on the bus: \(latencies.map(format).joined(separator: ", ")) ms (busctl polling included, ~10 ms each); "
            + "target under 1 s: \(latencies.allSatisfy { $0 < 1000 } ? "met" : "NOT met")")
}

/// Starts a background program for the rest of the benchmark (stopped at exit).
private func start(_ path: String, _ arguments: [String], environment: [String: String], log: String) throws -> pid_t {
    switch spawnChild(path, arguments, environment: environment, output: log, processGroup: 0) {
    case .success(let pid):
        children.add(pid, stopSignal: SIGKILL)
        return pid
    case .failure(let error): throw error
    }
}

private func waitFor(_ what: String, seconds: Double, _ condition: () -> Bool) throws {
    let deadline = clock.now + .milliseconds(Int(seconds * 1000))
    while !condition() {
        guard clock.now < deadline else { throw BenchFailure("\(what) not there after \(format(seconds)) s") }
        usleep(20_000)
    }
}
