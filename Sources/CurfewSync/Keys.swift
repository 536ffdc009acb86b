import Crypto
import CurfewCore
import Foundation

/// A parent's Ed25519 signing key.
public struct SigningKey: Sendable {
    // The raw bytes: swift-crypto's key types are not Sendable.
    let rawPrivateKey: Data

    public init() { rawPrivateKey = Curve25519.Signing.PrivateKey().rawRepresentation }

    init(privateKey: Curve25519.Signing.PrivateKey) { rawPrivateKey = privateKey.rawRepresentation }

    var privateKey: Curve25519.Signing.PrivateKey {
        // 32 bytes that came from a valid key: cannot fail.
        try! Curve25519.Signing.PrivateKey(rawRepresentation: rawPrivateKey)
    }

    public var publicKey: PublicKey { PublicKey(key: privateKey.publicKey) }
    public var id: String { publicKey.id }

    /// Base64 signature over `bytes`.
    public func sign(_ bytes: [UInt8]) throws -> String {
        try privateKey.signature(for: bytes).base64EncodedString()
    }

    /// The file of a signed document: its payload and this key's signature over its signing bytes.
    public func signedFile(_ document: some SignedDocument) throws -> [UInt8] {
        document.fileBytes(signature: try sign(document.signingBytes))
    }
}

extension PublicKey {
    /// Whether `signature` (base64) is this key's over the document's signing bytes.
    public func verifies(_ signature: String, of document: some SignedDocument) -> Bool {
        isValidSignature(signature, for: document.signingBytes)
    }
}

/// A trusted Ed25519 public key, known by its key id.
public struct PublicKey: Sendable, Equatable {
    public let rawRepresentation: Data
    /// The first 8 bytes of the SHA-256 of the raw key, as 16 hex digits.
    public let id: String

    public init(key: Curve25519.Signing.PublicKey) {
        rawRepresentation = key.rawRepresentation
        id = hexString(Array(SHA256.hash(data: rawRepresentation)).prefix(8))
    }

    public init?(base64: String) {
        guard let data = Data(base64Encoded: base64.trimmingCharacters(in: .whitespacesAndNewlines)),
            let key = try? Curve25519.Signing.PublicKey(rawRepresentation: data)
        else { return nil }
        self.init(key: key)
    }

    public var base64: String { rawRepresentation.base64EncodedString() }

    /// Only the canonical base64 of a signature counts: Foundation also decodes spellings whose unused
    /// trailing bits are set, and each such spelling would make another file (another record id) out
    /// of the same signed record, counted again as if it were a different record.
    public func isValidSignature(_ base64Signature: String, for bytes: [UInt8]) -> Bool {
        guard let signature = Data(base64Encoded: base64Signature), signature.count == 64,
            signature.base64EncodedString() == base64Signature,
            let key = try? Curve25519.Signing.PublicKey(rawRepresentation: rawRepresentation)
        else { return false }
        return key.isValidSignature(signature, for: bytes)
    }
}

/// SHA-256 of `bytes` as 64 hex digits.
public func sha256Hex(_ bytes: [UInt8]) -> String { hexString(SHA256.hash(data: bytes)) }

/// Why a key could not be loaded or stored.
public enum KeyError: Error, Equatable, Sendable {
    case noSigningKey(path: String)
    case unreadable(FileError)
    case malformed(path: String)
}

/// The keys kept in the state directory: `keys/signing.key` (this parent's private key, mode 0600)
/// and `keys/trusted/<key id>.pub` (every key whose records this computer accepts). Trust lives in
/// the state directory, never in the shared directory, which a child may be able to write.
public struct KeyRing: Sendable {
    public let directory: String

    public init(stateDirectory: String) { directory = "\(stateDirectory)/keys" }

    public var signingKeyPath: String { "\(directory)/signing.key" }
    public var trustedDirectory: String { "\(directory)/trusted" }

    public func loadSigningKey() throws(KeyError) -> SigningKey {
        let bytes: [UInt8]
        do {
            bytes = try Files.readRegularFile(signingKeyPath, maxBytes: 4096)
        } catch {
            if error.isMissing { throw .noSigningKey(path: signingKeyPath) }
            throw .unreadable(error)
        }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let data = Data(base64Encoded: text), let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: data)
        else { throw .malformed(path: signingKeyPath) }
        return SigningKey(privateKey: key)
    }

    /// Creates a new signing key (mode 0600) unless one exists; returns the key in force.
    public func createSigningKeyIfMissing() throws -> (key: SigningKey, created: Bool) {
        try Files.makeDirectories(directory, mode: 0o700)
        if Files.exists(signingKeyPath) { return (try loadSigningKey(), false) }
        let key = SigningKey()
        let text = key.rawPrivateKey.base64EncodedString() + "\n"
        let written = try Files.writeAtomically(
            Array(text.utf8), directory: directory, name: "signing.key", mode: 0o600, replace: false)
        return written ? (key, true) : (try loadSigningKey(), false)
    }

    public func trust(_ key: PublicKey) throws {
        try Files.makeDirectories(trustedDirectory, mode: 0o700)
        try Files.writeAtomically(
            Array((key.base64 + "\n").utf8), directory: trustedDirectory, name: "\(key.id).pub", mode: 0o600)
    }

    /// Every trusted key by id. A file whose content does not match its name is skipped.
    public func trustedKeys() throws(KeyError) -> [String: PublicKey] {
        let names: [String]
        do {
            names = try Files.list(trustedDirectory)
        } catch {
            if error.isMissing { return [:] }
            throw .unreadable(error)
        }
        var keys: [String: PublicKey] = [:]
        for name in names where name.hasSuffix(".pub") {
            let path = "\(trustedDirectory)/\(name)"
            guard let bytes = try? Files.readRegularFile(path, maxBytes: 4096),
                let key = PublicKey(base64: String(decoding: bytes, as: UTF8.self)),
                "\(key.id).pub" == name
            else { continue }
            keys[key.id] = key
        }
        return keys
    }
}

