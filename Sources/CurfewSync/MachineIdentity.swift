#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif
import Crypto
import CurfewCore
import Foundation
import Synchronization

/// Who this computer is in the shared directory: a machine id, its host name and its own Ed25519
/// key (`<state-dir>/keys/machine.key`, 0600), which signs its confirmations.
public struct MachineIdentity: Sendable {
    public let id: String
    public let host: String
    public let key: SigningKey

    public init(id: String, host: String, key: SigningKey) {
        self.id = id
        self.host = host
        self.key = key
    }

    /// 1 to 64 of `A-Z a-z 0-9 - _` (`MachineID.isValid`).
    public static func isValidID(_ text: String) -> Bool { MachineID.isValid(text) }

    /// Why the machine identity could not be set up.
    public struct SetupError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// The machine id: `override` (a flag or `CURFEW_MACHINE_ID`, so several agents can share one
    /// computer in tests) when given, else `/etc/machine-id` when readable and 32 hex digits, else a
    /// random id made once into `<state-dir>/machine-id`. The key is made on first use.
    public static func load(
        stateDirectory: String, override: String? = nil, systemMachineIDPath: String = "/etc/machine-id"
    ) throws -> MachineIdentity {
        let id = try machineID(stateDirectory: stateDirectory, override: override, systemPath: systemMachineIDPath)
        let key = try KeyRing(stateDirectory: stateDirectory).createMachineKeyIfMissing()
        return MachineIdentity(id: id, host: hostName(), key: key)
    }

    static func machineID(stateDirectory: String, override: String?, systemPath: String) throws -> String {
        if let override {
            guard MachineID.isValid(override) else {
                throw SetupError(description: "machine id must be 1 to 64 letters, digits, - or _, got \(quoted(override))")
            }
            return override
        }
        if let text = readID(systemPath), text.utf8.count == 32, isLowerHex(text) { return text }
        let path = "\(stateDirectory)/machine-id"
        if let text = readID(path), MachineID.isValid(text) { return text }
        let made = hexString((0..<16).map { _ in UInt8.random(in: 0...255) })
        try Files.makeDirectories(stateDirectory, mode: 0o700)
        try Files.writeAtomically(Array((made + "\n").utf8), directory: stateDirectory, name: "machine-id", mode: 0o600, replace: false)
        // Another process may have made one first: the file wins.
        return readID(path) ?? made
    }

    private static func readID(_ path: String) -> String? {
        guard let bytes = try? Files.readRegularFile(path, maxBytes: 256) else { return nil }
        return String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func isLowerHex(_ text: String) -> Bool {
        text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// gethostname(2), or "localhost" when it has none.
    public static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "localhost" : name
    }

    public var announcement: MachineAnnouncement {
        MachineAnnouncement(machine: id, host: host, publicKey: key.publicKey.base64, keyId: key.id)
    }

    /// Signs a confirmation as this machine.
    public func sign(_ confirmation: Confirmation) throws -> [UInt8] {
        try key.signedFile(confirmation)
    }

    /// Signs many confirmations with one expanded private key (expanding it costs as much as a
    /// signature), spread over the CPUs: catching up on thousands of records is mostly signing.
    func signAll(_ confirmations: [Confirmation]) throws -> [[UInt8]] {
        let raw = key.rawPrivateKey
        let workers = max(1, min(ProcessInfo.processInfo.activeProcessorCount, confirmations.count / 256))
        let results = Mutex<[Int: [UInt8]]>([:])
        let failed = Mutex(false)
        ParallelWork.run(workers: workers) { worker in
            guard let privateKey = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw) else {
                failed.withLock { $0 = true }
                return
            }
            var mine: [Int: [UInt8]] = [:]
            for index in stride(from: worker, to: confirmations.count, by: workers) {
                let confirmation = confirmations[index]
                guard let signature = try? privateKey.signature(for: confirmation.signingBytes) else {
                    failed.withLock { $0 = true }
                    return
                }
                mine[index] = confirmation.fileBytes(signature: signature.base64EncodedString())
            }
            results.withLock { $0.merge(mine) { a, _ in a } }
        }
        if failed.withLock({ $0 }) { throw MachineIdentity.SetupError(description: "cannot sign confirmations") }
        let all = results.withLock { $0 }
        return (0..<confirmations.count).map { all[$0]! }
    }
}

extension KeyRing {
    public var machineKeyPath: String { "\(directory)/machine.key" }

