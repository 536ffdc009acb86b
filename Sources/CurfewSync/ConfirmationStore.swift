#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif
import SystemPackage
import CurfewCore

/// Writes this computer's confirmations into `<shared-dir>/confirmations/<machine-id>/` and reads
/// any computer's back.
public struct ConfirmationStore: Sendable {
    public let shared: SharedDirectory
    public let machine: MachineIdentity

    public init(shared: SharedDirectory, machine: MachineIdentity) {
        self.shared = shared
        self.machine = machine
    }

    public var directory: String { shared.confirmationsPath(of: machine.id) }

    /// Signs and writes each confirmation (replacing an older one of the same record) through a
    /// temporary dot name and a rename, then syncs the directory once. Returns the ids written; the
    /// first failure ends the batch (the directory is read-only, full, or not a directory) and is
    /// returned with them, so the caller keeps the rest pending.
    public func write(_ confirmations: [Confirmation]) -> (written: [String], failure: FileError?) {
        guard !confirmations.isEmpty else { return ([], nil) }
        let directoryDescriptor: FileDescriptor
        // Not through a symlink at either level (SharedDirectory.openDirectory).
        do { directoryDescriptor = try shared.openDirectory(["confirmations", machine.id]) } catch { return ([], error) }
        defer { try? directoryDescriptor.close() }
        // Deriving the key id expands the private key (as costly as a signature): once per batch.
        let keyID = machine.key.id
        for confirmation in confirmations {
            precondition(confirmation.machine == machine.id && confirmation.key == keyID)
        }
        let documents: [[UInt8]]
        do { documents = try machine.signAll(confirmations) } catch {
            return ([], FileError(.signConfirmations, directory, errno: .invalidArgument))
        }
        var written: [String] = []
        for (confirmation, bytes) in zip(confirmations, documents) {
            do {
                // No fsync per file, so catching up on thousands of records stays fast: the directory
                // is synced once per batch, and the agent checks at start that every confirmation it
                // believes written is there and not empty.
                try Files.writeAtomically(
                    bytes, directory: directory, descriptor: directoryDescriptor, name: confirmation.record, mode: 0o644, sync: false)
                written.append(confirmation.record)
            } catch {
                return (written, error)
            }
        }
        fsync(directoryDescriptor.rawValue)
        return (written, nil)
    }

    /// Whether the confirmation of `record` is on disk and not empty (a crash before the data
    /// reached the disk can leave an empty file behind a rename).
    public func isOnDisk(_ record: String) -> Bool {
        guard let (identity, isRegular) = try? Files.identity("\(directory)/\(record)") else { return false }
        return isRegular && identity.size > 0
    }

    /// Reads `path` strictly and verifies it with `key`, the machine's enrolled key (`MachineRoster`).
    public static func read(path: String, machine: String, record: String, key machineKey: Result<PublicKey, RecordError>)
        -> Result<Confirmation, RecordError>
    {
        let bytes: [UInt8]
        do { bytes = try Files.readRegularFile(path, maxBytes: ConfirmationFormat.maxBytes) } catch {
            return .failure(RecordError(error.description))
        }
        let confirmation: Confirmation
        let signature: String
        do { (confirmation, signature) = try Confirmation.parse(bytes) } catch { return .failure(error) }
        guard confirmation.machine == machine, confirmation.record == record else {
            return .failure(RecordError("confirmation names another machine or record than its path"))
        }
        let key: PublicKey
        switch machineKey {
        case .success(let enrolled): key = enrolled
        case .failure(let error): return .failure(error)
        }
        guard key.id == confirmation.key, key.verifies(signature, of: confirmation) else {
            return .failure(RecordError("signature does not verify with the key of machine \(machine)"))
        }
        return .success(confirmation)
    }
}
