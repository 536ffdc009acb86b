import Crypto
import CurfewCore
import Foundation

/// The pairing files of the shared directory (`PairingMessage`): writing them, and reading back the
/// ones that prove knowledge of the code.
extension SharedDirectory {
    public var pairingPath: String { "\(path)/pairing" }

    /// HMAC-SHA256 of `message` keyed by the code, hex.
    public static func pairingMAC(code: String, _ message: [UInt8]) -> String {
        hexString(Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Array(code.utf8)))))
    }

    public static func newNonce() -> String { hexString((0..<16).map { _ in UInt8.random(in: 0...255) }) }

    public static func newPairingCode() -> String {
        var generator = SystemRandomNumberGenerator()
        return String((0..<PairingCode.length).map { _ in PairingCode.alphabet.randomElement(using: &generator)! })
    }

    /// Signs `message` with `key` (the parent key it carries) and writes it under `pairing/`.
    public func publish(_ message: PairingMessage, signedBy key: SigningKey) throws {
        precondition(message.keyId == key.id, "a pairing file is signed by the key it carries")
        try write(try key.signedFile(message), into: ["pairing"], name: message.fileName)
    }

    /// Removes the pairing's files of `kinds` (the offering computer leaves its acceptance for the
    /// other to read; that one removes it).
    public func removePairing(nonce: String, kinds: [PairingMessage.Kind] = [.offer, .answer]) {
        for kind in kinds { unlink("\(pairingPath)/\(kind.word)-\(nonce).json") }
    }

    /// The pairing file at `name` when it is well formed, signed by the key it carries, and its HMAC
    /// verifies with `code` (for an answer, over `offerKey` and its own key; for an acceptance, signed
    /// by `offerKey` over it and `answerKey`).
    func verifiedPairing(
        name: String, kind: PairingMessage.Kind, code: String, offerKey: String?, answerKey: String? = nil
    ) -> (PairingMessage, PublicKey)? {
        guard let bytes = try? Files.readRegularFile("\(pairingPath)/\(name)", maxBytes: 4096),
            let (message, signature) = try? PairingMessage.parse(bytes, kind: kind), message.fileName == name,
            let key = PublicKey(base64: message.parentKey), key.id == message.keyId, key.verifies(signature, of: message)
        else { return nil }
        let expected: [UInt8]
        switch kind {
        case .offer: expected = PairingCode.offerMessage(nonce: message.nonce, parentKey: message.parentKey)
        case .answer:
            guard let offerKey else { return nil }
            expected = PairingCode.answerMessage(nonce: message.nonce, offerKey: offerKey, answerKey: message.parentKey)
        case .accepted:
            guard let offerKey, let answerKey, message.parentKey == offerKey else { return nil }
            expected = PairingCode.acceptedMessage(nonce: message.nonce, offerKey: offerKey, answerKey: answerKey)
        }
        // Compared as HMACs of their own, so the comparison takes the same time wherever they differ.
        let computed = Self.pairingMAC(code: code, expected)
        guard Self.pairingMAC(code: code, Array(computed.utf8)) == Self.pairingMAC(code: code, Array(message.mac.utf8)) else { return nil }
        return (message, key)
    }

    /// The offers whose HMAC verifies with `code` and that have not expired at `now`.
    public func pairingOffers(code: String, now: Instant) -> [(PairingMessage, PublicKey)] {
        let names = ((try? Files.list(pairingPath)) ?? []).filter { $0.hasPrefix("offer-") && $0.hasSuffix(".json") }.sorted()
        return names.prefix(1000).compactMap { verifiedPairing(name: $0, kind: .offer, code: code, offerKey: nil) }
            .filter { $0.0.expires >= now.seconds }
    }

    /// The answer to the offer `nonce` of key `offerKey`, when one proves knowledge of `code`.
    public func pairingAnswer(nonce: String, code: String, offerKey: String) -> (PairingMessage, PublicKey)? {
        verifiedPairing(name: "answer-\(nonce).json", kind: .answer, code: code, offerKey: offerKey)
    }

    /// The offering computer's acceptance of the answer with `answerKey`, when it is signed by
    /// `offerKey` and proves knowledge of `code`.
    public func pairingAcceptance(nonce: String, code: String, offerKey: String, answerKey: String) -> PairingMessage? {
        verifiedPairing(name: "accepted-\(nonce).json", kind: .accepted, code: code, offerKey: offerKey, answerKey: answerKey)?.0
    }
}
