/// One immutable change to one user's policy, as it travels through the shared directory.
///
/// On disk a record is the canonical JSON of `signedPayload` plus a `signature` field: an Ed25519
/// signature (base64) over `RecordFormat.signingDomain` followed by the canonical bytes of the
/// payload. The file is named after the SHA-256 of its exact bytes. A `policy` of null means the
/// user is no longer managed.
public struct PolicyRecord: Sendable, Equatable {
    public var user: String
    /// 1 for a user's first record; each change is its base's version plus one.
    public var version: Int
    /// The version the author edited; 0 for the first record.
    public var baseVersion: Int
    /// Key id of the parent key that signed it.
    public var author: String
    /// When it was made, seconds since the epoch (UTC in the file).
    public var time: Int64
    /// The user's whole policy after the change; nil removes the user.
    public var policy: Policy?

    public init(user: String, version: Int, baseVersion: Int, author: String, time: Int64, policy: Policy?) {
        self.user = user
        self.version = version
        self.baseVersion = baseVersion
        self.author = author
        self.time = time
        self.policy = policy
    }

    /// Everything the signature covers.
    public var signedPayload: JSONValue {
        .object(
            JSONObject([
                ("format", .int(Int64(RecordFormat.version))),
                ("kind", .string(RecordFormat.policyKind)),
                ("user", .string(user)),
                ("version", .int(Int64(version))),
                ("baseVersion", .int(Int64(baseVersion))),
                ("author", .string(author)),
                ("time", .string(utcTimestamp(time))),
                ("policy", policy?.json ?? .null),
            ]))
    }


}

public enum RecordFormat {
    public static let version = 1
    public static let policyKind = "policy"
    public static let signingDomain = "curfew-record-v1\n"
    /// Larger files are refused without being parsed.
    public static let maxBytes = 256 * 1024
}

/// Why a file in `records/` is not a usable record. `reason` is for people.
public struct RecordError: Error, Equatable, Sendable, CustomStringConvertible {
    public var reason: String
    public var cause: RejectionCause
    public init(_ reason: String, cause: RejectionCause = .invalid) {
        self.reason = reason
        self.cause = cause
    }
    public var description: String { reason }

    /// Bytes that are not a whole JSON document: perhaps a file still being written.
    public static func notJSON(_ error: some Error) -> RecordError {
        RecordError("not valid JSON: \(error)", cause: .mayBeIncomplete)
    }
}

/// Why a file of the shared directory was refused, as code acts on it (the reason's words are for people).
public enum RejectionCause: Sendable, Equatable {
    /// The file is what it is: refused for as long as it stays the same.
    case invalid
    /// Its bytes do not (yet) match its name or are not (yet) whole JSON: a young file may still be arriving.
    case mayBeIncomplete
    /// It could not be read this time (out of descriptors, an I/O error, a stale handle): read it again.
    case transient
}

/// A record file as read, before its signature is checked.
public struct ParsedRecord: Sendable, Equatable {
    public var record: PolicyRecord
    public var signature: String
}

extension PolicyRecord {
    static let fields = ["format", "kind", "user", "version", "baseVersion", "author", "time", "policy", "signature"]

    /// Reads a record file strictly: canonical JSON only (so the bytes that were signed are exactly
    /// the bytes on disk), known fields only, a supported format, a valid policy for the same user.
    public static func parse(_ bytes: [UInt8]) throws(RecordError) -> ParsedRecord {
        // The format first (in the envelope): a newer format may add fields, and "not supported"
        // tells the parent to upgrade where "unknown field" would call the record malformed.
        try parse(envelope: try RecordFormat.parseEnvelope(bytes), bytes: bytes)
    }

