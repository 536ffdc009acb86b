/// A document of the shared directory that carries an Ed25519 signature: policy records, grants,
/// confirmations and usage summaries. On disk it is the canonical JSON of `signedPayload` plus a
/// `signature` field (base64); the signature is over the document kind's `signingDomain` followed by
/// the canonical bytes of the payload. Each kind has a domain of its own, so a signature of one kind
/// can never pass for another's.
public protocol SignedDocument: Sendable {
    /// `curfew-record-v1\n`, `curfew-confirmation-v1\n`, ...
    static var signingDomain: String { get }
    /// Every field but the signature, as a JSON object.
    var signedPayload: JSONValue { get }
}

extension SignedDocument {
    /// The bytes a signature is made over: the domain prefix, then the canonical payload.
    public var signingBytes: [UInt8] { Array(Self.signingDomain.utf8) + signedPayload.canonicalBytes }

    /// The file's bytes for a given signature.
    public func fileBytes(signature: String) -> [UInt8] {
        guard case .object(var object) = signedPayload else { return [] }
        object["signature"] = .string(signature)
        return JSONValue.object(object).canonicalBytes
    }
}
