import CurfewCore

/// The key each other computer signs with, as this computer first saw it (or a parent set it):
/// `<state-dir>/keys/machines/<machine-id>.pub`, one line of base64.
///
/// `machines/<id>.json` in the shared directory is written by that computer itself, so anyone who can
/// write to the shared directory can replace it. Pinning the first key seen for a machine id means a
/// later replacement (to forge confirmations or usage summaries in that computer's name) is refused
/// rather than believed. A computer that really got a new key (reinstalled, new state directory) is
/// trusted again by a parent: `curfew key trust --machine ID FILE`.
public struct MachineKeyPins: Sendable {
    public let directory: String

    public init(stateDirectory: String) { directory = "\(stateDirectory)/keys/machines" }

    func path(of machine: String) -> String { "\(directory)/\(machine).pub" }

    /// The pinned key of `machine`, if any (nil also when the pin file is damaged: see `key(for:announced:)`).
    public func pinned(_ machine: String) -> PublicKey? {
        guard MachineID.isValid(machine), let bytes = try? Files.readRegularFile(path(of: machine), maxBytes: 4096) else {
            return nil
        }
        return PublicKey(base64: String(decoding: bytes, as: UTF8.self))
    }

    /// Every pinned computer and its key, by machine id.
    public func all() -> [(machine: String, key: PublicKey)] {
        let names = (try? Files.list(directory)) ?? []
        return names.sorted().compactMap { name in
            guard name.hasSuffix(".pub") else { return nil }
            let machine = String(name.dropLast(4))
            return pinned(machine).map { (machine, $0) }
        }
    }

    /// Sets the key of `machine` (a parent's explicit trust, or the first sight).
    public func pin(_ machine: String, key: PublicKey) throws(FileError) {
        try Files.makeDirectories(directory, mode: 0o700)
        try Files.writeAtomically(Array((key.base64 + "\n").utf8), directory: directory, name: "\(machine).pub", mode: 0o600)
    }

    /// The key to verify `machine`'s files with: the pinned one when there is one (an announced key that
    /// differs is refused); else the announced key, pinned now when this computer can write its state
    /// directory (trust on first sight; a reader that cannot write, such as a child's CLI, still uses
    /// it for this one reading).
    public func key(for machine: String, announced: PublicKey) -> Result<PublicKey, RecordError> {
        if Files.exists(path(of: machine)) {
            guard let pinned = pinned(machine) else {
                return .failure(RecordError("the pinned key of machine \(machine) in \(directory) is damaged"))
            }
            guard pinned == announced else {
                return .failure(
                    RecordError(
                        "machine \(machine) now announces key \(announced.id), not the key \(pinned.id) first seen here "
                            + "(curfew key trust --machine \(machine) FILE trusts a new key)"))
            }
            return .success(pinned)
        }
        try? pin(machine, key: announced)
        return .success(announced)
    }
}
