import ArgumentParser
import CurfewAgent
import CurfewLinux
import CurfewSync
import Foundation
import Logging
import ServiceLifecycle

/// `curfewd`: flags, logging, and the agent's ServiceGroup.
@main
struct Curfewd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "curfewd",
        abstract: "The Curfew agent: tracks managed users' screen and app time and keeps it in SQLite.",
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

    @Flag(help: "Poll /proc every tick instead of following the kernel's process connector.")
    var noProcessConnector = false

    func validate() throws {
        guard tick >= 0.05 && tick <= 60 else { throw ValidationError("tick must be between 0.05 and 60 seconds, got \(tick)") }
    }

    func run() async throws {
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
        let configuration = AgentConfiguration(
            stateDirectory: state, sharedDirectory: shared, socketPath: socketPath,
            tickMilliseconds: Int64(tick * 1000),
            catalogDirectories: CatalogFiles.directories(environment: environment),
            logindBusAddress: logindBus, useProcessConnector: !noProcessConnector)
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


