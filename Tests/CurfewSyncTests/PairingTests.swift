import CurfewCore
import Foundation
import Testing

@testable import CurfewSync

/// Only a computer that knows the code can offer or answer a key.
@Suite struct PairingTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-pair-\(UUID().uuidString)").path

    func offer(_ key: SigningKey, code: String, nonce: String, expires: Int64 = 1_795_000_600) -> PairingMessage {
        PairingMessage(
            kind: .offer, nonce: nonce, host: "den", parentKey: key.publicKey.base64, keyId: key.id,
            mac: SharedDirectory.pairingMAC(code: code, PairingCode.offerMessage(nonce: nonce, parentKey: key.publicKey.base64)),
            time: 1_795_000_000, expires: expires)
    }

    @Test func codesAreTwelveUnambiguousCharactersShownInGroupsOfFour() {
        let code = SharedDirectory.newPairingCode()
        #expect(code.count == 12 && code.allSatisfy(PairingCode.alphabet.contains))
        #expect(PairingCode.display("7KQM4TXC9PRD") == "7KQM-4TXC-9PRD")
        #expect(PairingCode.normalize("7kqm-4txc 9prd") == "7KQM4TXC9PRD")
        #expect(PairingCode.normalize("7KQM-4TXC-9PR0") == nil)  // 0 is not in the alphabet
        #expect(PairingCode.normalize("7KQM-4TXC") == nil)
    }

    @Test func onlyOffersAndAnswersThatProveTheCodeCount() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let shared = SharedDirectory(path: root)
        try shared.create()
        let code = "7KQM4TXC9PRD"
        let first = SigningKey()
        let nonce = SharedDirectory.newNonce()
        try shared.publish(offer(first, code: code, nonce: nonce), signedBy: first)
        // Someone who can write the folder but does not know the code offers their own key.
        let intruder = SigningKey()
        try shared.publish(offer(intruder, code: "AAAAAAAAAAAA", nonce: SharedDirectory.newNonce()), signedBy: intruder)
        // ... or copies the genuine offer's MAC next to their own key.
        var stolen = offer(first, code: code, nonce: SharedDirectory.newNonce())
        stolen.parentKey = intruder.publicKey.base64
        stolen.keyId = intruder.id
        try shared.publish(stolen, signedBy: intruder)
        // An expired genuine offer.
        try shared.publish(offer(first, code: code, nonce: SharedDirectory.newNonce(), expires: 1_794_999_999), signedBy: first)
        let offers = shared.pairingOffers(code: code, now: Instant(seconds: 1_795_000_000))
        #expect(offers.map(\.1) == [first.publicKey] && offers.first?.0.nonce == nonce)
        #expect(shared.pairingOffers(code: "7KQM4TXC9PRE", now: Instant(seconds: 1_795_000_000)).isEmpty)

        // The answer binds both keys: a genuine answer's MAC does not carry another key.
        let second = SigningKey()
        func answer(_ key: SigningKey, offerKey: String, code: String) -> PairingMessage {
            PairingMessage(
                kind: .answer, nonce: nonce, host: "kids", parentKey: key.publicKey.base64, keyId: key.id,
                mac: SharedDirectory.pairingMAC(
                    code: code, PairingCode.answerMessage(nonce: nonce, offerKey: offerKey, answerKey: key.publicKey.base64)),
                time: 1_795_000_010, expires: 1_795_000_600)
        }
        try shared.publish(answer(intruder, offerKey: first.publicKey.base64, code: "AAAAAAAAAAAA"), signedBy: intruder)
        #expect(shared.pairingAnswer(nonce: nonce, code: code, offerKey: first.publicKey.base64) == nil)
        var swapped = answer(second, offerKey: first.publicKey.base64, code: code)
        swapped.parentKey = intruder.publicKey.base64
        swapped.keyId = intruder.id
        try shared.publish(swapped, signedBy: intruder)
        #expect(shared.pairingAnswer(nonce: nonce, code: code, offerKey: first.publicKey.base64) == nil)
        // Signed by another key than the one it carries.
        let genuine = answer(second, offerKey: first.publicKey.base64, code: code)
        try Data(genuine.fileBytes(signature: try intruder.sign(genuine.signingBytes))).write(
            to: URL(fileURLWithPath: "\(shared.pairingPath)/\(genuine.fileName)"))
        #expect(shared.pairingAnswer(nonce: nonce, code: code, offerKey: first.publicKey.base64) == nil)
        try shared.publish(genuine, signedBy: second)
        #expect(shared.pairingAnswer(nonce: nonce, code: code, offerKey: first.publicKey.base64)?.1 == second.publicKey)
        #expect(shared.pairingAnswer(nonce: nonce, code: code, offerKey: intruder.publicKey.base64) == nil)
        shared.removePairing(nonce: nonce)
        #expect(!FileManager.default.fileExists(atPath: "\(shared.pairingPath)/\(genuine.fileName)"))
    }

    /// The second computer trusts the offered key only once the first computer's parent confirmed:
    /// an acceptance signed by the offered key whose HMAC binds the code to both keys.
    @Test func onlyTheOfferingKeysAcceptanceOfThisAnswerCounts() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let shared = SharedDirectory(path: root)
        try shared.create()
        let code = "7KQM4TXC9PRD"
        let nonce = SharedDirectory.newNonce()
        let (first, second, intruder) = (SigningKey(), SigningKey(), SigningKey())
        func accepted(by key: SigningKey, answerKey: String, code: String, domain: (String, String, String) -> [UInt8]) -> PairingMessage {
            PairingMessage(
                kind: .accepted, nonce: nonce, host: "den", parentKey: key.publicKey.base64, keyId: key.id,
                mac: SharedDirectory.pairingMAC(code: code, domain(nonce, first.publicKey.base64, answerKey)),
                time: 1_795_000_020, expires: 1_795_000_600)
        }
        let acceptance = { (nonce: String, offerKey: String, answerKey: String) in
            PairingCode.acceptedMessage(nonce: nonce, offerKey: offerKey, answerKey: answerKey)
        }
        func found() -> PairingMessage? {
            shared.pairingAcceptance(nonce: nonce, code: code, offerKey: first.publicKey.base64, answerKey: second.publicKey.base64)
        }
        #expect(found() == nil, "nothing accepted yet")
        // Whoever can write the folder, with a key of their own and without the code.
        try shared.publish(accepted(by: intruder, answerKey: second.publicKey.base64, code: "AAAAAAAAAAAA", domain: acceptance), signedBy: intruder)
        #expect(found() == nil)
        // The offering key's acceptance of another answer (the intruder's key), or an answer's MAC reused.
        try shared.publish(accepted(by: first, answerKey: intruder.publicKey.base64, code: code, domain: acceptance), signedBy: first)
        #expect(found() == nil)
        let answerMAC = { (nonce: String, offerKey: String, answerKey: String) in
            PairingCode.answerMessage(nonce: nonce, offerKey: offerKey, answerKey: answerKey)
        }
        try shared.publish(accepted(by: first, answerKey: second.publicKey.base64, code: code, domain: answerMAC), signedBy: first)
        #expect(found() == nil)
        // The genuine acceptance.
        let genuine = accepted(by: first, answerKey: second.publicKey.base64, code: code, domain: acceptance)
        try shared.publish(genuine, signedBy: first)
        #expect(found() == genuine)
        #expect(genuine.fileName == "accepted-\(nonce).json")
        // The offering computer leaves it when it withdraws its offer; the answering one removes it.
        shared.removePairing(nonce: nonce)
        #expect(found() == genuine)
        shared.removePairing(nonce: nonce, kinds: [.accepted])
        #expect(found() == nil)
    }
}
