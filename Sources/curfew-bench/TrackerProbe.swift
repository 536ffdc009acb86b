import CurfewAgent
import CurfewCore
import CurfewStore
import CurfewSync
import Foundation
import Logging
import CurfewLinux

#if canImport(Glibc)
    import Glibc
#endif

/// The agent's `Tracker` in this process, with the bench account managed: what one tick costs on
/// top of the sampler (grouping processes by user, matching apps, crediting time, flushing to SQLite
/// every 2 s). With the process connector (as curfewd runs by default) the events queued between
/// ticks are applied between them, untimed, as the agent's loop does; polling, each tick lists /proc
/// when something started and checks managed processes for an exec.
enum TrackerProbe {
    struct Figures {
        var first: Timing
        var ticks: Summary
        /// Processes of the account the tracker's sampler holds after the ticks.
        var ofAccount: Int
        var usesProcessConnector: Bool
    }

    static func measure(account: BenchAccount, directory: String, ticks: Int, processConnector: Bool = false) throws -> Figures {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let state = AgentState()
        state.setPolicies([account.name: Policy.defaults(for: account.name)], versions: [account.name: 1])
        let store = try StateStore(path: "\(directory)/curfew.db")
        let environment = ProcessInfo.processInfo.environment
        let catalogDirectories =
            (environment["CURFEW_CATALOG_DIRS"] ?? "").isEmpty
            ? ["\(packageRoot)/policies/apps"] : CatalogFiles.directories(environment: environment)
        let catalog = try CatalogFiles.load(directories: catalogDirectories)
        let tracker = Tracker(
            state: state, store: store, catalog: catalog,
            logger: Logger(label: "curfew-bench", factory: { _ in SwiftLogNoOpLogHandler() }),
            useProcessConnector: processConnector)
        tracker.start()
        let first = timed { tracker.tick() }.1
        var timings: [Timing] = []
        for _ in 0..<ticks {
            usleep(2_000)
            tracker.applyPendingEvents()
            timings.append(timed { tracker.tick() }.1)
        }
        tracker.flush(force: true)
        let ofAccount = tracker.watch.sampler.cached.values.count { $0.uid == account.uid }
        return Figures(
            first: first, ticks: Summary(timings), ofAccount: ofAccount, usesProcessConnector: tracker.watch.usesProcessConnector)
    }
}
