import ArgumentParser
import CurfewCore
import CurfewLinux
import CurfewSync
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `curfew sync setup --syncthing`: this computer's half of sharing policy through Syncthing.
struct SyncSetup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "setup",
        abstract: "Share the shared directory through the local Syncthing (folder id curfew).",
        discussion: """
            As root, with Syncthing running as root (systemctl enable --now syncthing@root): makes FOLDER \
            root's 0700 directory with .stfolder and a .stignore for Curfew's temporary names, moves the \
            shared directory's files into it and makes the shared directory a symlink to it, writes the \
            ReadWritePaths drop-in of curfewd.service and reloads it, configures Syncthing through its \
            REST API (folder curfew, send-receive, file watcher on with a 1 s delay, permissions not \
            ignored; the API key and address come from Syncthing's config.xml), and enrols this computer \
            when it holds a parent key. What remains: introducing the two computers' Syncthing devices to \
            each other and sharing folder curfew between them, then curfew pair / curfew join.
            """)

    @OptionGroup var location: LocationOptions
    @Flag(name: .long, help: "Use Syncthing (the only sync tool sync setup knows).") var syncthing = false
    @Option(name: .long, help: ArgumentHelp("The synced folder (default /srv/curfew-shared).", valueName: "dir"))
    var folder: String = "/srv/curfew-shared"
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Syncthing's home (its -home; default: $CURFEW_SYNCTHING_HOME, else the -home of the Syncthing running as root, else root's).",
            valueName: "dir"))
    var syncthingHome: String?

    static let watcherDelaySeconds = 1
    static let dropInName = "curfew-syncthing.conf"

    func run() throws {
        guard syncthing else {
            throw CLIError("sync setup needs --syncthing (the only sync tool it sets up)", .invalidArguments)
        }
        do { try SyncthingFolder.check(folder) } catch { throw CLIError(error.description, .invalidArguments) }
        let workspace = Workspace(location)
        try workspace.requireStateDirectory()
        guard geteuid() == 0 else {
            throw CLIError("sync setup must run as root (the folder is root's, and so is Syncthing)", .notPermitted)
        }
        // Everything is checked before anything changes.
        let (home, config) = try Self.findSyncthing(home: syncthingHome)
        let api: SyncthingAPI
        do { api = try SyncthingAPI(config: config.config) } catch { throw CLIError(error.description, .unavailable) }
        let deviceID: String
        do {
            guard case .object(let status)? = try api.call("GET", "/rest/system/status"), case .string(let id)? = status["myID"] else {
                throw CLIError("Syncthing's /rest/system/status did not name this device", .unavailable)
            }
            deviceID = id
        } catch let error as SyncthingAPI.Failure { throw CLIError(error.description, .unavailable) }
        let sharedPath = workspace.shared.path
        let sharedNow = SyncthingFolder.ownerAndMode(sharedPath)
        var isLinkToFolder = false
        if let link = try? FileManager.default.destinationOfSymbolicLink(atPath: sharedPath) {
            let target = link.hasPrefix("/") ? link : "\(Files.parentDirectory(of: sharedPath))/\(link)"
            isLinkToFolder = Self.realPath(target) == Self.realPath(folder) || target == folder
            guard isLinkToFolder else {
                throw CLIError("the shared directory \(sharedPath) is already a symlink to \(link), not to \(folder)", .invalidArguments)
            }
        } else if let sharedNow, !sharedNow.isDirectory {
            throw CLIError("the shared directory \(sharedPath) exists and is not a directory", .invalidArguments)
        }
        if let existing = config.config.folder(), Self.realPath(existing.path) != Self.realPath(folder) && existing.path != folder {
            throw CLIError(
                "Syncthing's folder curfew is already \(existing.path), not \(folder) (use --folder \(existing.path))", .invalidArguments)
        }

        var done: [String] = []
        done += try SyncthingFolder.prepare(folder)
        if !isLinkToFolder {
            if sharedNow != nil {
                var moved = 0
                for name in try Files.list(sharedPath) {
                    guard !Files.exists("\(folder)/\(name)") else { continue }
                    try FileManager.default.moveItem(atPath: "\(sharedPath)/\(name)", toPath: "\(folder)/\(name)")
                    moved += 1
                }
                let leftOver = try Files.list(sharedPath)
                if leftOver.isEmpty {
                    try FileManager.default.removeItem(atPath: sharedPath)
                } else {
                    let aside = "\(sharedPath).before-syncthing"
                    try FileManager.default.moveItem(atPath: sharedPath, toPath: aside)
                    done.append("kept what the folder already had of the old shared directory in \(aside)")
                }
                done.append("moved \(moved) entr\(moved == 1 ? "y" : "ies") of \(sharedPath) into \(folder)")
            }
            try FileManager.default.createSymbolicLink(atPath: sharedPath, withDestinationPath: folder)
            done.append("made \(sharedPath) a symlink to \(folder)")
        }
        try SharedDirectory(path: folder).create()
        done += try writeDropIn()
        do {
            done.append(try Self.configureFolder(api: api, config: config.config, deviceID: deviceID, folder: folder))
        } catch let error as SyncthingAPI.Failure { throw CLIError(error.description, .unavailable) }
        if Files.exists(workspace.keyRing.signingKeyPath) {
            let machine = try MachineIdentity.load(stateDirectory: workspace.stateDirectory, override: Self.machineIDOverride)
            _ = try workspace.shared.publish(machine.announcement)
            if let author = try workspace.shared.enrolWithOwnParentKey(machine, now: Workspace.now()) {
                done.append("enrolled this computer (\(machine.id)) with parent key \(author)")
            } else {
                done.append("this computer (\(machine.id)) is enrolled already")
            }
        }
        for line in done { Output.line(line) }
        Output.line("Syncthing (\(home ?? "root's home")): this device is \(deviceID)")
        Output.line("what remains:")
        Output.line("  1. on the other computer: curfew sync setup --syncthing (same folder path is not required)")
        Output.line("  2. in Syncthing on each computer: add the other device (its ID) and share folder curfew with it")
        Output.line("  3. here: curfew pair; there: curfew join CODE (the parents' keys are exchanged and checked)")
    }

    /// `$CURFEW_MACHINE_ID`, as curfewd reads it, so the enrolment names the id the agent announces.
    static var machineIDOverride: String? {
        ProcessInfo.processInfo.environment["CURFEW_MACHINE_ID"].flatMap { $0.isEmpty ? nil : $0 }
    }

    static func realPath(_ path: String) -> String {
        URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path
    }

    /// Syncthing's config for `home` (flag, environment, the root instance's -home, root's default),
    /// after checking that Syncthing is installed and runs as root.
    static func findSyncthing(home flag: String?) throws -> (home: String?, config: (path: String, config: SyncthingConfig)) {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let candidates = path.split(separator: ":").map { "\($0)/syncthing" } + ["/usr/bin/syncthing"]
        let installed = candidates.contains { (candidate: String) in access(candidate, X_OK) == 0 }
        guard installed else {
            throw CLIError("Syncthing is not installed (apt-get install syncthing); nothing changed", .unavailable)
        }
        let running = RunningPrograms.named("syncthing")
        let asRoot = running.filter { $0.uid == 0 }
        guard !asRoot.isEmpty else {
            if let other = running.first {
                throw CLIError(
                    "Syncthing runs as uid \(other.uid), not as root: the folder must be root's (systemctl enable --now syncthing@root); nothing changed",
                    .unavailable)
            }
            throw CLIError("Syncthing is not running as root (systemctl enable --now syncthing@root); nothing changed", .unavailable)
        }
        let homes = Set(asRoot.compactMap { homeArgument($0.arguments) })
        let home: String?
        if let chosen = flag ?? LocalSyncthing.home {
            let defaults = ["/root/.config/syncthing", "/root/.local/state/syncthing"]
            guard asRoot.contains(where: { homeArgument($0.arguments).map { $0 == chosen } ?? defaults.contains(chosen) }) else {
                throw CLIError("no Syncthing runs as root with home \(chosen) (syncthing -home \(chosen)); nothing changed", .unavailable)
            }
            home = chosen
        } else if homes.count > 1 {
            throw CLIError(
                "several Syncthing instances run as root (homes \(homes.sorted().joined(separator: ", "))): choose one with --syncthing-home",
                .invalidArguments)
        } else {
            home = homes.first
        }
        var found: (path: String, config: SyncthingConfig)?
        do { found = try SyncthingConfig.load(home: home) } catch {
            throw CLIError("cannot read Syncthing's config.xml: \(error)", .unavailable)
        }
        guard found != nil else {
            let places = SyncthingConfig.candidatePaths(home: home, userHome: "/root").joined(separator: " or ")
            throw CLIError("Syncthing's configuration is not at \(places); nothing changed", .unavailable)
        }
        // The instance of this home may listen elsewhere than its config.xml says (-gui-address).
        let instance = asRoot.first { homeArgument($0.arguments) == home }
        if let address = instance.flatMap({ argument(["-gui-address", "--gui-address"], in: $0.arguments) }) {
            found!.config.guiAddress = address.replacingOccurrences(of: "http://", with: "")
        }
        return (home, found!)
    }

    /// The value of `-home DIR`, `--home DIR`, `-home=DIR` or `--home=DIR`.
    static func homeArgument(_ arguments: [String]) -> String? { argument(["-home", "--home"], in: arguments) }

    static func argument(_ flags: [String], in arguments: [String]) -> String? {
        for (index, argument) in arguments.enumerated() {
            for flag in flags {
                if argument == flag, index + 1 < arguments.count { return arguments[index + 1] }
                if argument.hasPrefix(flag + "=") { return String(argument.dropFirst(flag.count + 1)) }
            }
        }
        return nil
    }

    /// The drop-in that lets curfewd (ProtectSystem=strict) write the folder, and the reload.
    func writeDropIn() throws -> [String] {
        let systemdDirectory = ProcessInfo.processInfo.environment["CURFEW_SYSTEMD_DIR"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "/etc/systemd/system"
        let directory = "\(systemdDirectory)/curfewd.service.d"
        let text = """
            # Written by curfew sync setup --syncthing: curfewd writes its confirmations and usage into the synced folder.
            [Service]
            ReadWritePaths=\(folder)

            """
        var done: [String] = []
        try Files.makeDirectories(directory, mode: 0o755)
        let existing = try? Files.readRegularFile("\(directory)/\(Self.dropInName)", maxBytes: 1 << 16)
        if existing != Array(text.utf8) {
            try Files.writeAtomically(Array(text.utf8), directory: directory, name: Self.dropInName, mode: 0o644)
            done.append("wrote \(directory)/\(Self.dropInName) (ReadWritePaths=\(folder))")
        }
        let pid1 = (try? String(contentsOfFile: "/proc/1/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        guard pid1 == "systemd", Files.isDirectory("/run/systemd/system") else {
            done.append(
                "systemd is not PID 1 here (\(pid1 ?? "unknown")): did not reload curfewd.service (where it runs: systemctl daemon-reload && systemctl try-restart curfewd)")
            return done
        }
        for arguments in [["daemon-reload"], ["try-restart", "curfewd.service"]] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/systemctl")
            process.arguments = arguments
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw CLIError("systemctl \(arguments.joined(separator: " ")) failed (exit \(process.terminationStatus))", .failure)
            }
        }
        done.append("reloaded systemd and restarted curfewd.service if it was running")
        return done
    }

    /// Adds folder `curfew` to Syncthing, or sets the fields Curfew needs on the one it has.
    static func configureFolder(api: SyncthingAPI, config: SyncthingConfig, deviceID: String, folder: String) throws -> String {
        let settings = SyncthingObjects.FolderSettings(path: folder, fsWatcherDelayS: watcherDelaySeconds)
        let existing = try api.request("GET", "/rest/config/folders/\(SyncthingConfig.folderID)")
        if existing.status == 200 {
            try api.call("PATCH", "/rest/config/folders/\(SyncthingConfig.folderID)", sending: settings)
            return "set Syncthing's folder curfew to \(folder): send-receive, watcher on with a \(watcherDelaySeconds) s delay, permissions kept"
        }
        try api.call(
            "POST", "/rest/config/folders",
            sending: SyncthingObjects.Folder(
                id: SyncthingConfig.folderID, label: "Curfew", settings: settings, devices: [.init(deviceID: deviceID)]))
        return "added folder curfew (\(folder)) to Syncthing: send-receive, watcher on with a \(watcherDelaySeconds) s delay, permissions kept"
    }
}
