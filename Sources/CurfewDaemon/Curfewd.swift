import ArgumentParser
import CurfewAgent
import CurfewCore
import CurfewLinux
import CurfewStore
import CurfewSync
import Foundation
import Logging
import ServiceLifecycle
import UnixSignals

/// `curfewd`: flags, logging, and the agent's ServiceGroup (a library, so the multi-call program can run it).
public struct Curfewd: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "curfewd",
        abstract: "The Curfew agent: counts managed users' screen and app time and enforces their rules.",
        version: Agent.version)

    @Option(help: ArgumentHelp("State directory (default: $CURFEW_STATE_DIR, else /var/lib/curfew).", valueName: "dir"))
    var stateDir: String?

    @Option(help: ArgumentHelp("Shared directory (default: $CURFEW_SHARED_DIR, else <state-dir>/shared).", valueName: "dir"))
    var sharedDir: String?

    @Option(help: ArgumentHelp("Seconds between ticks.", valueName: "seconds"))
    var tick: Double = 1

    @Option(help: ArgumentHelp("The agent's socket (default: $CURFEW_SOCKET, else /run/curfew/curfewd.sock).", valueName: "path"))
    var socket: String?

    @Option(help: ArgumentHelp("D-Bus address of systemd-logind (default: the system bus), or none.", valueName: "address"))
    var logindBus: String?

    @Flag(help: "Poll /proc (every 100 ms for apps to stop) instead of following the kernel's process connector.")
    var noProcessConnector = false

    @Option(help: ArgumentHelp("Seconds between checks for apps to stop when polling (the benchmark's slow reference).", visibility: .hidden))
    var enforcementPoll: Double = 0.1

    @Flag(help: "Let a managed user with no valid policy in unrestricted (default: no screen time, logins refused).")
    var failOpen = false

    @Option(help: ArgumentHelp("Seconds between SIGTERM and SIGKILL when an app is stopped.", valueName: "seconds"))
    var stopGrace: Double = 2

    @Option(help: ArgumentHelp(
        "Seconds past a child's zero at which systemd ends their sessions if the agent has not (their scopes' RuntimeMaxSec; 1-3600).",
        valueName: "seconds"))
    var beltGrace: Double = 60

    @Option(help: ArgumentHelp("Where users' runtime directories with their session bus are.", valueName: "dir"))
    var userRuntimeRoot = "/run/user"

    @Option(help: ArgumentHelp("Seconds between rescans of the shared directory's records (besides inotify).", valueName: "seconds"))
    var rescan: Double = 30

    @Option(help: ArgumentHelp(
        "Seconds between usage summaries written to the shared directory while a managed user's time changes (1-60).",
        valueName: "seconds"))
    var usageInterval: Double = 30

    @Option(help: ArgumentHelp(
        "This computer's id in the shared directory (default: $CURFEW_MACHINE_ID, else /etc/machine-id, else one made once in the state directory).",
        valueName: "id"))
    var machineId: String?

    @Option(help: ArgumentHelp(
        "Days the audit log keeps each event; older ones are replaced by daily counts per user and kind (1 to 36500).",
        valueName: "days"))
    var eventRetention = AgentStateKeys.defaultEventRetentionDays

    // For tests only (hidden): the agent's clock runs ahead by the milliseconds written in this file,
    // read whenever the agent asks the time, so a test lives through a break without waiting for it.
    // Only root starts the agent, and the file must be root's and not writable by anyone else.
    @Option(help: ArgumentHelp("Move the agent's clock ahead by the milliseconds in this file (tests).", visibility: .private))
    var clockOffsetFile: String?

    @Option(help: ArgumentHelp(
        "Seconds between looks at a time zone's file in the tz database for changes (1-3600).", valueName: "seconds",
        visibility: .hidden))
    var zoneRecheck = 60

    @Option(help: ArgumentHelp(
        "on: deny the exec of a blocked app before it runs, where the kernel (fanotify) and CAP_SYS_ADMIN allow it; off: only stop apps after they start.",
        valueName: "on|off"))
    var execGuard = "on"

    @Option(help: ArgumentHelp("A test's hook: milliseconds the exec guard stalls before deciding a managed user's exec.", visibility: .hidden))
    var execGuardStall: Int64 = 0

    @Flag(help: ArgumentHelp(
        "Set up the exec guard (fanotify) as the agent would, say whether it works here, remove it and exit (0: it does).",
        visibility: .hidden))
    var checkExecGuard = false

    public init() {}

    /// Makes the agent's quiet executor Swift concurrency's global one (QuietGlobalExecutor:
    /// libdispatch's would wake the agent once a second). The program's top-level code calls it before
    /// its first `await`: calling `start()` already hops to the global executor.
    public static func installExecutor() {
        QuietGlobalExecutor.install()
    }

    /// Parses the program's arguments and runs the agent, as `@main` would (a plain call of `main()`
    /// from another module picks ParsableCommand's synchronous one, which cannot run an async command).
    public static func start() async {
        do {
            var command = try parseAsRoot()
            if let agent = command as? Curfewd {
                try await agent.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }

    public func validate() throws {
        guard execGuard == "on" || execGuard == "off" else { throw ValidationError("exec guard must be on or off, got \(execGuard)") }
        guard execGuardStall >= 0 && execGuardStall <= 60_000 else {
            throw ValidationError("exec guard stall must be between 0 and 60000 milliseconds, got \(execGuardStall)")
        }
        if let clockOffsetFile {
            var status = stat()
            guard stat(clockOffsetFile, &status) == 0, status.st_uid == 0, status.st_mode & 0o022 == 0 else {
                throw ValidationError("clock offset file must exist, be root's and writable by root only, got \(clockOffsetFile)")
            }
        }
        guard zoneRecheck >= 1 && zoneRecheck <= 3600 else {
            throw ValidationError("zone recheck must be between 1 and 3600 seconds, got \(zoneRecheck)")
        }
        guard eventRetention >= 1 && eventRetention <= 36_500 else {
            throw ValidationError("event retention must be between 1 and 36500 days, got \(eventRetention)")
        }
        guard tick >= 0.05 && tick <= 60 else { throw ValidationError("tick must be between 0.05 and 60 seconds, got \(tick)") }
        guard enforcementPoll >= 0.01 && enforcementPoll <= 60 else {
            throw ValidationError("enforcement poll must be between 0.01 and 60 seconds, got \(enforcementPoll)")
        }
        guard beltGrace >= 1 && beltGrace <= 3600 else {
            throw ValidationError("belt grace must be between 1 and 3600 seconds, got \(beltGrace)")
        }
        guard stopGrace >= 0 && stopGrace <= 60 else {
            throw ValidationError("stop grace must be between 0 and 60 seconds, got \(stopGrace)")
        }
        guard rescan >= 0.1 && rescan <= 86_400 else {
            throw ValidationError("rescan must be between 0.1 and 86400 seconds, got \(rescan)")
        }
        guard usageInterval >= 1 && usageInterval <= 60 else {
            throw ValidationError("usage interval must be between 1 and 60 seconds, got \(usageInterval)")
        }
        if let machineId, !MachineIdentity.isValidID(machineId) {
            throw ValidationError("machine id must be 1 to 64 letters, digits, - or _, got \(machineId)")
        }
    }

    public func run() async throws {
        // Time zones come from the system's tz database, looked at again for a tzdata upgrade.
        ZoneDatabase.install(SystemZones(recheckSeconds: Int64(zoneRecheck)))
        if checkExecGuard {
            do {
                let execGuard = try ExecGuard(identities: FileIdentityCache())
                let (marked, failed) = execGuard.markMounts()
                execGuard.removeMarks()
                print("exec guard: available; \(marked.count) filesystems marked" + failed.map { "; cannot mark \($0.0): \($0.1)" }.joined())
            } catch {
                print("exec guard: unavailable: \(error)")
                throw ExitCode(1)
            }
            return
        }
        let environment = ProcessInfo.processInfo.environment
        let state = Locations.stateDirectory(stateDir, environment: environment)
        let shared = Locations.sharedDirectory(sharedDir, stateDirectory: state, environment: environment)
        let socketPath = Locations.socket(socket, environment: environment)
        let useJournal = JournalLogHandler.journalIsAvailable() && environment["CURFEW_LOG"] != "stderr"
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler = useJournal ? JournalLogHandler(label: label) : StreamLogHandler.standardError(label: label)
            handler.logLevel = environment["CURFEW_DEBUG"] == nil ? .info : .debug
            return handler
        }
        let logger = Logger(label: "curfewd")
        if !QuietGlobalExecutor.isInstalled {
            logger.notice("could not start the agent's own executor threads: Swift concurrency runs on libdispatch's (it wakes once a second)")
        }
        var configuration = AgentConfiguration(
            stateDirectory: state, sharedDirectory: shared, socketPath: socketPath,
            tickMilliseconds: Int64(tick * 1000),
            catalogDirectories: CatalogFiles.directories(environment: environment),
            logindBusAddress: logindBus, useProcessConnector: !noProcessConnector,
            rescanMilliseconds: Int64(rescan * 1000))
        configuration.machineID = machineId ?? environment["CURFEW_MACHINE_ID"].flatMap { $0.isEmpty ? nil : $0 }
        if let clockOffsetFile {
            configuration.clock = .offset(byMillisecondsIn: clockOffsetFile)
            logger.warning("the agent's clock is moved by a test file", metadata: ["file": "\(clockOffsetFile)"])
        }
        // --fail-open, else CURFEW_FAIL_MODE from the environment, else from /etc/default/curfew.
        let configured = DefaultsFile.failMode(environment: environment)
        if let error = configured.error { logger.error("\(error)") }
        configuration.failOpen = failOpen || configured.mode == .open
        configuration.stopGraceMilliseconds = Int64(stopGrace * 1000)
        configuration.beltGraceMilliseconds = Int64(beltGrace * 1000)
        configuration.userRuntimeRoot = userRuntimeRoot
        configuration.enforcementPollMilliseconds = Int64(enforcementPoll * 1000)
        configuration.usageIntervalMilliseconds = Int64(usageInterval * 1000)
        configuration.eventRetentionDays = eventRetention
        configuration.execGuard = execGuard == "on"
        configuration.execGuardStallMilliseconds = execGuardStall
        let agent: Agent
        do {
            agent = try Agent(configuration: configuration, logger: logger)
        } catch {
            logger.critical("cannot start", metadata: ["error": "\(error)"])
            throw ExitCode(69)
        }
        let group = ServiceGroup(
            configuration: .init(
                services: agent.services().map {
                    ServiceGroupConfiguration.ServiceConfiguration(
                        service: $0, successTerminationBehavior: .gracefullyShutdownGroup,
                        failureTerminationBehavior: .gracefullyShutdownGroup)
                },
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
    }
}


