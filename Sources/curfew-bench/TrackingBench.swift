// The tracking figures. Targets from the tracking issue: a steady-state sampler tick under 1 ms
// (median) at 2,000 processes, the agent under 0.5% of one core and under 20 MB of RSS at 2,000
// processes; Timekpr-nExT's PlayTime scanner over the same process table for comparison.
import CurfewLinux
import CurfewPOSIX
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

struct TrackingOptions {
    var sizes = [100, 1_000, 2_000, 5_000]
    /// The size at which the agent runs and the targets apply.
    var agentSize = 2_000
    var agentSeconds = 20.0
    /// Also run the agent polling /proc every tick (`--no-process-connector`); 0 to skip.
    var agentPollingSeconds = 10.0
    /// Also run the agent while short processes start and end (`agentChurnPerSecond` a second); 0 to skip.
    var agentChurnSeconds = 10.0
    var agentChurnPerSecond = 20
    /// The agent with no spawned processes, before the others; 0 to skip.
    var agentBaselineSeconds = 5.0
    /// Fresh samplers whose first two samples are timed; the median is printed.
    var coldSamples = 3
    var ticks = 200
    var churnTicks = 50
    var timekprScans = 60
    var timekpr = true

    /// Defaults, changed by `CURFEW_BENCH_SIZES=100,2000`, `CURFEW_BENCH_AGENT_SECONDS=0` (no agent),
    /// `CURFEW_BENCH_TIMEKPR=0` (no Timekpr), `CURFEW_BENCH_COLD_SAMPLES=20` (e.g. to profile the
    /// first sample).
    static func fromEnvironment() -> TrackingOptions {
        var options = TrackingOptions()
        let environment = ProcessInfo.processInfo.environment
        if let sizes = environment["CURFEW_BENCH_SIZES"]?.split(separator: ",").compactMap({ Int($0) }), !sizes.isEmpty {
            options.sizes = sizes
            if !sizes.contains(options.agentSize) { options.agentSize = sizes.max()! }
        }
        if let seconds = environment["CURFEW_BENCH_AGENT_SECONDS"].flatMap(Double.init) {
            options.agentSeconds = seconds
            if seconds == 0 {
                options.agentPollingSeconds = 0
                options.agentChurnSeconds = 0
                options.agentBaselineSeconds = 0
            }
        }
        if environment["CURFEW_BENCH_TIMEKPR"] == "0" { options.timekpr = false }
        if let count = environment["CURFEW_BENCH_COLD_SAMPLES"].flatMap(Int.init), count > 0 { options.coldSamples = count }
        return options
    }
}

/// The sampler's figures at one size.
struct SamplerFigures {
    var listed: Int
    var ofAccount: Int
    var coldSamples: Int
    var first: Timing
    var second: Timing
    var quiet: Summary
    var listing: Summary
    var churn: Summary
    /// opendir/readdir/closedir of /proc alone: the kernel's part of any listing.
    var bareListing: Summary
}

