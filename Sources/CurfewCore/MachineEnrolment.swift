/// A parent's word that a computer belongs to the family: `<shared-dir>/enrolments/<machine-id>.json`,
/// signed by a parent key. A computer's own announcement (`machines/<id>.json`) is written by that
/// computer, so anyone who can write to the shared folder can make one up; only a computer whose key
/// a trusted parent key enrolled is waited for by editing commands and counted under
/// `--computers all`.
///
/// On disk: the canonical JSON of `signedPayload` plus `signature` (base64 Ed25519 by the key
/// `author` over `MachineEnrolmentFormat.signingDomain` followed by the canonical payload).
public struct MachineEnrolment: Sendable, Equatable {
    public var machine: String
    /// The host name the computer had when it was enrolled, for people.
    public var host: String
    /// Base64 of the computer's raw Ed25519 machine public key.
    public var publicKey: String
    public var keyId: String
    /// Key id of the parent key that signs the enrolment.
    public var author: String
    /// Seconds since the epoch (UTC in the file).
    public var time: Int64

    public init(machine: String, host: String, publicKey: String, keyId: String, author: String, time: Int64) {
        self.machine = machine
        self.host = host
        self.publicKey = publicKey
        self.keyId = keyId
        self.author = author
        self.time = time
    }

    /// Enrols the computer of `announcement` as it announced itself.
    public init(_ announcement: MachineAnnouncement, author: String, time: Int64) {
        self.init(
            machine: announcement.machine, host: announcement.host, publicKey: announcement.publicKey,
            keyId: announcement.keyId, author: author, time: time)
    }

    public var signedPayload: JSONValue {
        .object(
            JSONObject([
                ("format", .int(Int64(MachineEnrolmentFormat.version))),
                ("kind", .string(MachineEnrolmentFormat.kind)),
                ("machine", .string(machine)),
                ("host", .string(host)),
                ("key", .string(publicKey)),
                ("keyId", .string(keyId)),
                ("author", .string(author)),
                ("time", .string(utcTimestamp(time))),
            ]))
    }

    static let fields = ["format", "kind", "machine", "host", "key", "keyId", "author", "time", "signature"]

    /// Strict like every signed document: size, canonical JSON, known fields, format 1.
    public static func parse(_ bytes: [UInt8]) throws(RecordError) -> (enrolment: MachineEnrolment, signature: String) {
        let object = try StrictDocument.parse(
            bytes, noun: "enrolment", fieldPrefix: "enrolment", maxBytes: MachineEnrolmentFormat.maxBytes,
            version: MachineEnrolmentFormat.version, kind: MachineEnrolmentFormat.kind, fields: fields)
        guard case .string(let machine)? = object["machine"], MachineID.isValid(machine) else {
            throw RecordError("enrolment field \"machine\" must be a machine id")
        }
        guard case .string(let host)? = object["host"], !host.isEmpty, host.utf8.count <= 255 else {
            throw RecordError("enrolment field \"host\" must be a host name")
        }
        guard case .string(let key)? = object["key"], key.utf8.count == 44 else {
            throw RecordError("enrolment field \"key\" must be a base64 Ed25519 public key")
        }
        guard case .string(let keyId)? = object["keyId"], KeyID.isValid(keyId) else {
            throw RecordError("enrolment field \"keyId\" must be a key id (16 hex digits)")
        }
        guard case .string(let author)? = object["author"], KeyID.isValid(author) else {
            throw RecordError("enrolment field \"author\" must be a key id (16 hex digits)")
        }
        guard case .string(let timeText)? = object["time"], let time = parseUTCTimestamp(timeText) else {
            throw RecordError("enrolment field \"time\" must be a UTC time like 2026-01-31T20:00:00Z")
        }
        guard case .string(let signature)? = object["signature"] else {
            throw RecordError("enrolment field \"signature\" must be a string")
        }
        return (MachineEnrolment(machine: machine, host: host, publicKey: key, keyId: keyId, author: author, time: time), signature)
    }
}

extension MachineEnrolment: SignedDocument {
    public static var signingDomain: String { MachineEnrolmentFormat.signingDomain }
}

public enum MachineEnrolmentFormat {
    public static let version = 1
    public static let kind = "enrolment"
    public static let signingDomain = "curfew-enrolment-v1\n"
    public static let maxBytes = 4096
}
