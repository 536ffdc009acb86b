/// A JSON document as Curfew reads and writes it.
///
/// Curfew parses JSON itself instead of through `JSONDecoder` because it must be strict where
/// Foundation is lenient: duplicate keys, invalid UTF-8, unbounded nesting and numbers that do not
/// fit an `Int64` are errors, objects keep their key order for error messages, and records are
/// signed over a canonical serialisation that must be reproducible byte for byte.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int: "a number"
        case .string: "a string"
        case .array: "a list"
        case .object: "an object"
        }
    }
}

/// A JSON object that keeps its keys in document order and has no duplicate keys.
public struct JSONObject: Sendable, Equatable {
    public private(set) var entries: [(key: String, value: JSONValue)]

    public init() { entries = [] }

    public init(_ entries: [(String, JSONValue)]) {
        self.entries = []
        for (key, value) in entries { self[key] = value }
    }

    public var keys: [String] { entries.map(\.key) }

    public subscript(key: String) -> JSONValue? {
        get { entries.first(where: { $0.key == key })?.value }
        set {
            if let index = entries.firstIndex(where: { $0.key == key }) {
                if let newValue { entries[index].value = newValue } else { entries.remove(at: index) }
            } else if let newValue {
                entries.append((key, newValue))
            }
        }
    }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.entries.count == rhs.entries.count
            && zip(lhs.entries, rhs.entries).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}

/// Why a byte sequence is not acceptable JSON; `offset` is the byte where the problem was seen.
public struct JSONSyntaxError: Error, Equatable, Sendable, CustomStringConvertible {
    public var reason: String
    public var offset: Int
    public var description: String { "\(reason) at byte \(offset)" }
}

public enum JSONLimits {
    /// Deeper documents are refused before they can exhaust the stack.
    public static let maxDepth = 32
}

// MARK: - Parsing

