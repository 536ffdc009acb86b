import SystemPackage
import CurfewCore
import CurfewStore
import CurfewSync
import Foundation
import Testing

@testable import CurfewAgent
@testable import CurfewSync

#if canImport(Glibc)
    import Glibc
#endif

/// A seeded, deterministic generator (SplitMix64), so a failing run can be replayed exactly.
struct SplitMix64 {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) } }
    mutating func hex(_ count: Int) -> String {
        String((0..<count).map { _ in Array("0123456789abcdef")[below(16)] })
    }
}

/// Thousands of hostile files in `records/` never change what is enforced, never crash the agent,
/// and are each answered (or ignored) as docs/design.md's "Records and confirmations" says.
@Suite struct HostileRecordFuzzTests {
    static let user = "fuzzkid"
    static let placeholder = "SIGNATURE-PLACEHOLDER"

    /// A valid record to mutate: its bytes with a placeholder signature, its signed bytes, its key.
    struct Base {
        var label: String
        var template: [UInt8]
        var signed: [UInt8]
        var key: SigningKey
    }

    enum Kind: String, CaseIterable {
        case bitFlip, truncation, truncationToEmpty, wrongType, deepNesting, deepRawNesting, duplicateKey, invalidUTF8
        case hugeNumber, fraction, futureFormat, unknownField, nonCanonical, forgedSignature, foreignSignature
        case foreignKeyRecord, malleatedSignature, oversized, replayOlder, replayForeign, validUnderWrongName
        case symlink, fifo
    }

    enum Placement: String, CaseIterable { case hashName, wrongHexName, nonRecordName }

