/// A computer's answer to one record of the shared directory, as it travels back to the parents:
/// `<shared-dir>/confirmations/<machine-id>/<record-id>`.
///
/// On disk a confirmation is the canonical JSON of `signedPayload` plus a `signature` field: an
/// Ed25519 signature (base64) by the machine's own key over `ConfirmationFormat.signingDomain`
/// followed by the canonical bytes of the payload. The domain differs from the records' one, so a
/// record's signature never passes for a confirmation's, nor the other way round.
public struct Confirmation: Sendable, Equatable {
    public enum Outcome: String, Sendable, Equatable, CaseIterable {
        /// The record is the one in force for its user, or a grant that counts.
        case applied
        /// Well formed and trusted, but never enforced here, and not going to be (see the reason).
        case rejected
        /// Valid and trusted, but older than what is enforced.
        case superseded
        /// Folded with a concurrent record of the same base; `conflicts` names the fields both changed.
        case merged
    }

    /// The machine id of the computer that confirms.
    public var machine: String
    /// Its host name, for people.
    public var host: String
    /// Key id of the machine key that signs.
    public var key: String
    /// The record's file name (`<64 hex>.json`).
    public var record: String
    /// The user the record is for, when it could be read.
    public var user: String?
    public var outcome: Outcome
    /// Why, for every outcome but `applied`.
    public var reason: String?
    /// For `merged`: the fields both records changed (the later one won); empty otherwise.
    public var conflicts: [String]
    /// The version of the user's policy enforced on that computer when the confirmation was written.
    public var enforcedVersion: Int?
    /// When it was written, seconds since the epoch (UTC in the file).
    public var time: Int64

    public init(
        machine: String, host: String, key: String, record: String, user: String?, outcome: Outcome, reason: String?,
        conflicts: [String] = [], enforcedVersion: Int?, time: Int64
    ) {
        self.machine = machine
        self.host = host
        self.key = key
        self.record = record
        self.user = user
        self.outcome = outcome
        self.reason = reason
        self.conflicts = conflicts
        self.enforcedVersion = enforcedVersion
        self.time = time
    }

    /// Everything the signature covers.
    public var signedPayload: JSONValue {
        .object(
            JSONObject([
                ("format", .int(Int64(ConfirmationFormat.version))),
                ("kind", .string(ConfirmationFormat.kind)),
                ("machine", .string(machine)),
                ("host", .string(host)),
                ("key", .string(key)),
                ("record", .string(record)),
                ("user", user.map { .string($0) } ?? .null),
                ("outcome", .string(outcome.rawValue)),
                ("reason", reason.map { .string($0) } ?? .null),
                ("conflicts", .array(conflicts.map { .string($0) })),
                ("enforcedVersion", enforcedVersion.map { .int(Int64($0)) } ?? .null),
                ("time", .string(utcTimestamp(time))),
            ]))
    }



    static let fields = [
        "format", "kind", "machine", "host", "key", "record", "user", "outcome", "reason", "conflicts",
        "enforcedVersion", "time", "signature",
    ]

    /// Reads a confirmation file strictly: canonical JSON only, known fields only, format 1, kind
    /// confirmation, every field of its type; a reason for every outcome but `applied`, conflicts
    /// only for `merged`.
    public static func parse(_ bytes: [UInt8]) throws(RecordError) -> (confirmation: Confirmation, signature: String) {
        let object = try StrictDocument.parse(
            bytes, noun: "confirmation", fieldPrefix: "confirmation", maxBytes: ConfirmationFormat.maxBytes,
            version: ConfirmationFormat.version, kind: ConfirmationFormat.kind, fields: fields)
        guard case .string(let machine)? = object["machine"], MachineID.isValid(machine) else {
            throw RecordError("confirmation field \"machine\" must be a machine id")
        }
        guard case .string(let host)? = object["host"], !host.isEmpty, host.utf8.count <= 255 else {
            throw RecordError("confirmation field \"host\" must be a host name")
        }
        guard case .string(let key)? = object["key"], KeyID.isValid(key) else {
            throw RecordError("confirmation field \"key\" must be a key id (16 hex digits)")
        }
        guard case .string(let record)? = object["record"], RecordFormat.isRecordID(record) else {
            throw RecordError("confirmation field \"record\" must be a record id (64 hex digits and .json)")
        }
        let user: String?
        switch object["user"] {
        case .null?: user = nil
        case .string(let name)?:
            do { try Policy.validateUserNameSyntax(name) } catch { throw RecordError(error.message) }
            user = name
        default: throw RecordError("confirmation field \"user\" must be a user name or null")
        }
        guard case .string(let outcomeText)? = object["outcome"], let outcome = Outcome(rawValue: outcomeText) else {
            throw RecordError("confirmation field \"outcome\" must be one of applied, rejected, superseded, merged")
        }
        let reason: String?
        switch object["reason"] {
        case .null? where outcome == .applied: reason = nil
        case .string(let text)? where outcome != .applied && !text.isEmpty: reason = text
        default:
            throw RecordError(
                outcome == .applied
                    ? "confirmation field \"reason\" must be null when applied"
                    : "confirmation field \"reason\" must say why it was \(outcome.rawValue)")
        }
        guard case .array(let conflictValues)? = object["conflicts"] else {
            throw RecordError("confirmation field \"conflicts\" must be a list")
        }
        var conflicts: [String] = []
        for value in conflictValues {
            guard case .string(let field) = value, !field.isEmpty else {
                throw RecordError("confirmation field \"conflicts\" must list field names")
            }
            conflicts.append(field)
        }
        guard conflicts.isEmpty || outcome == .merged else {
            throw RecordError("confirmation field \"conflicts\" must be empty unless merged")
        }
        let enforcedVersion: Int?
        switch object["enforcedVersion"] {
        case .null?: enforcedVersion = nil
        case .int(let version)? where (0...Int64(Int32.max)).contains(version): enforcedVersion = Int(version)
        default: throw RecordError("confirmation field \"enforcedVersion\" must be a whole number or null")
        }
        guard case .string(let timeText)? = object["time"], let time = parseUTCTimestamp(timeText) else {
            throw RecordError("confirmation field \"time\" must be a UTC time like 2026-01-31T20:00:00Z")
        }
        guard case .string(let signature)? = object["signature"] else {
            throw RecordError("confirmation field \"signature\" must be a string")
        }
        let confirmation = Confirmation(
            machine: machine, host: host, key: key, record: record, user: user, outcome: outcome, reason: reason,
            conflicts: conflicts, enforcedVersion: enforcedVersion, time: time)
        return (confirmation, signature)
    }
}

public enum ConfirmationFormat {
    public static let version = 1
    public static let kind = "confirmation"
    public static let signingDomain = "curfew-confirmation-v1\n"
    public static let maxBytes = 16 * 1024
}

extension RecordFormat {
    /// A record's id is its file name: 64 lowercase hex digits (SHA-256 of its bytes) and `.json`.
    public static func isRecordID(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard bytes.count == 69, name.hasSuffix(".json") else { return false }
        return bytes[0..<64].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

extension Confirmation: SignedDocument {
    public static var signingDomain: String { ConfirmationFormat.signingDomain }
}
