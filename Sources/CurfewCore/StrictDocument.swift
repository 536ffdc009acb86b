/// The checks every signed document of the shared directory but records passes first, in this order
/// (so a newer format is "not supported" rather than "unknown field"): size, JSON, an object, a
/// supported format, known fields only, its kind, canonical form (the bytes signed are the bytes on disk).
enum StrictDocument {
    static func parse(
        _ bytes: [UInt8], noun: String, fieldPrefix: String, maxBytes: Int, version: Int, kind: String, fields: [String]
    ) throws(RecordError) -> JSONObject {
        guard bytes.count <= maxBytes else { throw RecordError("\(noun) is larger than \(maxBytes) bytes") }
        let value: JSONValue
        do { value = try JSONValue.parse(bytes) } catch { throw RecordError.notJSON(error) }
        guard case .object(let object) = value else { throw RecordError("a \(noun) must be a JSON object") }
        guard case .int(let format)? = object["format"] else { throw RecordError("\(fieldPrefix) field \"format\" is missing") }
        guard format == version else {
            throw RecordError("\(noun) format \(format) is not supported (this version reads format \(version))")
        }
        for key in object.keys where !fields.contains(key) {
            throw RecordError("unknown \(fieldPrefix) field \(quoted(key))")
        }
        guard case .string(let found)? = object["kind"], found == kind else {
            throw RecordError("\(fieldPrefix) field \"kind\" must be \"\(kind)\"")
        }
        guard value.canonicalBytes == bytes else { throw RecordError("\(noun) is not in canonical form") }
        return object
    }
}
