import ArgumentParser
import CurfewCore
import CurfewSync
import Foundation

/// `curfew key show|export|trust|revoke`: which parent keys this computer accepts records from.
/// Trust lives in the state directory (`keys/trusted/`, `keys/revoked/`), never in the shared one.
struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Show, export, trust or revoke parent keys.",
        subcommands: [Show.self, Export.self, Trust.self, Revoke.self])

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show this computer's parent key and the keys it trusts.")
        @OptionGroup var location: LocationOptions
        @Flag(name: .long, help: "Print the result as JSON.") var json = false
        @Flag(name: .long, help: "Show this computer's machine key (what curfew sync enrol shows on another computer) instead.")
        var machine = false

        func run() throws {
            let workspace = Workspace(location)
            try workspace.requireStateDirectory()
            if machine { return try showMachineKey(workspace) }
            let key = try workspace.keyRing.loadSigningKey()
            let trusted = try workspace.keyRing.trustedKeys()
            let revoked = try workspace.keyRing.revocations()
            if json {
                Output.json(
                    KeysJSON(
                        id: key.id, publicKey: key.publicKey.base64,
                        trusted: trusted.keys.sorted().map { id in
                            KeysJSON.Trusted(id: id, publicKey: trusted[id]!.base64, revokedAt: revoked[id].map { utcTimestamp($0.time) })
                        },
                        machines: workspace.shared.roster().enrolled.compactMap { entry in
                            entry.key.map { KeysJSON.Machine(machine: entry.machine, id: $0.id, publicKey: $0.base64) }
                        }))
                return
            }
            Output.line("key id: \(key.id)")
            Output.line("public key: \(key.publicKey.base64)")
            Output.line("trusted keys:")
            for id in trusted.keys.sorted() {
                let note =
                    id == key.id ? " (this computer's)"
                    : revoked[id].map { " (revoked at \(utcTimestamp($0.time)))" } ?? ""
                Output.line("  \(id)\(note)")
            }
            let machines = workspace.shared.roster().enrolled
            if !machines.isEmpty {
                Output.line("enrolled computers' keys (confirmations and usage summaries):")
                for entry in machines { Output.line("  \(entry.machine): \(entry.key?.id ?? "?")") }
            }
        }

        func showMachineKey(_ workspace: Workspace) throws {
            let key = try KeyCommand.machineKey(workspace)
            let fingerprint = KeyFingerprint.text(of: key.publicKey)
            if json {
                Output.json(MachineKeyJSON(id: key.id, fingerprint: fingerprint, publicKey: key.publicKey.base64))
                return
            }
            Output.line("machine key id: \(key.id)")
            Output.line("fingerprint: \(fingerprint)")
            Output.line("public key: \(key.publicKey.base64)")
        }
    }

    /// The machine key's id and fingerprint, to compare with what `curfew sync enrol` shows for this computer.
    static func machineKey(_ workspace: Workspace) throws -> SigningKey {
        guard Files.exists(workspace.keyRing.machineKeyPath) else {
            throw CLIError("this computer has no machine key yet (\(workspace.keyRing.machineKeyPath)): start curfewd once", .unavailable)
        }
        return try workspace.keyRing.createMachineKeyIfMissing()
    }

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write this computer's public key, for curfew key trust on another computer.")
        @OptionGroup var location: LocationOptions
        @Option(name: .long, help: ArgumentHelp("Write to this file instead of standard output.", valueName: "file"))
        var output: String?
        @Flag(name: .long, help: "Export this computer's machine key (it signs confirmations and usage summaries) instead.")
        var machine = false

        func run() throws {
            let workspace = Workspace(location)
            try workspace.requireStateDirectory()
            let key: SigningKey
            if machine {
                key = try KeyCommand.machineKey(workspace)
            } else {
                key = try workspace.keyRing.loadSigningKey()
            }
            let text = KeyCommand.fileText(key.publicKey)
            guard let output else {
                print(text, terminator: "")
                return
            }
            do {
                try Data(text.utf8).write(to: URL(fileURLWithPath: output), options: .atomic)
            } catch {
                throw CLIError("cannot write \(output): \(error.localizedDescription)", .failure)
            }
            Output.line("wrote public key \(key.id) to \(output)")
        }
    }

    struct Trust: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Accept records signed by another parent's or computer's key.",
            discussion: """
                FILE is a public key as curfew key export writes it (one line of base64), or - for \
                standard input. Prints the key's id. With --machine ID it is instead the key computer ID \
                signs its confirmations and usage summaries with (curfew key export --machine on that \
                computer): it is enrolled with this computer's parent key, as curfew sync enrol ID --key \
                FILE --yes does.
                """)
        @OptionGroup var location: LocationOptions
        @Argument(help: "The public key file, or - for standard input.") var file: String
        @Option(name: .long, help: ArgumentHelp("Trust the key as the key of this computer (its machine id).", valueName: "id"))
        var machine: String?

        func run() throws {
            let bytes: [UInt8]
            if file == "-" {
                bytes = Array(FileHandle.standardInput.readDataToEndOfFile().prefix(KeyCommand.maxFileBytes + 1))
            } else {
                do {
                    bytes = try Files.readRegularFile(file, maxBytes: KeyCommand.maxFileBytes)
                } catch {
                    throw CLIError(error.description, error.isPermissionDenied ? .notPermitted : .invalidArguments)
                }
            }
            let key = try KeyCommand.parsePublicKey(bytes, source: file == "-" ? "standard input" : file)
            let workspace = Workspace(location)
            try workspace.requireStateDirectory()
            if let machine {
                guard MachineID.isValid(machine) else {
                    throw CLIError("machine id must be 1 to 64 letters, digits, - or _, got \(quoted(machine))", .invalidArguments)
                }
                let parent = try workspace.keyRing.loadSigningKey()
                let previous = workspace.shared.roster().entries[machine]?.key
                guard previous != key else {
                    Output.line("key \(key.id) is already the enrolled key of computer \(machine)")
                    return
                }
                let host = workspace.shared.announcement(machine)?.0.host ?? machine
                let enrolment = MachineEnrolment(
                    machine: machine, host: host, publicKey: key.base64, keyId: key.id, author: parent.id, time: Workspace.now().seconds)
                try workspace.shared.publish(enrolment, signedBy: parent)
                Output.line("computer \(machine) now signs with key \(key.id)\(previous.map { " (was \($0.id))" } ?? "")")
                return
            }
            let own = try workspace.keyRing.loadSigningKey()
            // A private key is 32 bytes of base64 too: trusting one by mistake would trust a key
            // nobody holds, and print a secret's name as if it were a public key.
            let privateText = (try? Files.readRegularFile(workspace.keyRing.signingKeyPath, maxBytes: KeyCommand.maxFileBytes))
                .map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) }
            if privateText == String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) {
                throw CLIError("key file \(file) holds this computer's private signing key, not a public key (use curfew key export)", .invalidArguments)
            }
            if let revocation = try workspace.keyRing.revocations()[key.id] {
                throw CLIError(
                    "key \(key.id) was revoked at \(utcTimestamp(revocation.time)) and cannot be trusted again", .invalidArguments)
            }
            if try workspace.keyRing.trustedKeys()[key.id] != nil {
                Output.line("key \(key.id) is already trusted\(key.id == own.id ? " (it is this computer's)" : "")")
                return
            }
            try workspace.keyRing.trust(key)
            Output.line("trusted key \(key.id)")
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop accepting new records signed by a key.",
            discussion: """
                The key's records and grants already in the shared directory keep counting; anything \
                else it signs is ignored with the reason "signed by revoked key ID", whatever time or \
                version it claims. The revocation is kept in <state-dir>/keys/revoked/ID.json. \
                This computer's own key cannot be revoked.
                """)
        @OptionGroup var location: LocationOptions
        @Argument(help: "The key id (16 hex digits, as curfew key show prints).") var id: String
        @Flag(name: .long, help: "Do not ask for confirmation.") var yes = false

        func run() throws {
            guard KeyID.isValid(id) else {
                throw CLIError("key id must be 16 lowercase hex digits, got \(quoted(id))", .invalidArguments)
            }
            let workspace = Workspace(location)
            try workspace.requireStateDirectory()
            let own = try workspace.keyRing.loadSigningKey()
            guard id != own.id else {
                throw CLIError("key \(id) is this computer's own parent key and cannot be revoked", .invalidArguments)
            }
            if let revocation = try workspace.keyRing.revocations()[id] {
                Output.line("key \(id) was already revoked at \(utcTimestamp(revocation.time))")
                return
            }
            guard try workspace.keyRing.trustedKeys()[id] != nil else {
                throw CLIError("key \(id) is not trusted here (see curfew key show)", .invalidArguments)
            }
            let scan = try workspace.scan()
            let records = scan.valid.filter { $0.author == id }
            let grants = scan.grants.filter { $0.author == id }
            var versions: [String: Int] = [:]
            for record in records { versions[record.user] = max(versions[record.user] ?? 0, record.version) }
            guard yes || Output.confirm("Revoke key \(id)? Records it signs from now on will be ignored.") else {
                throw CLIError("not confirmed; nothing changed", .failure)
            }
            let revocation = KeyRevocation(
                key: id, time: Workspace.now().seconds, versions: versions, records: records.map(\.id) + grants.map(\.id))
            _ = try workspace.keyRing.revoke(revocation)
            workspace.finish()
            let count = records.count + grants.count
            Output.line(
                "revoked key \(id): \(count) record\(count == 1 ? "" : "s") it signed before still count\(count == 1 ? "s" : ""); anything it signs from now on is ignored"
            )
        }
    }

    static let maxFileBytes = 4096

    /// A public key file: the key's raw 32 bytes in base64 on one line, as `keys/trusted/ID.pub`.
    static func fileText(_ key: PublicKey) -> String { key.base64 + "\n" }

    static func parsePublicKey(_ bytes: [UInt8], source: String) throws -> PublicKey {
        guard bytes.count <= maxFileBytes else {
            throw CLIError("key file \(source) must be at most \(maxFileBytes) bytes, got more", .invalidArguments)
        }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let data = Data(base64Encoded: text), data.count == 32, let key = PublicKey(base64: text) else {
            throw CLIError(
                "key file \(source) must hold one Ed25519 public key in base64 (as curfew key export writes it), got \(quoted(text))",
                .invalidArguments)
        }
        return key
    }
}

/// `curfew key show --json`: this computer's parent key, the keys it trusts and the computers'.
/// `curfew key show --machine --json`.
struct MachineKeyJSON: Encodable {
    var id: String
    var fingerprint: String
    var publicKey: String
}

struct KeysJSON: Encodable {
    struct Trusted: Encodable {
        var id: String
        var publicKey: String
        @OrNull var revokedAt: String?
    }

    struct Machine: Encodable {
        var machine: String
        var id: String
        var publicKey: String
    }

    var id: String
    var publicKey: String
    var trusted: [Trusted]
    var machines: [Machine]
}
