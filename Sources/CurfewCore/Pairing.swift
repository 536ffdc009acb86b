/// Pairing two computers' parents through the shared folder, bound by a short code.
///
/// `curfew pair` on the first computer makes a code (shown only on its screen) and writes an offer:
/// its parent key, signed by that key, with an HMAC over the key keyed by the code. `curfew join CODE`
/// on the second computer finds the offer whose HMAC verifies with the code (so the key in it is the
/// one the first screen showed, not one planted by whoever else can write the folder), shows both
/// keys' fingerprints, and once its parent confirms, writes an answer: its own parent key, signed by
/// it, with an HMAC over both keys keyed by the code. The first computer checks the answer the same
/// way, trusts the second key once its parent confirms, and writes an acceptance: signed by its key,
/// with an HMAC over both keys. Only when the acceptance arrives does the second computer trust the
/// first key, so a key is trusted on either side only after both parents confirmed.
public enum PairingCode {
    /// No 0/O, 1/I/L: read aloud or typed from another screen.
    public static let alphabet = Array("23456789ABCDEFGHJKMNPQRSTUVWXYZ")
    public static let length = 12

    /// The code as it is shown: groups of four (`7KQM-4TXC-9PRD`).
    public static func display(_ code: String) -> String {
        stride(from: 0, to: code.count, by: 4).map { String(Array(code)[$0..<min($0 + 4, code.count)]) }.joined(separator: "-")
    }

    /// The code a parent typed, upper-cased without dashes or spaces, when it is one.
    public static func normalize(_ typed: String) -> String? {
        let code = String(typed.uppercased().filter { $0 != "-" && $0 != " " })
        guard code.count == length, code.allSatisfy(alphabet.contains) else { return nil }
        return code
    }

    /// The bytes an offer's HMAC is over.
    public static func offerMessage(nonce: String, parentKey: String) -> [UInt8] {
        Array("curfew-pair-offer-v1\n\(nonce)\n\(parentKey)".utf8)
    }

    /// The bytes an answer's HMAC is over: both keys, so neither can be swapped.
    public static func answerMessage(nonce: String, offerKey: String, answerKey: String) -> [UInt8] {
        Array("curfew-pair-answer-v1\n\(nonce)\n\(offerKey)\n\(answerKey)".utf8)
    }

    /// The bytes an acceptance's HMAC is over: both keys again, under a domain of its own (an answer's
    /// MAC is no acceptance).
    public static func acceptedMessage(nonce: String, offerKey: String, answerKey: String) -> [UInt8] {
        Array("curfew-pair-accepted-v1\n\(nonce)\n\(offerKey)\n\(answerKey)".utf8)
    }
}

/// One step of a pairing, as it lies in `<shared-dir>/pairing/`: `offer-<nonce>.json`,
/// `answer-<nonce>.json` or `accepted-<nonce>.json` (the offering computer's, once its parent
/// confirmed), signed by the parent key it carries.
public struct PairingMessage: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case offer = "pairing-offer", answer = "pairing-answer", accepted = "pairing-accepted"

        /// The file name's prefix.
        public var word: String {
            switch self {
            case .offer: "offer"
            case .answer: "answer"
            case .accepted: "accepted"
            }
        }
    }

    public var kind: Kind
    /// 32 hex digits chosen by the offer.
    public var nonce: String
    public var host: String
    /// Base64 of the raw Ed25519 parent public key.
    public var parentKey: String
    public var keyId: String
    /// HMAC-SHA256 (hex) keyed by the code over `PairingCode.offerMessage` or `answerMessage`.
    public var mac: String
    public var time: Int64
    /// Offers only: when the first computer stops waiting.
    public var expires: Int64

    public init(kind: Kind, nonce: String, host: String, parentKey: String, keyId: String, mac: String, time: Int64, expires: Int64) {
        self.kind = kind
        self.nonce = nonce
        self.host = host
        self.parentKey = parentKey
        self.keyId = keyId
        self.mac = mac
        self.time = time
        self.expires = expires
    }

    public static func isNonce(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    public var fileName: String { "\(kind.word)-\(nonce).json" }

    public var signedPayload: JSONValue {
        .object(
            JSONObject([
                ("format", .int(1)), ("kind", .string(kind.rawValue)), ("nonce", .string(nonce)), ("host", .string(host)),
                ("key", .string(parentKey)), ("keyId", .string(keyId)), ("mac", .string(mac)),
                ("time", .string(utcTimestamp(time))), ("expires", .string(utcTimestamp(expires))),
            ]))
    }

    static let fields = ["format", "kind", "nonce", "host", "key", "keyId", "mac", "time", "expires", "signature"]

    public static func parse(_ bytes: [UInt8], kind: Kind) throws(RecordError) -> (message: PairingMessage, signature: String) {
        let object = try StrictDocument.parse(
            bytes, noun: "pairing file", fieldPrefix: "pairing", maxBytes: 4096, version: 1, kind: kind.rawValue, fields: fields)
        guard case .string(let nonce)? = object["nonce"], isNonce(nonce),
            case .string(let host)? = object["host"], !host.isEmpty, host.utf8.count <= 255,
            case .string(let key)? = object["key"], key.utf8.count == 44,
            case .string(let keyId)? = object["keyId"], KeyID.isValid(keyId),
            case .string(let mac)? = object["mac"], mac.utf8.count == 64,
            case .string(let timeText)? = object["time"], let time = parseUTCTimestamp(timeText),
            case .string(let expiresText)? = object["expires"], let expires = parseUTCTimestamp(expiresText),
            case .string(let signature)? = object["signature"]
        else { throw RecordError("pairing file fields are malformed") }
        return (PairingMessage(kind: kind, nonce: nonce, host: host, parentKey: key, keyId: keyId, mac: mac, time: time, expires: expires), signature)
    }
}

extension PairingMessage: SignedDocument {
    public static var signingDomain: String { "curfew-pairing-v1\n" }
}
