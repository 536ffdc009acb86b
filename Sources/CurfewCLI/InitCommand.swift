import ArgumentParser
import CurfewCore
import CurfewSync

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set up the state directory, the shared directory and this parent's signing key.",
        discussion: """
            Creates the state directory (mode 0700), a new Ed25519 signing key (mode 0600) which this \
            computer then trusts, the database, and the shared directory's records/ and confirmations/. \
            Running it again keeps the existing key.
            """)

    @OptionGroup var location: LocationOptions

    func run() throws {
        let workspace = Workspace(location)
        try translatingErrors {
            try Files.makeDirectories(workspace.stateDirectory, mode: 0o700)
            let (key, created) = try workspace.keyRing.createSigningKeyIfMissing()
            try workspace.keyRing.trust(key.publicKey)
            _ = try workspace.openStore()
            try workspace.shared.create()
            Output.line("state directory: \(workspace.stateDirectory)")
            Output.line("shared directory: \(workspace.shared.path)")
            Output.line(
                created
                    ? "created signing key \(key.id) (\(workspace.keyRing.signingKeyPath)) and trusted it"
                    : "signing key \(key.id) already exists; kept it")
        }
    }
}