    enum Signer: CaseIterable { case trusted, foreign, forged, stale }

    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int = 0) -> Int? {
        guard needle.count <= haystack.count, start <= haystack.count - needle.count else { return nil }
        for index in start...(haystack.count - needle.count) where haystack[index] == needle[0] {
            if Array(haystack[index..<(index + needle.count)]) == needle { return index }
        }
        return nil
    }

    static func replace(_ needle: [UInt8], with replacement: [UInt8], in bytes: [UInt8]) -> [UInt8]? {
        guard let index = find(needle, in: bytes) else { return nil }
        return Array(bytes[..<index]) + replacement + Array(bytes[(index + needle.count)...])
    }

    /// The template's signature slot filled: signed over the (mutated) payload by the trusted or a
    /// foreign key, a random forged signature, or the original (stale) one.
    static func finalize(
        _ bytes: [UInt8], base: Base, signer: Signer, trusted: SigningKey, foreign: SigningKey, rng: inout SplitMix64
    ) throws -> [UInt8] {
        let slot = Array(placeholder.utf8)
        guard find(slot, in: bytes) != nil else { return bytes }
        let signature: String
        switch signer {
        case .trusted, .foreign:
            let field = Array(",\"signature\":\"\(placeholder)\"".utf8)
            let payload = replace(field, with: [], in: bytes) ?? bytes
            let key = signer == .trusted ? trusted : foreign
            signature = try key.sign(Array(RecordFormat.signingDomain.utf8) + payload)
        case .forged:
            signature = Data(rng.bytes(rng.chance(80) ? 64 : rng.below(100))).base64EncodedString()
        case .stale:
            let parsed = try? JSONValue.parse(base.signed)
            if case .object(let object)? = parsed, case .string(let old)? = object["signature"] {
                signature = old
            } else {
                signature = ""
            }
        }
        return replace(slot, with: Array(signature.utf8), in: bytes) ?? bytes
    }

    /// Spans of the numbers that follow `":` (every whole-number field, nested or not).
    static func numberSpans(_ bytes: [UInt8]) -> [Range<Int>] {
        var spans: [Range<Int>] = []
        var index = 1
        while index < bytes.count {
            if bytes[index - 1] == UInt8(ascii: "\""), bytes[index] == UInt8(ascii: ":"), index + 1 < bytes.count {
                var end = index + 1
                while end < bytes.count, bytes[end] == UInt8(ascii: "-") || (0x30...0x39).contains(bytes[end]) { end += 1 }
                if end > index + 1 { spans.append((index + 1)..<end) }
            }
            index += 1
        }
        return spans
    }

    static func wrongValue(for original: JSONValue, nullAllowed: Bool, rng: inout SplitMix64) -> JSONValue {
        var candidates: [JSONValue] = [
            .int(7), .int(-1), .string("7"), .string(""), .bool(true), .bool(false), .array([]), .array([.int(1)]),
            .object(JSONObject()), .object(JSONObject([("a", .int(1))])),
        ]
        if nullAllowed { candidates.append(.null) }
        candidates = candidates.filter { $0.typeName != original.typeName }
        return rng.pick(candidates)
    }

    static func nested(depth: Int, rng: inout SplitMix64) -> JSONValue {
        var value: JSONValue = rng.chance(50) ? .int(1) : .string("deep")
        for _ in 0..<depth {
            value = rng.chance(50) ? .array([value]) : .object(JSONObject([("a", value)]))
        }
        return value
    }

    /// One hostile variant of `base`.
    static func mutate(
        _ kind: Kind, base: Base, trusted: SigningKey, foreign: SigningKey, rng: inout SplitMix64
    ) throws -> [UInt8] {
        func signer() -> Signer {
            rng.chance(55) ? .trusted : rng.pick(Signer.allCases)
        }
        func objectOf(_ bytes: [UInt8]) -> JSONObject {
            if case .object(let object)? = try? JSONValue.parse(bytes) { return object }
            return JSONObject()
        }
        switch kind {
        case .bitFlip:
            var bytes = base.signed
            for _ in 0..<(1 + rng.below(4)) {
                bytes[rng.below(bytes.count)] ^= UInt8(1) << UInt8(rng.below(8))
            }
            return bytes
        case .truncation:
            return Array(base.signed.prefix(1 + rng.below(base.signed.count - 1)))
        case .truncationToEmpty:
            return []
        case .wrongType:
            var object = objectOf(base.template)
            if rng.chance(35), case .object(var policy)? = object["policy"], !policy.keys.isEmpty {
                let key = rng.pick(policy.keys)
                policy[key] = wrongValue(for: policy[key] ?? .null, nullAllowed: false, rng: &rng)
                object["policy"] = .object(policy)
            } else {
                let key = rng.pick(object.keys)
                let nullAllowed = !["policy", "requestId"].contains(key)
                var value = wrongValue(for: object[key] ?? .null, nullAllowed: nullAllowed, rng: &rng)
                if key == "requestId", case .int = value { value = .string("1") }
                object[key] = value
            }
            return try finalize(
                JSONValue.object(object).canonicalBytes, base: base, signer: signer(), trusted: trusted, foreign: foreign,
                rng: &rng)
        case .deepNesting:
            var object = objectOf(base.template)
            let deep = nested(depth: JSONLimits.maxDepth + 1 + rng.below(200), rng: &rng)
            if rng.chance(50), case .object(var policy)? = object["policy"], !policy.keys.isEmpty {
                policy[rng.pick(policy.keys)] = deep
                object["policy"] = .object(policy)
            } else {
                object[rng.pick(object.keys.filter { $0 != "signature" })] = deep
            }
            return try finalize(
                JSONValue.object(object).canonicalBytes, base: base, signer: signer(), trusted: trusted, foreign: foreign,
                rng: &rng)
        case .deepRawNesting:
            // Far deeper than any recursion should go, still under the size limit.
            let depth = rng.pick([33, 100, 1_000, 10_000, 100_000])
            let (open, close): (String, String) = rng.chance(50) ? ("[", "]") : ("{\"a\":", "}")
            let depthForSize = min(depth, RecordFormat.maxBytes / (open.utf8.count + 1) - 10)
            var text = String(repeating: open, count: depthForSize) + "1"
            if rng.chance(70) { text += String(repeating: close, count: depthForSize) }
            return Array(text.utf8)
        case .duplicateKey:
            let object = objectOf(base.template)
            let key = rng.pick(object.keys.filter { $0 != "signature" })
            let value = rng.pick(["1", "2", "\"\(user)\"", "\"other\"", "null", "{}", "[]", "\"policy\""])
            guard let index = find(Array("\"\(key)\":".utf8), in: base.template) else { return base.template }
            var bytes = base.template
            bytes.insert(contentsOf: Array("\"\(key)\":\(value),".utf8), at: index)
            return try finalize(bytes, base: base, signer: signer(), trusted: trusted, foreign: foreign, rng: &rng)
        case .invalidUTF8:
            let sequences: [[UInt8]] = [
                [0xFF], [0xFE], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
                [0x80], [0xC3], [0xE2, 0x82], [0xF8, 0x88, 0x80, 0x80, 0x80], [0x00], Array("\\ud800".utf8),
                Array("\\udfff\\ud800".utf8),
            ]
            var bytes = base.template
            let anchors = ["\"user\":\"", "\"kind\":\"", "\"author\":\"", "\"time\":\"", "\"timezone\":\""]
            if rng.chance(75), let index = find(Array(rng.pick(anchors).utf8), in: bytes) {
                let at = index + rng.pick(anchors).utf8.count
                bytes.insert(contentsOf: rng.pick(sequences), at: min(at, bytes.count))
            } else {
                bytes.insert(contentsOf: rng.pick(sequences), at: rng.below(bytes.count))
            }
            return try finalize(bytes, base: base, signer: signer(), trusted: trusted, foreign: foreign, rng: &rng)
        case .hugeNumber, .fraction:
            var bytes = base.template
            // A grant's request id has no upper bound: a huge one signed by the trusted key is valid.
            let requestId = Array("\"requestId\":".utf8)
            let spans = numberSpans(bytes).filter { span in
                kind == .fraction || span.lowerBound < requestId.count
                    || Array(bytes[(span.lowerBound - requestId.count)..<span.lowerBound]) != requestId
            }
            guard !spans.isEmpty else { return base.template + [0x20] }
            let span = rng.pick(spans)
            let original = String(decoding: bytes[span], as: UTF8.self)
            let replacement =
                kind == .hugeNumber
                ? rng.pick([
                    "2147483648", "4294967296", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
                    "-9223372036854775809", "18446744073709551616", "99999999999999999999999999999999999999", "1e400",
                    "-1e400", "1E19", "1e308", "100000000000000000000000000000000000000000000000000000000000000000",
                ])
                : rng.pick([
                    original + ".0", original + ".5", original + "e0", original + "E1", "0.5", "1.5", "-0", "0.0",
                    "+1", "0\(original)", "1e-3", "\(original).", ".5", "-", "1e", "NaN", "Infinity",
                ])
            bytes.replaceSubrange(span, with: Array(replacement.utf8))
            return try finalize(bytes, base: base, signer: signer(), trusted: trusted, foreign: foreign, rng: &rng)
        case .futureFormat:
            let format = rng.pick(["2", "3", "0", "-1", "100", "9999999999", "\"1\"", "1.0", "null", "true"])
            var bytes = replace(Array("\"format\":1".utf8), with: Array("\"format\":\(format)".utf8), in: base.template) ?? []
            if rng.chance(30), !bytes.isEmpty {
                // A future format may add fields: they must not make it acceptable either.
                bytes = replace(Array("\"kind\":".utf8), with: Array("\"future\":true,\"kind\":".utf8), in: bytes) ?? bytes
            }
            return try finalize(bytes, base: base, signer: signer(), trusted: trusted, foreign: foreign, rng: &rng)
        case .unknownField:
            var object = objectOf(base.template)
            let name = rng.pick(["zzz", "comment", "signatures", "Format", "user ", "extra", "", "\u{00e9}", "__proto__"])
            let value: JSONValue = rng.pick([.null, .int(0), .string("x"), .bool(false), .array([]), .object(JSONObject())])
            if rng.chance(30), case .object(var policy)? = object["policy"] {
                policy[name] = value
                object["policy"] = .object(policy)
            } else {
                object[name] = value
            }
            return try finalize(
                JSONValue.object(object).canonicalBytes, base: base, signer: signer(), trusted: trusted, foreign: foreign,
                rng: &rng)
        case .nonCanonical:
            var bytes = base.template
            switch rng.below(7) {
            case 0: bytes.append(contentsOf: rng.pick([[0x0A], [0x20], [0x0D, 0x0A], [0x09]]))
            case 1: bytes.insert(contentsOf: rng.pick([[0xEF, 0xBB, 0xBF], [0x20], [0x0A]]), at: 0)
            case 2:
                let structural = bytes.indices.filter { [0x7B, 0x2C, 0x3A, 0x5B].contains(bytes[$0]) }
                if let at = structural.isEmpty ? nil : rng.pick(structural) {
                    bytes.insert(contentsOf: rng.pick([[0x20], [0x0A], [0x09], [0x20, 0x20], [0x0D]]), at: at + 1)
                }
            case 3:
                // "\u0070olicy" for "policy": the same string, escaped where canonical JSON would not.
                bytes = replace(Array("\"kind\":\"p".utf8), with: Array("\"kind\":\"\\u0070".utf8), in: bytes)
                    ?? replace(Array("\"kind\":\"g".utf8), with: Array("\"kind\":\"\\u0067".utf8), in: bytes) ?? bytes
            case 4:
                // Keys out of order: move the first field to the end.
                var object = objectOf(base.template)
                if let first = object.keys.first, let value = object[first] {
                    object[first] = nil
                    let rest = Array(JSONValue.object(object).canonicalBytes.dropLast())
                    let field = Array("\(quotedJSON(first)):".utf8) + value.canonicalBytes
                    bytes = rest + (rest.count > 1 ? [0x2C] : []) + field + [0x7D]
                }
            case 5: bytes = replace(Array("\"user\":\"".utf8), with: Array("\"user\":\"\\/".utf8), in: bytes) ?? bytes
            default:
                let spans = numberSpans(bytes)
                if !spans.isEmpty { bytes.insert(contentsOf: [0x30], at: rng.pick(spans).lowerBound) }
            }
            return try finalize(bytes, base: base, signer: signer(), trusted: trusted, foreign: foreign, rng: &rng)
        case .forgedSignature:
            return try finalize(base.template, base: base, signer: .forged, trusted: trusted, foreign: foreign, rng: &rng)
        case .foreignSignature:
            // Claims the trusted author, signed by another key.
            return try finalize(base.template, base: base, signer: .foreign, trusted: trusted, foreign: foreign, rng: &rng)
        case .foreignKeyRecord, .replayForeign:
            return base.signed
        case .malleatedSignature:
            var object = objectOf(base.signed)
            guard case .string(let signature)? = object["signature"] else { return base.signed }
            var characters = Array(signature)
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
            switch rng.below(4) {
            case 0:
                // The last character before "==" carries 4 unused bits.
                if characters.count == 88, let value = alphabet.firstIndex(of: characters[85]) {
                    characters[85] = alphabet[(value & ~15) | ((value & 15) ^ (1 + rng.below(15)))]
                }
            case 1: characters.removeLast(2)
            case 2: characters.insert(rng.pick([" ", "\n", "=", "*"]), at: rng.below(characters.count))
            default: characters.append(contentsOf: rng.pick(["=", "AA==", "\n"]))
            }
            object["signature"] = .string(String(characters))
            return JSONValue.object(object).canonicalBytes
        case .oversized:
            var bytes = base.signed
            if rng.chance(50) {
                bytes.append(contentsOf: repeatElement(0x20, count: RecordFormat.maxBytes + 1 - bytes.count + rng.below(4096)))
            } else {
                var object = objectOf(base.template)
                object["user"] = .string(String(repeating: "k", count: RecordFormat.maxBytes + rng.below(100_000)))
                bytes = try finalize(
                    JSONValue.object(object).canonicalBytes, base: base, signer: .trusted, trusted: trusted, foreign: foreign,
                    rng: &rng)
            }
            return bytes
        case .replayOlder, .validUnderWrongName, .symlink, .fifo:
            return base.signed
        }
    }

    static func quotedJSON(_ text: String) -> String {
        String(decoding: JSONValue.string(text).canonicalBytes, as: UTF8.self)
    }

    static func write(_ bytes: [UInt8], to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FileError(.create, path, errno: Errno(rawValue: errno)) }
        defer { close(fd) }
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, bytes.count - done) }
            guard count > 0 else { throw FileError(.write, path, errno: Errno(rawValue: errno)) }
            done += count
        }
    }

    /// Makes `path` look 20 minutes old, past the grace given to files still arriving.
    static func age(_ path: String) {
        let old = Int(Date().timeIntervalSince1970) - 20 * 60
        var times = [timespec(tv_sec: old, tv_nsec: 0), timespec(tv_sec: old, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0, "cannot age \(path)")
    }

    @Test func tenThousandHostileFilesChangeNothing() throws {
        let clock = ContinuousClock()
        let started = clock.now
        var trustedKey: SigningKey?
        var older: [String] = []
        var inForce = ""
        let (agent, root) = try makeTestAgent(user: Self.user, prefix: "curfew-fuzz", more: { shared, key in
            trustedKey = key
            older = (try Files.list(shared.recordsPath)).filter(SharedDirectory.isRecordName)
            var policy = Policy.defaults(for: Self.user)
            policy.bedtime = nil
            policy.dailyLimit = .minutes(90)
            older.append(
                try shared.publish(
                    PolicyRecord(user: Self.user, version: 2, baseVersion: 1, author: key.id, time: 1_790_000_100, policy: policy),
                    signedBy: key))
            policy.dailyLimit = .minutes(60)
            inForce = try shared.publish(
                PolicyRecord(user: Self.user, version: 3, baseVersion: 2, author: key.id, time: 1_790_000_200, policy: policy),
                signedBy: key)
        })
        defer { try? FileManager.default.removeItem(atPath: root) }
        let trusted = try #require(trustedKey)
        #expect(older.count == 2)
        let shared = SharedDirectory(path: "\(root)/state/shared", trust: KeyRing(stateDirectory: "\(root)/state"))
        let records = shared.recordsPath
        let machineID = agent.machine.id
        let confirmationsDirectory = shared.confirmationsPath(of: machineID)

        try agent.reloadPolicies()
        let enforced = try #require(agent.state.policies[Self.user])
        #expect(agent.state.version(of: Self.user) == 3)
        #expect(shared.confirmations(for: inForce).first?.confirmation?.outcome == .applied)

        // The records to mutate: valid ones, by the trusted key (never published as they are) and by a stranger.
        let foreign = SigningKey()
        func base(_ label: String, _ key: SigningKey, policy record: PolicyRecord) throws -> Base {
            Base(
                label: label, template: record.fileBytes(signature: Self.placeholder),
                signed: record.fileBytes(signature: try key.sign(record.signingBytes)), key: key)
        }
        func base(_ label: String, _ key: SigningKey, grant: GrantRecord) throws -> Base {
            Base(
                label: label, template: grant.fileBytes(signature: Self.placeholder),
                signed: grant.fileBytes(signature: try key.sign(grant.signingBytes)), key: key)
        }
        var generous = enforced
        generous.dailyLimit = .minutes(480)
        let date = try LocalDate.parse("2026-11-22")
        let trustedBases = [
            try base(
                "trusted policy v4", trusted,
                policy: PolicyRecord(
                    user: Self.user, version: 4, baseVersion: 3, author: trusted.id, time: 1_790_000_300, policy: generous)),
            try base(
                "trusted removal v4", trusted,
                policy: PolicyRecord(
                    user: Self.user, version: 4, baseVersion: 3, author: trusted.id, time: 1_790_000_400, policy: nil)),
            try base(
                "trusted grant", trusted,
                grant: GrantRecord(
                    user: Self.user, date: date, extraMinutes: 120, bedtimeDelayMinutes: 0, author: trusted.id,
                    time: 1_790_000_500, nonce: String(repeating: "ab", count: 16), requestId: 7)),
        ]
        let inForceBytes = try Files.readRegularFile("\(records)/\(inForce)", maxBytes: 1 << 20)
        let inForceBase = Base(
            label: "record in force", template: try Self.templateOf(inForceBytes), signed: inForceBytes, key: trusted)
        let foreignBases = [
            try base(
                "foreign policy v9", foreign,
                policy: PolicyRecord(
                    user: Self.user, version: 9, baseVersion: 8, author: foreign.id, time: 1_790_000_600, policy: generous)),
            try base(
                "foreign grant", foreign,
                grant: GrantRecord(
                    user: Self.user, date: date, extraMinutes: 240, bedtimeDelayMinutes: 60, author: foreign.id,
                    time: 1_790_000_700, nonce: String(repeating: "cd", count: 16), requestId: nil)),
        ]
        let mutable = trustedBases + [inForceBase] + foreignBases
        let olderBytes = try older.map { try Files.readRegularFile("\(records)/\($0)", maxBytes: 1 << 20) }
        let validTrusted = Set((trustedBases + [inForceBase]).map(\.signed))

        var rng = SplitMix64(state: 0x00C0_FFEE_2026_1122)
        var kinds: [Kind: Int] = [:]
        var placements: [Placement: Int] = [:]
        // Every file named like a record, with the outcome its confirmation must have.
        var expected: [String: CurfewCore.Confirmation.Outcome] = Dictionary(uniqueKeysWithValues: older.map { ($0, .superseded) })
        var nonRecordNames: [String] = []
        let weights: [(Kind, Int)] = [
            (.bitFlip, 16), (.truncation, 7), (.truncationToEmpty, 1), (.wrongType, 10), (.deepNesting, 5),
            (.deepRawNesting, 2), (.duplicateKey, 5), (.invalidUTF8, 6), (.hugeNumber, 6), (.fraction, 5),
            (.futureFormat, 5), (.unknownField, 5), (.nonCanonical, 6), (.forgedSignature, 5), (.foreignSignature, 4),
            (.foreignKeyRecord, 2), (.malleatedSignature, 4), (.replayOlder, 2), (.replayForeign, 1),
            (.validUnderWrongName, 1),
        ]
        let totalWeight = weights.reduce(0) { $0 + $1.1 }
        func drawKind() -> Kind {
            var roll = rng.below(totalWeight)
            for (kind, weight) in weights {
                if roll < weight { return kind }
                roll -= weight
            }
            return .bitFlip
        }

        let batches = 10
        let perBatch = 1_000
        var generated = 0
        for batch in 0..<batches {
            var batchNames: [String] = []
            var specials: [Kind] = []
            if batch < 4 { specials = [.oversized, .oversized, .symlink, .fifo] }
            var made = 0
            while made < perBatch {
                let kind = made < specials.count ? specials[made] : drawKind()
                let name: String
                let placement: Placement
                var outcome = CurfewCore.Confirmation.Outcome.rejected
                switch kind {
                case .symlink, .fifo:
                    name = "\(rng.hex(64)).json"
                    placement = .hashName
                    let path = "\(records)/\(name)"
                    if kind == .symlink {
                        #expect(symlink("\(records)/\(rng.pick([inForce] + older))", path) == 0)
                    } else {
                        #expect(mkfifo(path, 0o644) == 0)
                    }
                case .replayOlder:
                    // An older valid record saved again under its own name: a duplicate, still superseded.
                    let which = rng.below(older.count)
                    name = older[which]
                    placement = .hashName
                    outcome = .superseded
                    try Self.write(olderBytes[which], to: "\(records)/\(name)")
                default:
                    let source: Base =
                        switch kind {
                        case .foreignKeyRecord, .replayForeign: rng.pick(foreignBases)
                        case .validUnderWrongName, .malleatedSignature, .foreignSignature: rng.pick(trustedBases + [inForceBase])
                        default: rng.pick(mutable)
                        }
                    let bytes = try Self.mutate(kind, base: source, trusted: trusted, foreign: foreign, rng: &rng)
                    let hashName = "\(sha256Hex(bytes)).json"
                    let roll = rng.below(100)
                    let chosen: Placement =
                        kind == .validUnderWrongName ? (roll < 70 ? .wrongHexName : .nonRecordName)
                        : roll < 82 ? .hashName : roll < 93 ? .wrongHexName : .nonRecordName
                    switch chosen {
                    case .hashName:
                        // A mutation that happens to give back a valid record is not hostile: draw again.
                        if validTrusted.contains(bytes) { continue }
                        if expected[hashName] != nil && kind != .replayForeign { continue }
                        name = hashName
                    case .wrongHexName:
                        name = "\(rng.hex(64)).json"
                    case .nonRecordName:
                        let hex = rng.hex(64)
                        name = rng.pick([
                            ".syncthing.\(hex).json.tmp", "\(hex).sync-conflict-20261122-043900-ABCDEFG.json", "README",
                            ".tmp-\(rng.hex(8))", "\(hex.uppercased()).json", String(hex.prefix(63)) + ".json", "\(hex).json~",
                            "\(hex).JSON", "x.sync-conflict-1.json", ".\(hex).json",
                        ])
                    }
                    placement = chosen
                    if expected[name] != nil && kind != .replayForeign { continue }
                    if chosen == .nonRecordName && nonRecordNames.contains(name) { continue }
                    try Self.write(bytes, to: "\(records)/\(name)")
                }
                Self.age("\(records)/\(name)")
                if SharedDirectory.isRecordName(name) {
                    expected[name] = outcome
                    batchNames.append(name)
                } else {
                    nonRecordNames.append(name)
                    #expect(placement == .nonRecordName)
                }
                kinds[kind, default: 0] += 1
                placements[placement, default: 0] += 1
                made += 1
                generated += 1
            }

            try agent.reloadPolicies()
            #expect(agent.state.policies[Self.user] == enforced, "batch \(batch): the enforced policy changed")
            #expect(agent.state.version(of: Self.user) == 3, "batch \(batch): the enforced version changed")
            #expect(agent.state.policies.count == 1, "batch \(batch): another user appeared")
            #expect(shared.confirmations(for: inForce).first?.confirmation?.outcome == .applied)
            for name in batchNames {
                let readings = shared.confirmations(for: name).filter { $0.machine == machineID }
                let confirmation = readings.first?.confirmation
                #expect(readings.count == 1 && confirmation != nil, "batch \(batch): \(name) is not answered")
                guard let confirmation else { continue }
                #expect(confirmation.outcome == expected[name], "batch \(batch): \(name): \(confirmation.outcome)")
                #expect(confirmation.reason?.isEmpty == false, "batch \(batch): \(name) has no reason")
            }
        }

        // Every file named like a record is answered exactly once, none applied but the record in force;
        // no other name is answered.
        let answered = Set(try Files.list(confirmationsDirectory))
        #expect(answered == Set(expected.keys).union([inForce]))
        for name in nonRecordNames { #expect(!answered.contains(name), "\(name) was answered") }
        var outcomes: [CurfewCore.Confirmation.Outcome: Int] = [:]
        for name in answered {
            let bytes = try Files.readRegularFile("\(confirmationsDirectory)/\(name)", maxBytes: 1 << 20)
            let confirmation = try CurfewCore.Confirmation.parse(bytes).confirmation
            outcomes[confirmation.outcome, default: 0] += 1
            if confirmation.outcome == .applied && name != inForce {
                let content = (try? Files.readRegularFile("\(records)/\(name)", maxBytes: 1 << 20)) ?? []
                Issue.record("\(name) was applied: \(String(decoding: content, as: UTF8.self))")
            }
        }
        #expect(outcomes[.applied] == 1)
        #expect(generated >= 10_000)
        #expect(agent.state.policies[Self.user] == enforced && agent.state.version(of: Self.user) == 3)

        let elapsed = clock.now - started
        let kindCounts = Kind.allCases.map { "\($0.rawValue)=\(kinds[$0] ?? 0)" }.joined(separator: " ")
        let placementCounts = Placement.allCases.map { "\($0.rawValue)=\(placements[$0] ?? 0)" }.joined(separator: " ")
        let outcomeCounts = CurfewCore.Confirmation.Outcome.allCases.map { "\($0.rawValue)=\(outcomes[$0] ?? 0)" }
            .joined(separator: " ")
        print("hostile records: \(generated) files in \(elapsed)")
        print("  kinds: \(kindCounts)")
        print("  placements: \(placementCounts)")
        print("  confirmations: \(outcomeCounts); record names answered: \(expected.count + 1)")
    }

    /// A valid grant whose signature is spelled with the unused trailing bits of its base64 set is the
    /// same signed grant under another name: it must not add its extra time a second time.
    @Test func aReSpelledSignatureIsNotAnotherRecord() throws {
        var trustedKey: SigningKey?
        var grantName = ""
        let (agent, root) = try makeTestAgent(user: Self.user, prefix: "curfew-fuzz-b64", more: { shared, key in
            trustedKey = key
            grantName = try shared.publish(
                GrantRecord(
                    user: Self.user, date: try LocalDate.parse("2026-11-22"), extraMinutes: 30, bedtimeDelayMinutes: 0,
                    author: key.id, time: 1_790_000_500, nonce: String(repeating: "ef", count: 16)),
                signedBy: key)
        })
        defer { try? FileManager.default.removeItem(atPath: root) }
        _ = try #require(trustedKey)
        let shared = SharedDirectory(path: "\(root)/state/shared", trust: KeyRing(stateDirectory: "\(root)/state"))
        try agent.reloadPolicies()
        let before = agent.state.adjustments
        #expect(before[Self.user]?.values.first?.extraMinutes == 30)

        let bytes = try Files.readRegularFile("\(shared.recordsPath)/\(grantName)", maxBytes: 1 << 20)
        guard case .object(var object) = try JSONValue.parse(bytes), case .string(let signature)? = object["signature"]
        else {
            Issue.record("unreadable grant")
            return
        }
        var characters = Array(signature)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        let value = try #require(alphabet.firstIndex(of: characters[85]))
        characters[85] = alphabet[value ^ 1]
        object["signature"] = .string(String(characters))
        let copy = JSONValue.object(object).canonicalBytes
        #expect(Data(base64Encoded: String(characters)) == Data(base64Encoded: signature), "the same signature bytes")
        let copyName = "\(sha256Hex(copy)).json"
        try Self.write(copy, to: "\(shared.recordsPath)/\(copyName)")
        try agent.reloadPolicies()
        #expect(agent.state.adjustments == before)
        let answer = shared.confirmations(for: copyName).first?.confirmation
        #expect(answer?.outcome == .rejected)
        #expect(answer?.reason == "signature does not verify with key \(trustedKey?.id ?? "")")
        #expect(shared.confirmations(for: grantName).first?.confirmation?.outcome == .applied)
    }

    /// A signed file's bytes with its signature replaced by the placeholder.
    static func templateOf(_ signed: [UInt8]) throws -> [UInt8] {
        guard case .object(var object) = try JSONValue.parse(signed) else { return signed }
        object["signature"] = .string(placeholder)
        return JSONValue.object(object).canonicalBytes
    }
}
