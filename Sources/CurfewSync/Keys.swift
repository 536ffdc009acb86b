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

    public func isValidSignature(_ base64Signature: String, for bytes: [UInt8]) -> Bool {
        guard let signature = Data(base64Encoded: base64Signature), signature.count == 64,
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
            Array((key.base64 + "\n").utf8), directory: trustedDirectory, name: "\(key.id).pub", mode: 0o644)
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
