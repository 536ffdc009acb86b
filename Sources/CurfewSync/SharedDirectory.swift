import CurfewCore
import Foundation
import Synchronization

/// The directory that carries records between computers (`<shared-dir>`): `records/` holds signed
/// policy records and grants of extra time, `confirmations/<machine-id>/` what each computer applied.
public struct SharedDirectory: Sendable {
    public let path: String
    /// The key ring whose trusted parent keys may enrol computers (`MachineRoster`); without one no
    /// computer is enrolled, so no confirmation or usage summary is believed.
    public let trust: KeyRing?

    public init(path: String, trust: KeyRing? = nil) {
        self.path = path
        self.trust = trust
    }

    public var recordsPath: String { "\(path)/records" }
    public var confirmationsPath: String { "\(path)/confirmations" }

    public func create() throws(FileError) {
        try Files.makeDirectories(recordsPath, mode: 0o755)
        try Files.makeDirectories(confirmationsPath, mode: 0o755)
    }

    /// Record files are named `<64 hex digits>.json`; every other name (temporary files, sync tools'
    /// partial and conflict copies) is not a record and is skipped without a word.
    public static func isRecordName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard bytes.count == 69, name.hasSuffix(".json") else { return false }
        return bytes[0..<64].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// Signs `record` and writes it under `records/`, named by the SHA-256 of its bytes, through a
    /// temporary name and a rename. Returns the record's id (its file name).
    public func publish(_ record: PolicyRecord, signedBy key: SigningKey) throws -> String {
        precondition(record.author == key.id, "a record's author must be the key that signs it")
        let bytes = try key.signedFile(record)
        let name = "\(sha256Hex(bytes)).json"
        try write(bytes, into: ["records"], name: name, replace: false)
        return name
    }

    /// Signs a grant (after checking its rules) and writes it under `records/` like a policy record.
    public func publish(_ grant: GrantRecord, signedBy key: SigningKey) throws -> String {
        precondition(grant.author == key.id, "a record's author must be the key that signs it")
        try grant.validate()
        let bytes = try key.signedFile(grant)
        let name = "\(sha256Hex(bytes)).json"
        try write(bytes, into: ["records"], name: name, replace: false)
        return name
    }

