import CurfewCore

/// Which computers of the shared directory this computer believes, and with which key.
///
/// A computer writes its own `machines/<id>.json`; anyone who can write to the shared folder can
/// write one too. A computer counts (editing commands wait for it, its usage summaries count under
/// `--computers all`, its confirmations are read) only once `enrolments/<id>.json` holds an
/// enrolment of its key signed by a parent key trusted here and not revoked. Its files are then
/// verified with the enrolled key whatever `machines/` says now: a replaced announcement can neither
/// take its place nor silence it.
public struct MachineRoster: Sendable {
    public struct Entry: Sendable, Equatable {
        public var machine: String
        /// The host name it announced, else the one it was enrolled with.
        public var host: String
        /// The key its announcement names, when there is a well-formed one.
        public var announcedKey: PublicKey?
        /// The verified enrolment, when there is one.
        public var enrolment: MachineEnrolment?
        /// The enrolled key: the only key its files are verified with.
        public var key: PublicKey?
        /// Why it is not enrolled, or what is wrong although it is (an announcement of another key).
        public var problem: String?

        public var isEnrolled: Bool { key != nil }
    }

    /// Every computer that announced itself or was enrolled, by machine id.
    public var entries: [String: Entry]

    public init(entries: [String: Entry]) { self.entries = entries }

    public var enrolled: [Entry] { entries.values.filter(\.isEnrolled).sorted { $0.machine < $1.machine } }
    public var all: [Entry] { entries.values.sorted { $0.machine < $1.machine } }

    /// The key to verify `machine`'s files with, or why there is none.
    public func key(of machine: String) -> Result<PublicKey, RecordError> {
        guard let entry = entries[machine] else {
            return .failure(RecordError("machine \(machine) has not announced itself in machines/ and is not enrolled"))
        }
        guard let key = entry.key else {
            return .failure(RecordError(entry.problem ?? "machine \(machine) is not enrolled"))
        }
        return .success(key)
    }

    public static let notEnrolled = "not enrolled: no parent key trusted here signed its enrolment"
}

extension SharedDirectory {
    public var enrolmentsPath: String { "\(path)/enrolments" }

    /// Signs `enrolment` with the parent key `key` and writes it as `enrolments/<id>.json`, replacing an
    /// earlier one (a computer enrolled again with a new key).
    public func publish(_ enrolment: MachineEnrolment, signedBy key: SigningKey) throws {
        precondition(enrolment.author == key.id, "an enrolment's author must be the key that signs it")
        try write(try key.signedFile(enrolment), into: ["enrolments"], name: "\(enrolment.machine).json")
    }

    /// The enrolment of `machine` when its file is well formed and signed by a key of `trusted` that is
    /// not in `revoked`; else why not (nil when there is no file).
    public func enrolment(of machine: String, trusted: [String: PublicKey], revoked: Set<String>)
        -> Result<(MachineEnrolment, PublicKey), RecordError>?
    {
        guard MachineID.isValid(machine) else { return nil }
        let bytes: [UInt8]
        do { bytes = try Files.readRegularFile("\(enrolmentsPath)/\(machine).json", maxBytes: MachineEnrolmentFormat.maxBytes) } catch {
            if error.isMissing { return nil }
            return .failure(RecordError("enrolment: \(error.description)"))
        }
        return Self.verifyEnrolment(bytes, machine: machine, trusted: trusted, revoked: revoked)
    }

    static func verifyEnrolment(_ bytes: [UInt8], machine: String, trusted: [String: PublicKey], revoked: Set<String>)
        -> Result<(MachineEnrolment, PublicKey), RecordError>
    {
        let enrolment: MachineEnrolment
        let signature: String
        do { (enrolment, signature) = try MachineEnrolment.parse(bytes) } catch { return .failure(RecordError("enrolment: \(error.reason)")) }
        guard enrolment.machine == machine else { return .failure(RecordError("enrolment names another machine than its path")) }
        guard let key = PublicKey(base64: enrolment.publicKey), key.id == enrolment.keyId else {
            return .failure(RecordError("enrolment's key does not match its key id"))
        }
        if revoked.contains(enrolment.author) {
            return .failure(RecordError("enrolled by revoked key \(enrolment.author) (enrol it again: curfew sync enrol \(machine))"))
        }
        guard let author = trusted[enrolment.author] else {
            return .failure(RecordError("enrolled by key \(enrolment.author), which is not trusted here"))
        }
        guard author.verifies(signature, of: enrolment) else {
            return .failure(RecordError("enrolment's signature does not verify with key \(enrolment.author)"))
        }
        return .success((enrolment, key))
    }

    /// Enrols `machine` with the parent key of this directory's key ring when it has one that it trusts
    /// (and has not revoked) and the computer is not already enrolled with its current key by a key
    /// trusted here. Returns the key id that signed, or nil when nothing was written.
    @discardableResult
    public func enrolWithOwnParentKey(_ machine: MachineIdentity, now: Instant) throws -> String? {
        guard let trust, Files.exists(trust.signingKeyPath) else { return nil }
        let parent = try trust.loadSigningKey()
        let trusted = try trust.trustedKeys()
        let revoked = Set(try trust.revocations().keys)
        guard trusted[parent.id] != nil, !revoked.contains(parent.id) else { return nil }
        if case .success(let (_, key))? = enrolment(of: machine.id, trusted: trusted, revoked: revoked), key == machine.key.publicKey {
            return nil
        }
        try publish(MachineEnrolment(machine.announcement, author: parent.id, time: now.seconds), signedBy: parent)
        return parent.id
    }

    /// Every computer in `machines/` and `enrolments/`, with what this computer believes of it. Trust
    /// comes from this directory's `trust` key ring (the state directory's trusted and revoked parent
    /// keys); without one, no computer is enrolled.
    /// `only`: look at these machine ids alone (a reader that needs a few computers' keys does not read
    /// every file a writer of the folder may have put in `machines/`).
    public func roster(only: Set<String>? = nil) -> MachineRoster {
        let trusted = (try? trust?.trustedKeys()) ?? [:]
        let revoked = Set(((try? trust?.revocations()) ?? [:]).keys)
        return roster(trusted: trusted, revoked: revoked, only: only)
    }

    public func roster(trusted: [String: PublicKey], revoked: Set<String>, only: Set<String>? = nil) -> MachineRoster {
        func ids(_ directory: String) -> [String] {
            ((try? Files.list(directory)) ?? []).filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }.map { String($0.dropLast(5)) }
                .filter(MachineID.isValid)
        }
        var entries: [String: MachineRoster.Entry] = [:]
        for id in only?.filter(MachineID.isValid) ?? Set(ids(machinesPath) + ids(enrolmentsPath)) {
            let announced = announcement(id)
            var entry = MachineRoster.Entry(machine: id, host: announced?.0.host ?? id, announcedKey: announced?.1)
            switch enrolment(of: id, trusted: trusted, revoked: revoked) {
            case nil:
                entry.problem = MachineRoster.notEnrolled
            case .failure(let error)?:
                entry.problem = "not enrolled: \(error.reason)"
            case .success(let (enrolment, key))?:
                entry.enrolment = enrolment
                entry.key = key
                if announced == nil { entry.host = enrolment.host }
                if let announcedKey = announced?.1, announcedKey != key {
                    entry.problem =
                        "announces key \(announcedKey.id), but key \(key.id) is the one enrolled (a reinstalled computer is enrolled again with curfew sync enrol \(id))"
                }
            }
            guard announced != nil || entry.enrolment != nil else { continue }
            entries[id] = entry
        }
        return MachineRoster(entries: entries)
    }
}