extension JSONValue {
    /// Parses one JSON document (RFC 8259) strictly; see the type's documentation for what is refused.
    public static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes) throws(JSONSyntaxError) -> JSONValue {
        var parser = JSONParser(bytes: Array(bytes))
        return try parser.parseDocument()
    }

    public static func parse(_ text: String) throws(JSONSyntaxError) -> JSONValue {
        try parse(Array(text.utf8))
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    var position = 0
    var depth = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    func fail(_ reason: String) -> JSONSyntaxError { JSONSyntaxError(reason: reason, offset: position) }

    mutating func parseDocument() throws(JSONSyntaxError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard position == bytes.count else { throw fail("unexpected data after the JSON document") }
        return value
    }

    mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONSyntaxError) -> JSONValue {
        guard position < bytes.count else { throw fail("unexpected end of JSON") }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONSyntaxError) {
        let count = literal.utf8CodeUnitCount
        guard position + count <= bytes.count else { throw fail("unexpected end of JSON") }
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: count)
        for index in 0..<count where bytes[position + index] != expected[index] {
            throw fail("unexpected character")
        }
        position += count
    }

    mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        if depth > JSONLimits.maxDepth { throw fail("JSON nested deeper than \(JSONLimits.maxDepth) levels") }
    }

    mutating func parseObject() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        position += 1
        var object = JSONObject()
        var seen = Set<String>()
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            position += 1
            depth -= 1
            return .object(object)
        }
        while true {
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
                throw fail("expected a quoted key")
            }
            let keyStart = position
            let key = try parseString()
            guard seen.insert(key).inserted else {
                throw JSONSyntaxError(reason: "duplicate key \"\(key)\"", offset: keyStart)
            }
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            position += 1
            skipWhitespace()
            object[key] = try parseValue()
            skipWhitespace()
            guard position < bytes.count else { throw fail("unexpected end of JSON") }
            if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
            if bytes[position] == UInt8(ascii: "}") { position += 1; break }
            throw fail("expected ',' or '}'")
        }
        depth -= 1
        return .object(object)
    }

    mutating func parseArray() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        position += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            position += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard position < bytes.count else { throw fail("unexpected end of JSON") }
            if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
            if bytes[position] == UInt8(ascii: "]") { position += 1; break }
            throw fail("expected ',' or ']'")
        }
        depth -= 1
        return .array(elements)
    }

    mutating func parseNumber() throws(JSONSyntaxError) -> JSONValue {
        let start = position
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard position < bytes.count, isDigit(bytes[position]) else { throw fail("invalid number") }
        if bytes[position] == UInt8(ascii: "0"), position + 1 < bytes.count, isDigit(bytes[position + 1]) {
            throw fail("numbers may not have leading zeros")
        }
        while position < bytes.count, isDigit(bytes[position]) { position += 1 }
        if position < bytes.count,
            bytes[position] == UInt8(ascii: ".") || bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E")
        {
            throw JSONSyntaxError(reason: "only whole numbers are allowed", offset: start)
        }
        let text = String(decoding: bytes[start..<position], as: UTF8.self)
        guard let value = Int64(text) else {
            throw JSONSyntaxError(reason: "number \(text.prefix(24)) is too large", offset: start)
        }
        return .int(value)
    }

    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    mutating func parseString() throws(JSONSyntaxError) -> String {
        position += 1  // opening quote
        let start = position
        // Most strings have no escapes: validate them in one go. At the first backslash the loop
        // below takes over from the same place, with the same checks in the same order.
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                guard let text = String(validating: bytes[start..<position], as: UTF8.self) else {
                    throw JSONSyntaxError(reason: "invalid UTF-8 in string", offset: start)
                }
                position += 1
                return text
            }
            if byte < 0x20 { throw fail("control character in string") }
            if byte == UInt8(ascii: "\\") { break }
            position += 1
        }
        var scalars = String.UnicodeScalarView()
        var runStart = start
        func flushRun(_ parser: JSONParser, upTo end: Int, into scalars: inout String.UnicodeScalarView)
            throws(JSONSyntaxError)
        {
            guard runStart < end else { return }
            guard let text = String(validating: parser.bytes[runStart..<end], as: UTF8.self) else {
                throw JSONSyntaxError(reason: "invalid UTF-8 in string", offset: runStart)
            }
            scalars.append(contentsOf: text.unicodeScalars)
        }
        while true {
            guard position < bytes.count else { throw fail("unterminated string") }
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                try flushRun(self, upTo: position, into: &scalars)
                position += 1
                return String(scalars)
            }
            if byte < 0x20 { throw fail("control character in string") }
            if byte == UInt8(ascii: "\\") {
                try flushRun(self, upTo: position, into: &scalars)
                position += 1
                scalars.append(try parseEscape())
                runStart = position
                continue
            }
            position += 1
        }
    }

    mutating func parseEscape() throws(JSONSyntaxError) -> Unicode.Scalar {
        guard position < bytes.count else { throw fail("unterminated string") }
        let byte = bytes[position]
        position += 1
        switch byte {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let first = try parseHex4()
            if (0xD800...0xDBFF).contains(first) {
                guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"),
                    bytes[position + 1] == UInt8(ascii: "u")
                else { throw fail("unpaired surrogate in string") }
                position += 2
                let second = try parseHex4()
                guard (0xDC00...0xDFFF).contains(second) else { throw fail("unpaired surrogate in string") }
                let value = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                guard let scalar = Unicode.Scalar(value) else { throw fail("invalid escape") }
                return scalar
            }
            guard let scalar = Unicode.Scalar(first) else { throw fail("unpaired surrogate in string") }
            return scalar
        default:
            throw fail("invalid escape")
        }
    }

    mutating func parseHex4() throws(JSONSyntaxError) -> UInt32 {
        guard position + 4 <= bytes.count else { throw fail("invalid \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw fail("invalid \\u escape")
            }
            value = value * 16 + digit
            position += 1
        }
        return value
    }
}

// MARK: - Writing