    /// This computer's own key (mode 0600), made on first use; not a parent key: it signs
    /// confirmations only, and no record signed with it is ever trusted unless a parent trusts it.
    public func createMachineKeyIfMissing() throws -> SigningKey {
        try Files.makeDirectories(directory, mode: 0o700)
        if !Files.exists(machineKeyPath) {
            let key = SigningKey()
            try Files.writeAtomically(
                Array((key.rawPrivateKey.base64EncodedString() + "\n").utf8), directory: directory, name: "machine.key",
                mode: 0o600, replace: false)
        }
        let bytes: [UInt8]
        do { bytes = try Files.readRegularFile(machineKeyPath, maxBytes: 4096) } catch { throw KeyError.unreadable(error) }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let data = Data(base64Encoded: text), let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: data)
        else { throw KeyError.malformed(path: machineKeyPath) }
        return SigningKey(privateKey: key)
    }
}

extension SharedDirectory {
    public var machinesPath: String { "\(path)/machines" }

    /// The confirmations this computer writes.
    public func confirmationsPath(of machine: String) -> String { "\(confirmationsPath)/\(machine)" }

    /// Writes `machines/<id>.json` unless it already holds exactly these bytes. Returns whether it wrote.
    @discardableResult
    public func publish(_ machine: MachineAnnouncement) throws(FileError) -> Bool {
        let bytes = machine.bytes
        let name = "\(machine.machine).json"
        if let existing = try? Files.readRegularFile("\(machinesPath)/\(name)", maxBytes: 4096), existing == bytes {
            return false
        }
        try write(bytes, into: ["machines"], name: name)
        return true
    }

    /// The key `machine`'s files verify with (its enrolled key), or why there is none.
    public func machineKey(_ id: String) -> Result<PublicKey, RecordError> { roster().key(of: id) }

    /// `machines/<id>.json` when it is well formed, with the key it announces (a claim: see `MachineRoster`).
    public func announcement(_ id: String) -> (MachineAnnouncement, PublicKey)? {
        guard MachineID.isValid(id),
            let bytes = try? Files.readRegularFile("\(machinesPath)/\(id).json", maxBytes: 4096),
            let announcement = try? MachineAnnouncement.parse(bytes), announcement.machine == id,
            let key = PublicKey(base64: announcement.publicKey), key.id == announcement.keyId
        else { return nil }
        return (announcement, key)
    }

    /// What one computer said about one record, checked.
    public struct ConfirmationReading: Sendable, Equatable {
        public var machine: String
        /// The confirmation when it parsed and its signature verifies with the machine's enrolled key.
        public var confirmation: Confirmation?
        /// Why it could not be used, otherwise.
        public var problem: String?
        /// The confirmation file's modification time, nanoseconds since the epoch (set by whoever wrote
        /// it last: a sync tool copies the other computer's).
        public var writtenNanoseconds: Int64?
        /// The key id and host the file names, whether or not it verifies (to spot two computers
        /// writing under one machine id).
        public var claimedKey: String?
        public var claimedHost: String?
    }

    /// Every computer's confirmation of `recordId`, each verified with that computer's enrolled key
    /// (from `roster`, else this directory's roster). Computers that have not confirmed it are left out.
    public func confirmations(for recordId: String, roster: MachineRoster? = nil) -> [ConfirmationReading] {
        guard RecordFormat.isRecordID(recordId), let machines = try? Files.list(confirmationsPath) else { return [] }
        let roster = roster ?? self.roster(only: Set(machines))
        var readings: [ConfirmationReading] = []
        for machine in machines.sorted() where MachineID.isValid(machine) {
            let path = "\(confirmationsPath(of: machine))/\(recordId)"
            guard let (identity, _) = try? Files.identity(path) else { continue }
            var reading = ConfirmationReading(machine: machine, writtenNanoseconds: identity.mtimeNanoseconds)
            switch ConfirmationStore.read(path: path, machine: machine, record: recordId, key: roster.key(of: machine)) {
            case .success(let confirmation):
                reading.confirmation = confirmation
                reading.claimedKey = confirmation.key
                reading.claimedHost = confirmation.host
            case .failure(let error):
                reading.problem = error.reason
                if let bytes = try? Files.readRegularFile(path, maxBytes: ConfirmationFormat.maxBytes),
                    let (claimed, _) = try? Confirmation.parse(bytes)
                {
                    reading.claimedKey = claimed.key
                    reading.claimedHost = claimed.host
                }
            }
            readings.append(reading)
        }
        return readings
    }
}