/// A parent key revoked on this computer, kept as `<state-dir>/keys/revoked/<key id>.json`.
///
/// The key stays trusted for what it signed before: the records of it that were valid in the shared
/// directory when it was revoked (`records`) still count, so revoking never rewrites history. Every
/// other record or grant it signs is ignored with "signed by revoked key ID", whatever time or
/// version it claims, since a thief of the key can backdate both. `time` and `versions` (the
/// highest version per user among the listed records) say what the key had done, for people.
public struct KeyRevocation: Sendable, Equatable {
    public var key: String
    public var time: Int64
    public var versions: [String: Int]
    /// Ids (file names) of the key's records and grants that still count.
    public var records: [String]

    public init(key: String, time: Int64, versions: [String: Int], records: [String]) {
        self.key = key
        self.time = time
        self.versions = versions
        self.records = records.sorted()
    }

    /// Whether the key's record or grant `id` still counts.
    public func allows(_ id: String) -> Bool { records.contains(id) }

    public var reason: String { "signed by revoked key \(key)" }

    /// The file's form: `{"key", "records", "revokedAt" (UTC), "versions": {user: version}}`.
    struct FileForm: Codable {
        var key: String
        var revokedAt: String
        var versions: [String: Int]
        var records: [String]
    }

    /// The revocation as its file holds it (written in canonical form).
    public var json: JSONValue {
        JSONValueEncoder().value(of: FileForm(key: key, revokedAt: utcTimestamp(time), versions: versions, records: records))
    }

    /// Reads a revocation file; nil when it is not one.
    public static func parse(_ bytes: [UInt8]) -> KeyRevocation? {
        guard let value = try? JSONValue.parse(bytes), let form = try? JSONValueDecoder().decode(FileForm.self, from: value),
            KeyID.isValid(form.key), let time = parseUTCTimestamp(form.revokedAt)
        else { return nil }
        return KeyRevocation(key: form.key, time: time, versions: form.versions, records: form.records)
    }
}

extension KeyRing {
    public var revokedDirectory: String { "\(directory)/revoked" }

    /// Writes a revocation; false when the key was already revoked (the first revocation stands).
    @discardableResult
    public func revoke(_ revocation: KeyRevocation) throws(FileError) -> Bool {
        try Files.makeDirectories(revokedDirectory, mode: 0o700)
        return try Files.writeAtomically(
            Array((revocation.json.canonicalString + "\n").utf8), directory: revokedDirectory,
            name: "\(revocation.key).json", mode: 0o600, replace: false)
    }

    /// Every revocation by key id. A damaged revocation file revokes every record of its key: a
    /// revocation that cannot be read must never bring a key back.
    public func revocations() throws(KeyError) -> [String: KeyRevocation] {
        let names: [String]
        do {
            names = try Files.list(revokedDirectory)
        } catch {
            if error.isMissing { return [:] }
            throw .unreadable(error)
        }
        var revocations: [String: KeyRevocation] = [:]
        for name in names where name.hasSuffix(".json") && !name.hasPrefix(".") {
            let id = String(name.dropLast(5))
            guard KeyID.isValid(id) else { continue }
            let bytes = try? Files.readRegularFile("\(revokedDirectory)/\(name)", maxBytes: 1 << 24)
            if let bytes, let revocation = KeyRevocation.parse(bytes), revocation.key == id {
                revocations[id] = revocation
            } else {
                revocations[id] = KeyRevocation(key: id, time: 0, versions: [:], records: [])
            }
        }
        return revocations
    }
}

/// A key as people compare it between two screens: the first 16 bytes of the SHA-256 of the raw
/// public key, in 8 groups of 4 hex digits.
public enum KeyFingerprint {
    public static func text(of key: PublicKey) -> String {
        let hex = sha256Hex(Array(key.rawRepresentation))
        return stride(from: 0, to: 32, by: 4).map { offset in
            String(hex.dropFirst(offset).prefix(4))
        }.joined(separator: " ")
    }
}