    /// Makes, signs with this computer's parent key (`keyRing`'s signing key) and publishes a grant of
    /// extra time: the one path by which `curfew grant`, `curfew approve` and the agent's
    /// `approve-pin` give time. Returns the record's id.
    public func publishGrant(
        user: String, date: LocalDate, extraMinutes: Int, bedtimeDelayMinutes: Int, requestId: Int64?, now: Instant,
        lift: GrantLift = GrantLift(), keyRing: KeyRing
    ) throws -> String {
        let key = try keyRing.loadSigningKey()
        var generator = SystemRandomNumberGenerator()
        let nonce = hexString((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let grant = GrantRecord(
            user: user, date: date, extraMinutes: extraMinutes, bedtimeDelayMinutes: bedtimeDelayMinutes, author: key.id,
            time: now.seconds, nonce: nonce, requestId: requestId, lift: lift)
        return try publish(grant, signedBy: key)
    }

    /// Whether any computer has ever written a confirmation here.
    public func hasAnyConfirmation() -> Bool {
        guard let machines = try? Files.list(confirmationsPath) else { return false }
        return machines.contains { machine in
            !machine.hasPrefix(".") && ((try? Files.list("\(confirmationsPath)/\(machine)"))?.isEmpty == false)
        }
    }
}

/// The records of the shared directory after a scan: the valid ones by user, and the ignored ones.
public struct RecordScan: Sendable {
    /// Valid policy records signed by a trusted key.
    public var valid: [RecordSummary]
    /// Valid grants signed by a trusted key, of every user (managed or not).
    public var grants: [GrantSummary] = []
    public var ignored: [IgnoredRecord]
    /// Index rows to store so the next scan need not read these files again.
    public var newIndexEntries: [IndexedRecord]
    /// Indexed files that are gone from the directory.
    public var vanished: [String]
    /// Files named like records that may still be arriving (see `scan`'s `now`): neither valid nor
    /// ignored, not indexed, looked at again next scan.
    public var incomplete: [String] = []

    /// How long a file whose bytes do not match its name, or are not JSON, counts as still being
    /// written (a sync tool filling it in place) rather than as rejected.
    public static let incompleteGraceSeconds: Int64 = 600

    /// The current record of each user; users whose current record removes them are left out.
    public var currentByUser: [String: RecordSummary] {
        PolicyFold.currentByUser(valid).filter { !$0.value.removesUser }
    }

    public func current(for user: String) -> RecordSummary? {
        PolicyFold.current(valid.filter { $0.user == user })
    }

    /// The user's policy in force: their records folded with `PolicyMerge`, loading (and verifying
    /// again) only the records the fold needs.
    public func fold(user: String, load: (RecordSummary) throws -> PolicyRecord) rethrows -> PolicyMerge.Result {
        let needed = PolicyMerge.needed(records(of: user))
        return PolicyMerge.fold(try needed.map { PolicyMerge.Input(id: $0.id, record: try load($0)) })
    }

    /// Extra time per user and day from every trusted grant.
    public var adjustments: [String: [LocalDate: DayAdjustment]] { GrantFold.adjustments(grants) }

    /// Every user's valid records, for folding one user.
    public func records(of user: String) -> [RecordSummary] { valid.filter { $0.user == user } }

    /// Checks every record file in `shared.recordsPath`, reusing what `index` already knows about
    /// files whose identity has not changed. Only records signed by a key in `trusted` count, and of
    /// a key in `revoked` only the records its revocation lists.
    ///
    /// With `now` (the agent passes it), a file whose bytes do not match
    /// its name or do not parse as JSON and whose mtime is within `incompleteGraceSeconds` of `now`
    /// is `incomplete` instead of ignored, and its verdict is not indexed.
    public static func scan(
        _ shared: SharedDirectory, trusted: [String: PublicKey], index: [String: IndexedRecord],
        revoked: [String: KeyRevocation] = [:], now: Instant? = nil
    ) throws(FileError) -> RecordScan {
        let names: [String]
        do {
            names = try Files.list(shared.recordsPath)
        } catch {
            if error.isMissing { names = [] } else { throw error }
        }
        var scan = RecordScan(valid: [], ignored: [], newIndexEntries: [], vanished: [])
        var present = Set<String>()
        let checked = checkInParallel(names: names, in: shared, trusted: trusted, index: index)
        for name in names where SharedDirectory.isRecordName(name) {
            present.insert(name)
            let path = "\(shared.recordsPath)/\(name)"
            guard let (identity, isRegular) = try? Files.identity(path) else { continue }
            let verdict: IndexedRecord.Verdict
            var claimedUser: String? = nil
            let young = now.map { abs($0.seconds - identity.mtimeNanoseconds / 1_000_000_000) < incompleteGraceSeconds } ?? false
            if let known = index[name], known.identity == identity {
                // The CLI indexes without `now`; a young file it found broken may still be arriving.
                if young, case .invalid(_, .mayBeIncomplete) = known.verdict {
                    scan.incomplete.append(name)
                    continue
                }
                verdict = known.verdict
            } else {
                let outcome =
                    checked[name].flatMap { $0.identity == identity ? $0.outcome : nil }
                    ?? RecordVerifier.check(path: path, name: name, isRegular: isRegular, trusted: trusted)
                switch outcome {
                case .verified(let summary):
                    verdict = .valid(summary)
                case .verifiedGrant(let summary):
                    verdict = .validGrant(summary)
                case .rejected(_, _, .mayBeIncomplete) where young:
                    scan.incomplete.append(name)
                    continue
                case .rejected(let reason, let user, .transient):
                    // Not indexed: an I/O error or a full descriptor table must not reject a good
                    // record for as long as its file stays the same.
                    scan.ignored.append(IgnoredRecord(name: name, reason: reason, user: user))
                    continue
                case .rejected(let reason, let user, let cause):
                    verdict = .invalid(reason: reason, cause: cause)
                    claimedUser = user
                case .untrusted(let author, let user):
                    // Depends on which keys are trusted, so it is not indexed.
                    scan.ignored.append(
                        IgnoredRecord(name: name, reason: "signed by key \(author), which is not trusted here", user: user))
                    continue
                }
                scan.newIndexEntries.append(IndexedRecord(name: name, identity: identity, verdict: verdict))
            }
            switch verdict {
            case .valid(let summary):
                if let revocation = revoked[summary.author], !revocation.allows(name) {
                    scan.ignored.append(IgnoredRecord(name: name, reason: revocation.reason, user: summary.user))
                } else if trusted[summary.author] != nil {
                    scan.valid.append(summary)
                } else {
                    scan.ignored.append(
                        IgnoredRecord(
                            name: name, reason: "signed by key \(summary.author), which is not trusted here",
                            user: summary.user))
                }
            case .validGrant(let summary):
                if let revocation = revoked[summary.author], !revocation.allows(name) {
                    scan.ignored.append(IgnoredRecord(name: name, reason: revocation.reason, user: summary.user))
                } else if trusted[summary.author] != nil {
                    scan.grants.append(summary)
                } else {
                    scan.ignored.append(
                        IgnoredRecord(
                            name: name, reason: "signed by key \(summary.author), which is not trusted here",
                            user: summary.user))
                }
            case .invalid(let reason, _):
                scan.ignored.append(IgnoredRecord(name: name, reason: reason, user: claimedUser))
            }
        }
        scan.vanished = index.keys.filter { !present.contains($0) }.sorted()
        scan.ignored.sort { $0.name < $1.name }
        return scan
    }
}

extension RecordScan {
    /// Checks the files the index does not know yet on every CPU (a signature each: catching up
    /// on thousands of records after a start is mostly this), with the identity each was checked at.
    static func checkInParallel(
        names: [String], in shared: SharedDirectory, trusted: [String: PublicKey], index: [String: IndexedRecord]
    ) -> [String: (identity: FileIdentity, outcome: RecordVerifier.Outcome)] {
        var work: [(name: String, identity: FileIdentity, isRegular: Bool)] = []
        for name in names where SharedDirectory.isRecordName(name) {
            guard let (identity, isRegular) = try? Files.identity("\(shared.recordsPath)/\(name)") else { continue }
            if let known = index[name], known.identity == identity { continue }
            work.append((name, identity, isRegular))
        }
        let workers = min(ProcessInfo.processInfo.activeProcessorCount, work.count / 64)
        guard workers > 1 else { return [:] }
        let results = Mutex<[String: (identity: FileIdentity, outcome: RecordVerifier.Outcome)]>([:])
        let items = work
        ParallelWork.run(workers: workers) { worker in
            var mine: [(String, FileIdentity, RecordVerifier.Outcome)] = []
            for index in stride(from: worker, to: items.count, by: workers) {
                let item = items[index]
                let outcome = RecordVerifier.check(
                    path: "\(shared.recordsPath)/\(item.name)", name: item.name, isRegular: item.isRegular, trusted: trusted)
                mine.append((item.name, item.identity, outcome))
            }
            results.withLock { all in
                for (name, identity, outcome) in mine { all[name] = (identity, outcome) }
            }
        }
        return results.withLock { $0 }
    }
}

/// Reads one record file and checks it completely: name, size, form, signature.
public enum RecordVerifier {
    public enum Outcome: Sendable, Equatable {
        case verified(RecordSummary)
        case verifiedGrant(GrantSummary)
        case rejected(reason: String, user: String?, cause: RejectionCause = .invalid)
        case untrusted(author: String, user: String)
    }

    public static func check(path: String, name: String, isRegular: Bool = true, trusted: [String: PublicKey])
        -> Outcome
    {
        switch loadAny(path: path, name: name, isRegular: isRegular, trusted: trusted) {
        case .success(.policy(let record)): .verified(RecordSummary(id: name, record: record))
        case .success(.grant(let grant)): .verifiedGrant(GrantSummary(id: name, record: grant))
        case .failure(let failure): failure.outcome
        }
    }

    public struct Failure: Error { public var outcome: Outcome }

    static let hashMismatch = "content does not match its name (hash)"
    /// Starts the reason of a file that could not be read for a passing cause (`FileError.isTransient`):
    /// such a verdict is not indexed, so the file is read again at the next scan.
    public static let transientPrefix = "could not be read this time: "

    /// The verified policy record in a file, with its policy.
    public static func load(path: String, name: String, isRegular: Bool = true, trusted: [String: PublicKey])
        -> Result<PolicyRecord, Failure>
    {
        switch loadAny(path: path, name: name, isRegular: isRegular, trusted: trusted) {
        case .success(.policy(let record)): .success(record)
        case .success(.grant(let grant)):
            .failure(Failure(outcome: .rejected(reason: "a grant, not a policy record", user: grant.user)))
        case .failure(let failure): .failure(failure)
        }
    }

    /// The verified grant in a file.
    public static func loadGrant(path: String, name: String, isRegular: Bool = true, trusted: [String: PublicKey])
        -> Result<GrantRecord, Failure>
    {
        switch loadAny(path: path, name: name, isRegular: isRegular, trusted: trusted) {
        case .success(.grant(let grant)): .success(grant)
        case .success(.policy(let record)):
            .failure(Failure(outcome: .rejected(reason: "a policy record, not a grant", user: record.user)))
        case .failure(let failure): .failure(failure)
        }
    }

    /// The verified record of either kind in a file.
    public static func loadAny(path: String, name: String, isRegular: Bool = true, trusted: [String: PublicKey])
        -> Result<SignedRecord, Failure>
    {
        func reject(_ reason: String, _ user: String? = nil, cause: RejectionCause = .invalid) -> Result<SignedRecord, Failure> {
            .failure(Failure(outcome: .rejected(reason: reason, user: user, cause: cause)))
        }
        guard isRegular else { return reject("not a regular file") }
        let bytes: [UInt8]
        do {
            bytes = try Files.readRegularFile(path, maxBytes: RecordFormat.maxBytes)
        } catch {
            if error.isOversized { return reject("record is larger than \(RecordFormat.maxBytes) bytes") }
            if error.isTransient { return reject(transientPrefix + error.description, cause: .transient) }
            return reject(error.description)
        }
        guard "\(sha256Hex(bytes)).json" == name else { return reject(hashMismatch, cause: .mayBeIncomplete) }
        let record: SignedRecord
        let signature: String
        do { (record, signature) = try SignedRecord.parse(bytes) } catch { return reject(error.reason, cause: error.cause) }
        guard let key = trusted[record.author] else {
            return .failure(Failure(outcome: .untrusted(author: record.author, user: record.user)))
        }
        guard key.isValidSignature(signature, for: record.signingBytes) else {
            return reject("signature does not verify with key \(record.author)", record.user)
        }
        return .success(record)
    }
}
