import ArgumentParser
import CurfewCore
import CurfewSync

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set up the state directory, the shared directory and this parent's signing key.",
        discussion: """
            Creates the state directory (mode 0700), a new Ed25519 signing key (mode 0600) which this \
            computer then trusts, the database, and the shared directory's records/ and confirmations/. \
            Running it again keeps the existing key. An existing state directory is made private (0700, \
            its files 0600; each change is printed); one that belongs to another user is refused.
            """)

    @OptionGroup var location: LocationOptions

    func run() throws {
        let workspace = Workspace(location)
        // Someone else's directory is refused before anything is written into it.
        var changes = Files.isDirectory(workspace.stateDirectory) ? try secureState(workspace.stateDirectory) : []
        try Files.makeDirectories(workspace.stateDirectory, mode: 0o700)
        let (key, created) = try workspace.keyRing.createSigningKeyIfMissing()
        try workspace.keyRing.trust(key.publicKey)
        _ = try workspace.openStore()
        try workspace.shared.create()
        changes += try secureState(workspace.stateDirectory)
        Output.line("state directory: \(workspace.stateDirectory)")
        for change in changes { Output.line("made private: \(change)") }
        Output.line("shared directory: \(workspace.shared.path)")
        Output.line(
            created
                ? "created signing key \(key.id) (\(workspace.keyRing.signingKeyPath)) and trusted it"
                : "signing key \(key.id) already exists; kept it")
    }

    private func secureState(_ directory: String) throws -> [StatePermissions.Change] {
        do {
            return try StatePermissions.secure(directory)
        } catch let error as StatePermissions.ForeignOwner {
            throw CLIError(error.description, .notPermitted)
        }
    }
}
