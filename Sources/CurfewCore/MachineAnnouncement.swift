public enum MachineID {
    /// 1 to 64 of `A-Z a-z 0-9 - _`: safe as a file name in the shared directory. `/etc/machine-id`
    /// (32 hex digits) is one; tests choose short readable ones.
    public static func isValid(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy {
                (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x2d
                    || $0 == 0x5f
            }
    }
}

/// A computer's public key and name as it publishes them: `<shared-dir>/machines/<machine-id>.json`,
/// canonical JSON `{"format":1,"host":...,"key":<base64 Ed25519 public key>,"keyId":...,"kind":"machine","machine":...}`.
public struct MachineAnnouncement: Sendable, Equatable {
    public var machine: String
    public var host: String
    /// Base64 of the raw Ed25519 public key.
    public var publicKey: String
    public var keyId: String

    public init(machine: String, host: String, publicKey: String, keyId: String) {
        self.machine = machine
        self.host = host
        self.publicKey = publicKey
        self.keyId = keyId
    }

    public static let kind = "machine"
    static let fields = ["format", "kind", "machine", "host", "key", "keyId"]

    public var json: JSONValue {
        .object(
            JSONObject([
                ("format", .int(1)), ("kind", .string(MachineAnnouncement.kind)), ("machine", .string(machine)),
                ("host", .string(host)), ("key", .string(publicKey)), ("keyId", .string(keyId)),
            ]))
    }

    public var bytes: [UInt8] { json.canonicalBytes }

    /// Strict like records: canonical, known fields, format 1.
    public static func parse(_ bytes: [UInt8]) throws(RecordError) -> MachineAnnouncement {
        guard bytes.count <= 4096 else { throw RecordError("machine file is larger than 4096 bytes") }
        let value: JSONValue
        do { value = try JSONValue.parse(bytes) } catch { throw RecordError.notJSON(error) }
        guard case .object(let object) = value, case .int(1)? = object["format"],
            case .string(MachineAnnouncement.kind)? = object["kind"]
        else { throw RecordError("not a machine file of format 1") }
        for key in object.keys where !fields.contains(key) { throw RecordError("unknown machine field \(quoted(key))") }
        guard value.canonicalBytes == bytes else { throw RecordError("machine file is not in canonical form") }
        guard case .string(let machine)? = object["machine"], MachineID.isValid(machine),
            case .string(let host)? = object["host"], !host.isEmpty, host.utf8.count <= 255,
            case .string(let key)? = object["key"], case .string(let keyId)? = object["keyId"], KeyID.isValid(keyId)
        else { throw RecordError("machine file fields are malformed") }
        return MachineAnnouncement(machine: machine, host: host, publicKey: key, keyId: keyId)
    }
}
