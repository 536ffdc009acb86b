import Crypto
import CurfewCore
import Foundation
import _CryptoExtras

/// The parent's PIN as this computer keeps it: `<state-dir>/parent-pin`, mode 0600, root's alone
/// (the state directory is 0700), one JSON object with scrypt's parameters, a random salt, the
/// derived bytes and the most the PIN may approve in a day (`maxMinutesPerDay`); never the PIN. Written by `curfew pin set` (atomically), read by the agent for
/// each `approve-pin`.
public struct ParentPINHash: Sendable, Equatable {
    /// scrypt's cost (N), block size (r) and parallelism (p): 2^15 x 8 x 1 takes 32 MiB and a tenth
    /// of a second or so for each check, which the agent does at most `PINRules.maxTries` times per
    /// child in 15 minutes.
    public var cost: Int
    public var blockSize: Int
    public var parallelism: Int
    public var salt: [UInt8]
    public var hash: [UInt8]
    /// The minutes the PIN may approve in any 24 hours (`curfew pin set --max-per-day`); a file
    /// written before there was such a figure reads as `PINRules.defaultMaxMinutesPerDay`.
    public var maxMinutesPerDay: Int

    public static let defaultCost = 1 << 15
    public static let fileName = "parent-pin"
    static let hashBytes = 32
    static let saltBytes = 16
    /// The largest cost a file may ask for (2^20: 1 GiB): a damaged file must not exhaust memory.
    static let maxCost = 1 << 20

    /// A new hash of `pin` with a fresh random salt.
    public static func make(
        pin: String, cost: Int = defaultCost, maxMinutesPerDay: Int = PINRules.defaultMaxMinutesPerDay
    ) throws -> ParentPINHash {
        var generator = SystemRandomNumberGenerator()
        let salt = (0..<saltBytes).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let hash = try derive(pin, salt: salt, cost: cost, blockSize: 8, parallelism: 1)
        return ParentPINHash(cost: cost, blockSize: 8, parallelism: 1, salt: salt, hash: hash, maxMinutesPerDay: maxMinutesPerDay)
    }

    /// Whether `pin` is the PIN this hash was made from; the comparison takes the same time whatever
    /// bytes differ (`safeCompare`).
    public func matches(_ pin: String) throws -> Bool {
        let candidate = try Self.derive(pin, salt: salt, cost: cost, blockSize: blockSize, parallelism: parallelism)
        return safeCompare(candidate, hash)
    }

    /// scrypt (RFC 7914) of the PIN's UTF-8 bytes.
    static func derive(
        _ pin: String, salt: [UInt8], cost: Int, blockSize: Int, parallelism: Int, bytes: Int = hashBytes
    ) throws -> [UInt8] {
        let key = try KDF.Scrypt.deriveKey(
            from: Array(pin.utf8), salt: salt, outputByteCount: bytes, rounds: cost, blockSize: blockSize,
            parallelism: parallelism)
        return key.withUnsafeBytes { Array($0) }
    }

    /// The file's form:
    /// `{"N":...,"algorithm":"scrypt","hash":"<base64>","maxMinutesPerDay":...,"p":...,"r":...,"salt":"<base64>"}`.
    struct FileForm: Codable {
        var algorithm: String
        var N: Int
        var r: Int
        var p: Int
        var salt: String
        var hash: String
        var maxMinutesPerDay: Int?
    }

    /// The file's bytes: its form in canonical JSON and a newline.
    public var fileBytes: [UInt8] {
        let form = FileForm(
            algorithm: "scrypt", N: cost, r: blockSize, p: parallelism, salt: Data(salt).base64EncodedString(),
            hash: Data(hash).base64EncodedString(), maxMinutesPerDay: maxMinutesPerDay)
        return Array((JSONValueEncoder().value(of: form).canonicalString + "\n").utf8)
    }

    /// Reads a file's bytes; nil when they are not a hash this code wrote (a damaged file reads as
    /// damaged, never as "any PIN is right").
    public init?(fileBytes: [UInt8]) {
        guard let form = try? JSONValueDecoder().decode(FileForm.self, from: String(decoding: fileBytes, as: UTF8.self)),
            form.algorithm == "scrypt", form.N >= 2, form.N <= Self.maxCost, form.N & (form.N - 1) == 0, (1...32).contains(form.r),
            (1...4).contains(form.p), let salt = Data(base64Encoded: form.salt), salt.count >= 8,
            let hash = Data(base64Encoded: form.hash), hash.count == Self.hashBytes,
            PINRules.maxMinutesPerDay.contains(form.maxMinutesPerDay ?? PINRules.defaultMaxMinutesPerDay)
        else { return nil }
        self.init(
            cost: form.N, blockSize: form.r, parallelism: form.p, salt: Array(salt), hash: Array(hash),
            maxMinutesPerDay: form.maxMinutesPerDay ?? PINRules.defaultMaxMinutesPerDay)
    }

    public init(
        cost: Int, blockSize: Int, parallelism: Int, salt: [UInt8], hash: [UInt8], maxMinutesPerDay: Int = PINRules.defaultMaxMinutesPerDay
    ) {
        self.maxMinutesPerDay = maxMinutesPerDay
        self.cost = cost
        self.blockSize = blockSize
        self.parallelism = parallelism
        self.salt = salt
        self.hash = hash
    }
}

/// Where the parent's PIN hash lives, and reading, writing and removing it.
public struct ParentPINFile: Sendable {
    public let stateDirectory: String

    public init(stateDirectory: String) { self.stateDirectory = stateDirectory }

    public var path: String { "\(stateDirectory)/\(ParentPINHash.fileName)" }

    /// Why the PIN cannot be checked.
    public enum LoadError: Error, Equatable, Sendable {
        /// No PIN is set (no file).
        case notSet
        case unreadable(FileError)
        case damaged(path: String)
    }

    public func load() throws(LoadError) -> ParentPINHash {
        let bytes: [UInt8]
        do {
            bytes = try Files.readRegularFile(path, maxBytes: 4096)
        } catch {
            if error.isMissing { throw .notSet }
            throw .unreadable(error)
        }
        guard let hash = ParentPINHash(fileBytes: bytes) else { throw .damaged(path: path) }
        return hash
    }

    /// Writes `hash` in place of any PIN before: a temporary file of mode 0600, then a rename.
    public func store(_ hash: ParentPINHash) throws(FileError) {
        try Files.makeDirectories(stateDirectory, mode: 0o700)
        try Files.writeAtomically(hash.fileBytes, directory: stateDirectory, name: ParentPINHash.fileName, mode: 0o600)
    }

    /// Removes the PIN; false when none was set.
    @discardableResult
    public func remove() throws(FileError) -> Bool {
        do {
            try Files.remove(path)
            return true
        } catch {
            if error.isMissing { return false }
            throw error
        }
    }
}

/// Compares two byte strings in time that depends on their lengths only, not on where they differ.
public func safeCompare(_ left: [UInt8], _ right: [UInt8]) -> Bool {
    guard left.count == right.count else { return false }
    var difference: UInt8 = 0
    for index in left.indices { difference |= left[index] ^ right[index] }
    return difference == 0
}