func runTrackingBenchmarks(root: String, options: TrackingOptions) throws {
    let account = try BenchAccount.resolve()
    let largest = options.sizes.max() ?? 0
    print(
        "tracking: /bin/sleep processes of \(account.name) (uid \(account.uid)) spawned on top of what runs, "
            + "\(ProcessLimits.currentTasks() ?? 0) tasks now")
    print("limits: " + ProcessLimits.prepare(extra: largest).joined(separator: ", "))

    var timekpr: TimekprProbe? = nil
    if options.timekpr {
        let probe = TimekprProbe(workDirectory: "\(root)/timekpr")
        try FileManager.default.createDirectory(atPath: probe.workDirectory, withIntermediateDirectories: true)
        do {
            let version = try probe.prepare()
            print("timekpr-next \(version): apt-get download + dpkg-deb -x, PlayTime scanner imported from the package")
            timekpr = probe
        } catch {
            print("timekpr comparison skipped: \(error)")
        }
    }

    let guardian = Guardian()
    defer { guardian?.dismiss() }
    if guardian == nil { print("note: no guardian process; a crash would leave the spawned processes behind") }

    var baselineAgent: AgentProbe.Figures? = nil
    if options.agentBaselineSeconds > 0 {
        print("curfewd with no spawned processes: \(format(options.agentBaselineSeconds)) s...")
        do {
            let figures = try AgentProbe(account: account, directory: "\(root)/agent-baseline", guardian: guardian).run(
                seconds: options.agentBaselineSeconds)
            printAgent(figures, label: "curfewd with no spawned processes", mode: "process connector")
            baselineAgent = figures
        } catch {
            print("curfewd with no spawned processes failed: \(error)")
        }
    }

    let sleepers = Sleepers(account: account, guardian: guardian)
    defer { sleepers.stopAll() }
    var results: [Int: SamplerFigures] = [:]
    var trackerTicks: [Int: TrackerProbe.Figures] = [:]
    var agent: AgentProbe.Figures? = nil
    var pollingAgent: AgentProbe.Figures? = nil
    var churnAgent: AgentProbe.Figures? = nil

    for size in options.sizes.sorted() {
        let start = clock.now
        if let error = sleepers.grow(to: size) {
            print("cannot reach \(size) processes: stopped at \(sleepers.count) (\(error)); skipping \(size) and above")
            break
        }
        print("")
        // What the step says it measures: that many processes of the account, counted in /proc.
        let counted = countProcesses(uid: account.uid)
        print("-- \(size) processes spawned (\(format(milliseconds(clock.now - start) / 1000)) s to start them; \(counted) processes of \(account.name) counted in /proc)")
        if counted < size {
            print("cannot reach \(size) processes of \(account.name): \(counted) in /proc; skipping \(size) and above")
            break
        }
        let figures = measureSampler(size: size, uid: account.uid, sleepers: sleepers, options: options)
        results[size] = figures
        printSampler(figures, size: size)

        for connector in [true, false] {
            do {
                let tracker = try TrackerProbe.measure(
                    account: account, directory: "\(root)/tracker-\(size)-\(connector)", ticks: options.ticks,
                    processConnector: connector)
                let mode =
                    tracker.usesProcessConnector
                    ? "process connector, as curfewd runs: events applied between ticks"
                    : "polling: the listing is skipped unless something started, \(min(tracker.ofAccount, 128)) execs checked a tick"
                print(
                    "tracker tick at \(size) processes (Tracker.tick in this process, \(mode); \(account.name) managed, "
                        + "\(tracker.ofAccount) of its processes tracked): \(tracker.ticks.text); first after start \(format(tracker.first.wall)) ms wall")
                if connector { trackerTicks[size] = tracker }
            } catch {
                print("tracker at \(size) processes (\(connector ? "process connector" : "polling")) failed: \(error)")
            }
        }

        if let timekpr {
            do {
                let scan = try timekpr.measure(uid: account.uid, masks: ["sleep"], scans: options.timekprScans)
                printTimekpr(scan, curfew: figures, size: size)
            } catch {
                print("timekpr at \(size) processes failed: \(error)")
            }
        }

        if size == options.agentSize && options.agentSeconds > 0 {
            print("curfewd at \(size) processes (\(account.name) managed, --logind-bus none): \(format(options.agentSeconds)) s with the process connector (default)...")
            do {
                let figures = try AgentProbe(account: account, directory: "\(root)/agent", guardian: guardian).run(seconds: options.agentSeconds)
                printAgent(figures, label: "curfewd at \(size) processes", mode: "process connector")
                agent = figures
            } catch {
                print("curfewd at \(size) processes failed: \(error)")
            }
            if options.agentChurnSeconds > 0 {
                let rate = options.agentChurnPerSecond
                do {
                    let figures = try AgentProbe(account: account, directory: "\(root)/agent-churn", guardian: guardian).run(
                        seconds: options.agentChurnSeconds, churnPerSecond: rate)
                    printAgent(figures, label: "curfewd at \(size) processes", mode: "process connector, \(rate) short processes a second")
                    churnAgent = figures
                } catch {
                    print("curfewd with \(rate) short processes a second failed: \(error)")
                }
            }
            if options.agentPollingSeconds > 0 {
                do {
                    let figures = try AgentProbe(account: account, directory: "\(root)/agent-polling", guardian: guardian).run(
                        seconds: options.agentPollingSeconds, extraArguments: ["--no-process-connector"])
                    printAgent(figures, label: "curfewd at \(size) processes", mode: "--no-process-connector, /proc listed every tick")
                    pollingAgent = figures
                } catch {
                    print("curfewd --no-process-connector at \(size) processes failed: \(error)")
                }
            }
        }
    }
    let spawned = sleepers.count
    sleepers.stopAll()
    print("")
    print("stopped and reaped all \(spawned) spawned processes")

    // The targets, at the agent size.
    print("")
    if let figures = results[options.agentSize] {
        let tick = figures.listing.wallMedian
        print(
            "target: sampler tick at \(options.agentSize) processes (listing /proc) median \(format3(tick)) ms wall, "
                + "\(format3(figures.listing.cpuMedian)) ms CPU < 1 ms: \(tick < 1 ? "met" : "NOT met")")
        print(
            "  (the kernel's readdir of /proc alone: \(format3(figures.bareListing.wallMedian)) ms; the tick when nothing "
                + "started or exited: \(format3(figures.quiet.wallMedian)) ms)")
    } else {
        print("target: sampler tick at \(options.agentSize) processes: not measured")
    }
    if let tracker = trackerTicks[options.agentSize] {
        let tick = tracker.ticks.wallMedian
        print(
            "target: tracker tick at \(options.agentSize) processes (process connector) median \(format3(tick)) ms wall, "
                + "\(format3(tracker.ticks.cpuMedian)) ms CPU < 1 ms: \(tick < 1 ? "met" : "NOT met")")
    }
    if let agent {
        let share = agent.cpuShare * 100
        print(
            "target: curfewd CPU at \(options.agentSize) processes \(format3(share))% of one core < 0.2% (docs/performance.md): "
                + "\(share < 0.2 ? "met" : "NOT met")")
        let megabytes = Double(agent.rssKiB) / 1024
        let outside = agent.tasksStarted.map { " (\($0) PIDs handed out machine-wide meanwhile)" } ?? ""
        print(
            "target: curfewd CPU at \(options.agentSize) processes \(format3(share))% of one core < 0.5%: "
                + "\(share < 0.5 ? "met" : "NOT met")\(outside)")
        print("target: curfewd RSS at \(options.agentSize) processes \(format(megabytes)) MiB < 20 MB: \(Double(agent.rssKiB) * 1024 < 20e6 ? "met" : "NOT met")")
        if let churnAgent {
            print("  (with \(options.agentChurnPerSecond) short processes a second: \(format3(churnAgent.cpuShare * 100))% of one core)")
        }
        if let pollingAgent {
            print("  (polling every tick: \(format3(pollingAgent.cpuShare * 100))% of one core, RSS \(format(Double(pollingAgent.rssKiB) / 1024)) MiB)")
        }
        if let baselineAgent {
            print("  (with no spawned processes: \(format3(baselineAgent.cpuShare * 100))% of one core, RSS \(format(Double(baselineAgent.rssKiB) / 1024)) MiB)")
        }
    } else {
        print("target: curfewd CPU and RSS: not measured")
    }
}