extension JSONValue {
    /// The canonical form: no whitespace, object keys sorted by their UTF-8 bytes, minimal escapes.
    /// Records are signed over, and named after, these bytes.
    public var canonicalBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        write(into: &out, pretty: false, sorted: true, indent: 0)
        return out
    }

    public var canonicalString: String { String(decoding: canonicalBytes, as: UTF8.self) }

    /// Two-space indented, keys in document order, for people: DEL, C1 controls and layout controls
    /// (`UntrustedText.isLayoutControl`: a right-to-left override, a zero-width space) are written as
    /// `\u` escapes, so the text read back is exact and what a terminal shows is neither reordered nor
    /// hidden.
    public var prettyString: String {
        var out: [UInt8] = []
        write(into: &out, pretty: true, sorted: false, indent: 0)
        return String(decoding: out, as: UTF8.self)
    }

    private func write(into out: inout [UInt8], pretty: Bool, sorted: Bool, indent: Int) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value): out.append(contentsOf: String(value).utf8)
        case .string(let value): Self.writeString(value, into: &out, forPeople: pretty)
        case .array(let elements):
            // Short lists of scalars stay on one line in pretty output ([15, 5, 1]).
            let inline = !pretty || elements.allSatisfy { !$0.isContainer }
            out.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")); if pretty && inline { out.append(0x20) } }
                if pretty && !inline { Self.newline(&out, indent + 1) }
                element.write(into: &out, pretty: pretty, sorted: sorted, indent: indent + 1)
            }
            if pretty && !inline && !elements.isEmpty { Self.newline(&out, indent) }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            var entries = object.entries
            if sorted { entries.sort { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) } }
            out.append(UInt8(ascii: "{"))
            for (index, entry) in entries.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { Self.newline(&out, indent + 1) }
                Self.writeString(entry.key, into: &out, forPeople: pretty)
                out.append(UInt8(ascii: ":"))
                if pretty { out.append(0x20) }
                entry.value.write(into: &out, pretty: pretty, sorted: sorted, indent: indent + 1)
            }
            if pretty && !entries.isEmpty { Self.newline(&out, indent) }
            out.append(UInt8(ascii: "}"))
        }
    }

    private var isContainer: Bool {
        switch self {
        case .array, .object: true
        default: false
        }
    }

    private static func newline(_ out: inout [UInt8], _ indent: Int) {
        out.append(0x0A)
        out.append(contentsOf: repeatElement(0x20, count: indent * 2))
    }

    private static func writeString(_ value: String, into out: inout [UInt8], forPeople: Bool) {
        out.append(UInt8(ascii: "\""))
        // Most strings need no escape: copy their bytes at once.
        if !value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || (forPeople && $0 >= 0x7F) }) {
            out.append(contentsOf: value.utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        if forPeople && value.unicodeScalars.contains(where: { $0.value >= 0x7F && (UntrustedText.isControl($0) || UntrustedText.isLayoutControl($0)) }) {
            for scalar in value.unicodeScalars {
                guard scalar.value >= 0x7F && (UntrustedText.isControl(scalar) || UntrustedText.isLayoutControl(scalar)) else {
                    writeEscaped(String(scalar), into: &out)
                    continue
                }
                // UTF-16 code units: a scalar past U+FFFF (a tag character) as its surrogate pair.
                for unit in String(scalar).utf16 {
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u")])
                    for shift in stride(from: 12, through: 0, by: -4) { out.append(hexDigits[Int((unit >> UInt16(shift)) & 0xF)]) }
                }
            }
            out.append(UInt8(ascii: "\""))
            return
        }
        writeEscaped(value, into: &out)
        out.append(UInt8(ascii: "\""))
    }

    /// The bytes of `value` with the escapes JSON requires (quote, backslash, C0).
    private static func writeEscaped(_ value: String, into out: inout [UInt8]) {
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(0x5C); out.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): out.append(0x5C); out.append(0x5C)
            case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
            case 0x08: out.append(0x5C); out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(0x5C); out.append(UInt8(ascii: "f"))
            case 0..<0x20:
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