    /// The checks after the envelope's (size, JSON, an object, the format), on the object parsed
    /// from `bytes`, so a record of either kind is parsed once.
    static func parse(envelope object: JSONObject, bytes: [UInt8]) throws(RecordError) -> ParsedRecord {
        let value = JSONValue.object(object)
        for key in object.keys where !fields.contains(key) {
            throw RecordError("unknown record field \(quoted(key))")
        }
        guard case .string(let kind)? = object["kind"], kind == RecordFormat.policyKind else {
            throw RecordError("record field \"kind\" must be \"\(RecordFormat.policyKind)\"")
        }
        guard value.canonicalBytes == bytes else { throw RecordError("record is not in canonical form") }
        guard case .string(let user)? = object["user"] else { throw RecordError("record field \"user\" must be a string") }
        do { try Policy.validateUserName(user) } catch { throw RecordError(error.message) }
        guard case .int(let version)? = object["version"], (1...Int64(Int32.max)).contains(version) else {
            throw RecordError("record field \"version\" must be a positive whole number")
        }
        guard case .int(let base)? = object["baseVersion"], (0..<version).contains(base) else {
            throw RecordError("record field \"baseVersion\" must be a whole number below version")
        }
        guard case .string(let author)? = object["author"], KeyID.isValid(author) else {
            throw RecordError("record field \"author\" must be a key id (16 hex digits)")
        }
        guard case .string(let timeText)? = object["time"], let time = parseUTCTimestamp(timeText) else {
            throw RecordError("record field \"time\" must be a UTC time like 2026-01-31T20:00:00Z")
        }
        guard case .string(let signature)? = object["signature"] else {
            throw RecordError("record field \"signature\" must be a string")
        }
        let policy: Policy?
        switch object["policy"] {
        case nil: throw RecordError("record field \"policy\" is missing")
        case .null?: policy = nil
        case let policyValue?:
            do { policy = try Policy.decode(policyValue) } catch { throw RecordError("invalid policy: \(error.message)") }
            guard policy?.user == user else { throw RecordError("the policy's user differs from the record's user") }
        }
        let record = PolicyRecord(
            user: user, version: Int(version), baseVersion: Int(base), author: author, time: time, policy: policy)
        return ParsedRecord(record: record, signature: signature)
    }
}

public enum KeyID {
    /// 16 lowercase hex digits: the first 8 bytes of the SHA-256 of the raw public key.
    public static func isValid(_ text: String) -> Bool {
        text.utf8.count == 16 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

/// What is known of a record after its file was checked; enough to fold without reading it again.
public struct RecordSummary: Sendable, Equatable {
    /// The file name: SHA-256 of the file's bytes, hex, plus `.json`.
    public var id: String
    public var user: String
    public var version: Int
    public var baseVersion: Int
    public var author: String
    public var time: Int64
    public var removesUser: Bool

    public init(id: String, record: PolicyRecord) {
        self.id = id
        self.user = record.user
        self.version = record.version
        self.baseVersion = record.baseVersion
        self.author = record.author
        self.time = record.time
        self.removesUser = record.policy == nil
    }

    public init(
        id: String, user: String, version: Int, baseVersion: Int, author: String, time: Int64, removesUser: Bool
    ) {
        self.id = id
        self.user = user
        self.version = version
        self.baseVersion = baseVersion
        self.author = author
        self.time = time
        self.removesUser = removesUser
    }
}

public enum PolicyFold {
    /// The record that decides a user's current policy among verified ones: the highest version;
    /// among records of the same version (two parents editing the same base), the later one, then
    /// the greater key id, then the greater id, so every reader picks the same one whatever order
    /// the files arrived in.
    public static func current(_ records: [RecordSummary]) -> RecordSummary? {
        records.max { a, b in
            (a.version, a.time, a.author, a.id) < (b.version, b.time, b.author, b.id)
        }
    }

    /// The current record of every user.
    public static func currentByUser(_ records: [RecordSummary]) -> [String: RecordSummary] {
        Dictionary(grouping: records, by: \.user).compactMapValues(current)
    }
}

extension PolicyRecord: SignedDocument {
    public static var signingDomain: String { RecordFormat.signingDomain }
}