/// Measures `ProcessSampler.sample()` with `size` sleepers alive: a cold first sample, the second
/// one (which parses again every process the first one found), then three kinds of steady tick.
func measureSampler(size: Int, uid: UInt32, sleepers: Sleepers, options: TrackingOptions) -> SamplerFigures {
    // A fresh sampler (and file identity cache) each time: the first sample parses every process,
    // the second parses again those the first found (see ProcessSampler's documentation).
    var firsts: [Timing] = []
    var seconds: [Timing] = []
    var sampler = ProcessSampler()
    var processes: [TrackedProcess] = []
    for _ in 0..<max(1, options.coldSamples) {
        sampler = ProcessSampler()
        let (all, first) = timed { sampler.sample() }
        processes = all
        firsts.append(first)
        seconds.append(timed { sampler.sample() }.1)
    }
    let first = Timing(wall: percentile(firsts.map(\.wall), 0.5), cpu: percentile(firsts.map(\.cpu), 0.5))
    let second = Timing(wall: percentile(seconds.map(\.wall), 0.5), cpu: percentile(seconds.map(\.cpu), 0.5))

    // Nothing started or exited since the last tick: /proc/loadavg's task count and last PID are
    // unchanged and the sampler skips the listing (another process starting anywhere on the machine
    // makes it list; the median shows the usual case).
    var quiet: [Timing] = []
    for _ in 0..<options.ticks {
        usleep(1_000)
        quiet.append(timed { sampler.sample() }.1)
    }

    // Something started or exited somewhere (on a desktop a thread starting is enough, so this is
    // the common tick): the sampler lists /proc and checks each entry against its cache.
    // `forget(pid:)` of a PID that is not cached only marks the listing as required.
    var listing: [Timing] = []
    for _ in 0..<options.ticks {
        usleep(1_000)
        sampler.forget(pid: 0)
        listing.append(timed { sampler.sample() }.1)
    }

    var bare: [Timing] = []
    for _ in 0..<options.ticks {
        usleep(1_000)
        bare.append(timed { countProcDirectories() }.1)
    }

    // One process exited and one started before each tick: a listing plus one new process parsed
    // (and the one from the tick before parsed again, its "second look").
    var churn: [Timing] = []
    for _ in 0..<options.churnTicks {
        sleepers.stopLast()
        if (try? sleepers.spawnOne()) == nil { break }
        churn.append(timed { sampler.sample() }.1)
    }

    return SamplerFigures(
        listed: processes.count, ofAccount: processes.filter { $0.uid == uid }.count, coldSamples: firsts.count, first: first, second: second,
        quiet: Summary(quiet), listing: Summary(listing), churn: Summary(churn.isEmpty ? [Timing(wall: 0, cpu: 0)] : churn),
        bareListing: Summary(bare))
}

