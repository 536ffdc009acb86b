// The idle figures (docs/performance.md): how often the agent wakes and what CPU it uses while nothing happens
// (a managed user with no process, no logind) and while it counts one user (one process of the bench
// account, no logind). Targets: idle, less than one wake-up a second on average; counting, at most
// the tick plus the flush.
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

func runIdleBenchmarks(root: String, seconds: Double) throws {
    let account = try BenchAccount.resolve()
    let present = countProcesses(uid: account.uid)
    print("idle: curfewd (this build's, --logind-bus none, tick 1 s) with \(account.name) managed, \(format(seconds)) s each")
    if present > 0 { print("note: \(account.name) already has \(present) processes; the idle figure is not idle") }
    let guardian = Guardian()
    defer { guardian?.dismiss() }

    let idle = try AgentProbe(account: account, directory: "\(root)/idle", guardian: guardian).run(seconds: seconds, warmUp: 3)
    printIdle(idle, label: "curfewd idle (\(account.name) managed, no process of theirs)")

    // An app blocked for the account: the exec guard marks every filesystem and sees every exec on the
    // machine (each file once, until it is ignored); its watchdog sleeps until a decision is late.
    let guarded = try AgentProbe(account: account, directory: "\(root)/guarded", guardian: guardian).run(
        seconds: seconds, warmUp: 3, extraArguments: ["--exec-guard", "on"], extraSetup: [["app", "block", account.name, "supertuxkart"]])
    printIdle(guarded, label: "curfewd idle with an app blocked for \(account.name) (the exec guard watching every exec)")

    let sleepers = Sleepers(account: account, guardian: guardian)
    defer { sleepers.stopAll() }
    if let error = sleepers.grow(to: 1) { throw BenchFailure("cannot start a process of \(account.name): \(error)") }
    let counting = try AgentProbe(account: account, directory: "\(root)/counting", guardian: guardian).run(seconds: seconds, warmUp: 3)
    printIdle(counting, label: "curfewd counting one user (one process of \(account.name))")
    // Something else on the machine starting processes (a build, scripts): the connector reports
    // every one of them.
    let busy = try AgentProbe(account: account, directory: "\(root)/busy", guardian: guardian).run(
        seconds: seconds, warmUp: 3, churnPerSecond: 200, churnOfOthers: true)
    printIdle(busy, label: "curfewd counting one user while root starts 200 short processes a second")
    if let started = busy.tasksStarted { print("  (\(started) PIDs handed out machine-wide in the window)") }
    sleepers.stopAll()

    let own = Double(idle.voluntarySwitches - idle.dispatchManagerSwitches) / idle.windowSeconds
    print(
        "target: idle wakeups \(format(idle.wakeupsPerSecond))/s < 1/s: \(idle.wakeupsPerSecond < 1 ? "met" : "NOT met"), "
            + "with an app blocked \(format(guarded.wakeupsPerSecond))/s: \(guarded.wakeupsPerSecond < 1 ? "met" : "NOT met") "
            + "(the agent's own loops \(format(own))/s, libdispatch's manager thread the rest); "
            + "counting \(format(counting.wakeupsPerSecond))/s (the tick, 1/s, and the flush's write every 2 s)")
}

func printIdle(_ figures: AgentProbe.Figures, label: String) {
    print(
        "\(label): \(format(figures.wakeupsPerSecond)) wakeups/s (\(figures.voluntarySwitches) voluntary context switches of "
            + "\(figures.threads) threads in \(format(figures.windowSeconds)) s), CPU \(format3(figures.cpuShare * 100))% of one core "
            + "(\(format(figures.windowCPUMilliseconds)) ms, 10 ms resolution); exit status \(figures.exitStatus) after SIGTERM")
    print(
        "  of which libdispatch's manager thread (whose 1 s workqueue monitor the agent's own executor avoids): "
            + "\(figures.dispatchManagerSwitches); uid changes anywhere on the machine also wake the tracker once each")
    for line in figures.logProblems.prefix(5) { print("  curfewd log: \(line)") }
}
