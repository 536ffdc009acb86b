import CurfewAgent
import CurfewCore
import CurfewStore
import CurfewSync
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// The agent's `Tracker` in this process, polling (no process connector), with the bench account
/// managed: what one tick costs on top of the sampler (grouping processes by user, matching apps,
/// crediting time, flushing to SQLite every 2 s).
enum TrackerProbe {
    struct Figures {
        var first: Timing
        var ticks: Summary
    }

    static func measure(account: BenchAccount, directory: String, ticks: Int) throws -> Figures {
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
            useProcessConnector: false)
        let first = timed { tracker.tick() }.1
        var timings: [Timing] = []
        for _ in 0..<ticks {
            usleep(2_000)
            timings.append(timed { tracker.tick() }.1)
        }
        tracker.flush(force: true)
        return Figures(first: first, ticks: Summary(timings))
    }
}