/// Processes of `uid` in /proc (the owner of /proc/PID is the process's effective uid; the bench
/// account's sleepers have real and effective uid the same).
func countProcesses(uid: UInt32) -> Int {
    guard var directory = try? DirectoryStream(path: "/proc") else { return 0 }
    var count = 0
    while let item = directory.next() {
        let name = item.name
        guard Int32(name) != nil else { continue }
        var status = stat()
        if stat("/proc/\(name)", &status) == 0 && status.st_uid == uid { count += 1 }
    }
    return count
}

/// Lists /proc and counts the PID directories, nothing else.
func countProcDirectories() -> Int {
    guard var directory = try? DirectoryStream(path: "/proc") else { return 0 }
    var count = 0
    while let item = directory.next() {
        let first = item.nameBytes[0]
        if first >= UInt8(ascii: "1") && first <= UInt8(ascii: "9") { count += 1 }
    }
    return count
}

func printSampler(_ figures: SamplerFigures, size: Int) {
    let perProcess = figures.first.cpu * 1000 / Double(max(1, figures.listed))
    print(
        "sampler first sample (cold, parses all \(figures.listed) processes, \(figures.ofAccount) of them spawned; median of \(figures.coldSamples)): "
            + "\(format(figures.first.wall)) ms wall, \(format(figures.first.cpu)) ms CPU (\(format(perProcess)) us CPU per process, "
            + "with a SHA-256 of each distinct executable)")
    let reparse = figures.second.cpu * 1000 / Double(max(1, figures.listed))
    print(
        "sampler second sample (parses again every process first seen in the first, executables already hashed): "
            + "\(format(figures.second.wall)) ms wall, \(format(figures.second.cpu)) ms CPU (\(format(reparse)) us CPU per process)")
    print(
        "sampler tick at \(size) processes: median \(format3(figures.listing.wallMedian)) ms wall, "
            + "\(format3(figures.listing.cpuMedian)) ms CPU (target < 1 ms); p90 \(format3(figures.listing.wallP90)) ms, "
            + "max \(format3(figures.listing.wallMax)) ms wall [listing /proc, \(figures.listing.count) ticks]")
    print("  bare opendir/readdir of /proc at \(size) processes (the kernel's share of any listing): \(figures.bareListing.text)")
    print("sampler tick at \(size) processes, nothing started or exited (listing skipped): \(figures.quiet.text)")
    print("sampler tick at \(size) processes, one process exited and one started per tick: \(figures.churn.text)")
}

func printTimekpr(_ scan: TimekprProbe.Figures, curfew: SamplerFigures, size: Int) {
    print(
        "timekpr-next \(scan.version) PlayTime scan at \(size) processes (\(scan.cachedProcesses) cached, "
            + "\(scan.userProcesses) of the user, \(scan.matchedProcesses) matching its mask): "
            + "first \(format(scan.coldWall)) ms wall, \(format(scan.coldCPU)) ms CPU; "
            + "median \(format3(scan.medianWall)) ms wall, \(format3(scan.medianCPU)) ms CPU, p90 \(format3(scan.p90Wall)) ms, "
            + "max \(format3(scan.maxWall)) ms wall [\(scan.scans) scans]")
    let steady = scan.medianWall / curfew.listing.wallMedian
    let steadyCPU = scan.medianCPU / curfew.listing.cpuMedian
    let cold = scan.coldWall / curfew.first.wall
    let coldCPU = scan.coldCPU / curfew.first.cpu
    let quiet = scan.medianWall / curfew.quiet.wallMedian
    print(
        "ratio Timekpr/Curfew at \(size) processes: steady tick \(format(steady))x wall, \(format(steadyCPU))x CPU "
            + "(both list /proc; \(format(quiet))x against Curfew's tick when nothing started); "
            + "first scan \(format(cold))x wall, \(format(coldCPU))x CPU")
}

func printAgent(_ figures: AgentProbe.Figures, label: String, mode: String) {
    var cpu = "\(format3(figures.cpuShare * 100))% of one core (utime+stime \(format(figures.windowCPUMilliseconds)) ms in \(format(figures.windowSeconds)) s, 10 ms resolution"
    cpu += "); \(format(figures.wakeupsPerSecond)) wakeups/s (voluntary context switches of all threads)"
    if let started = figures.tasksStarted { cpu += "; \(started) PIDs handed out machine-wide meanwhile" }
    print("\(label) [\(mode)]: CPU \(cpu)")
    print(
        "\(label) [\(mode)]: RSS \(format(Double(figures.rssKiB) / 1024)) MiB "
            + "(anonymous \(format(Double(figures.anonymousRSSKiB) / 1024)) MiB, files \(format(Double(figures.fileRSSKiB) / 1024)) MiB; "
            + "peak \(format(Double(figures.peakRSSKiB) / 1024)) MiB), \(figures.threads) threads, "
            + "\(format(figures.startupCPUMilliseconds)) ms CPU before the window (startup, first listing); "
            + "exit status \(figures.exitStatus) after SIGTERM")
    let largest = figures.residentByMapping.prefix(6).map { "\($0.name) \(format(Double($0.kib) / 1024))" }
    print("\(label) [\(mode)]: resident MiB by mapping, largest first: \(largest.joined(separator: ", "))")
    for line in figures.logProblems.prefix(5) { print("  curfewd log: \(line)") }
}
