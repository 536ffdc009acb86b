/// Codable over `JSONValue`, without Foundation: the agent encodes its socket replies into a
/// `JSONValue` and sends its canonical form (the same bytes as before, whatever the encoder), and the
/// indicator decodes them with Core's own strict parser (Foundation's JSONDecoder would keep megabytes
/// resident in every session). Only `JSONValue`'s kinds exist: no floating point numbers.
///
/// A nil optional is left out by synthesized `encode(to:)` (`encodeIfPresent`); a type that must
/// send `null` (a field that readers expect present) calls `encodeNil(forKey:)` itself.
public struct JSONValueEncoder: Sendable {
    public init() {}

    public func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        let node = EncodingNode()
        try value.encode(to: ValueEncoder(node: node, codingPath: []))
        return node.value
    }
}

/// Reads a `Decodable` from a `JSONValue` (parse the text first with `JSONValue.parse`, which bounds
/// the nesting and refuses duplicate keys). Numbers must fit the field's integer type exactly.
public struct JSONValueDecoder: Sendable {
    public init() {}

    public func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try T(from: ValueDecoder(value: value, codingPath: []))
    }

    /// Parses `text` as one JSON document and decodes it.
    public func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
        try decode(type, from: try JSONValue.parse(text))
    }
}

/// A coding key for dictionaries and other computed keys.
public struct JSONKey: CodingKey, Sendable {
    public var stringValue: String
    public var intValue: Int?
    public init(stringValue: String) { self.stringValue = stringValue }
    public init(intValue: Int) {
        stringValue = "\(intValue)"
        self.intValue = intValue
    }
    public init(_ string: String) { stringValue = string }
}

// MARK: - Encoding

private final class EncodingNode {
    enum Content {
        case value(JSONValue)
        case object([(String, EncodingNode)])
        case array([EncodingNode])
    }

    var content: Content = .value(.null)

    var value: JSONValue {
        switch content {
        case .value(let value): value
        case .object(let entries):
            .object(JSONObject(entries.map { ($0.0, $0.1.value) }))
        case .array(let elements): .array(elements.map(\.value))
        }
    }

    func child(forKey key: String) -> EncodingNode {
        let child = EncodingNode()
        guard case .object(var entries) = content else {
            content = .object([(key, child)])
            return child
        }
        content = .value(.null)  // no copy on write while appending
        if let index = entries.firstIndex(where: { $0.0 == key }) { entries[index].1 = child } else { entries.append((key, child)) }
        content = .object(entries)
        return child
    }

    func appendChild() -> EncodingNode {
        let child = EncodingNode()
        guard case .array(var elements) = content else {
            content = .array([child])
            return child
        }
        content = .value(.null)
        elements.append(child)
        content = .array(elements)
        return child
    }
}

private struct ValueEncoder: Encoder {
    let node: EncodingNode
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if case .object = node.content {} else { node.content = .object([]) }
        return KeyedEncodingContainer(KeyedEncoder<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .array = node.content {} else { node.content = .array([]) }
        return UnkeyedEncoder(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleEncoder(node: node, codingPath: codingPath) }
}

private func scalar<T: BinaryInteger>(_ value: T, _ path: [any CodingKey]) throws -> JSONValue {
    guard let exact = Int64(exactly: value) else {
        throw EncodingError.invalidValue(value, EncodingError.Context(codingPath: path, debugDescription: "does not fit an Int64"))
    }
    return .int(exact)
}

private func noFloats(_ value: Any, _ path: [any CodingKey]) -> EncodingError {
    EncodingError.invalidValue(value, EncodingError.Context(codingPath: path, debugDescription: "JSONValue has no floating point numbers"))
}

private struct SingleEncoder: SingleValueEncodingContainer {
    let node: EncodingNode
    var codingPath: [any CodingKey]

    mutating func encodeNil() throws { node.content = .value(.null) }
    mutating func encode(_ value: Bool) throws { node.content = .value(.bool(value)) }
    mutating func encode(_ value: String) throws { node.content = .value(.string(value)) }
    mutating func encode(_ value: Double) throws { throw noFloats(value, codingPath) }
    mutating func encode(_ value: Float) throws { throw noFloats(value, codingPath) }
    mutating func encode(_ value: Int) throws { node.content = .value(try scalar(value, codingPath)) }
    mutating func encode(_ value: Int8) throws { node.content = .value(try scalar(value, codingPath)) }
    mutating func encode(_ value: Int16) throws { node.content = .value(try scalar(value, codingPath)) }
    mutating func encode(_ value: Int32) throws { node.content = .value(try scalar(value, codingPath)) }
    mutating func encode(_ value: Int64) throws { node.content = .value(.int(value)) }
    mutating func encode(_ value: UInt) throws { node.content = .value(try scalar(value, codingPath)) }
    mutating func encode(_ value: UInt8) throws { node.content = .value(try scalar(value, codingPath)) }
    mutating func encode(_ value: UInt16) throws { node.content = .value(try scalar(value, codingPath)) }
    mutating func encode(_ value: UInt32) throws { node.content = .value(try scalar(value, codingPath)) }
    mutating func encode(_ value: UInt64) throws { node.content = .value(try scalar(value, codingPath)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        if let json = value as? JSONValue {
            node.content = .value(json)
        } else {
            try value.encode(to: ValueEncoder(node: node, codingPath: codingPath))
        }
    }
}

private struct KeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: EncodingNode
    var codingPath: [any CodingKey]

    private func single(_ key: Key) -> SingleEncoder {
        SingleEncoder(node: node.child(forKey: key.stringValue), codingPath: codingPath + [key])
    }

    mutating func encodeNil(forKey key: Key) throws {
        var container = single(key)
        try container.encodeNil()
    }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try encode(value, key) }
    mutating func encode(_ value: String, forKey key: Key) throws { try encode(value, key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { throw noFloats(value, codingPath + [key]) }
    mutating func encode(_ value: Float, forKey key: Key) throws { throw noFloats(value, codingPath + [key]) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try encode(value, key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try encode(value, key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try encode(value, key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try encode(value, key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try encode(value, key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try encode(value, key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try encode(value, key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try encode(value, key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try encode(value, key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try encode(value, key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try encode(value, key) }

    private func encode<T: Encodable>(_ value: T, _ key: Key) throws {
        var container = single(key)
        try container.encode(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        ValueEncoder(node: node.child(forKey: key.stringValue), codingPath: codingPath + [key]).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        ValueEncoder(node: node.child(forKey: key.stringValue), codingPath: codingPath + [key]).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        ValueEncoder(node: node.child(forKey: "super"), codingPath: codingPath + [JSONKey("super")])
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        ValueEncoder(node: node.child(forKey: key.stringValue), codingPath: codingPath + [key])
    }
}

private struct UnkeyedEncoder: UnkeyedEncodingContainer {
    let node: EncodingNode
    var codingPath: [any CodingKey]
    var count: Int {
        if case .array(let elements) = node.content { elements.count } else { 0 }
    }

    private func next() -> ValueEncoder {
        let key = JSONKey(intValue: count)
        return ValueEncoder(node: node.appendChild(), codingPath: codingPath + [key])
    }

    mutating func encodeNil() throws { _ = node.appendChild() }
    mutating func encode(_ value: Bool) throws { try encodeValue(value) }
    mutating func encode(_ value: String) throws { try encodeValue(value) }
    mutating func encode(_ value: Double) throws { throw noFloats(value, codingPath) }
    mutating func encode(_ value: Float) throws { throw noFloats(value, codingPath) }
    mutating func encode(_ value: Int) throws { try encodeValue(value) }
    mutating func encode(_ value: Int8) throws { try encodeValue(value) }
    mutating func encode(_ value: Int16) throws { try encodeValue(value) }
    mutating func encode(_ value: Int32) throws { try encodeValue(value) }
    mutating func encode(_ value: Int64) throws { try encodeValue(value) }
    mutating func encode(_ value: UInt) throws { try encodeValue(value) }
    mutating func encode(_ value: UInt8) throws { try encodeValue(value) }
    mutating func encode(_ value: UInt16) throws { try encodeValue(value) }
    mutating func encode(_ value: UInt32) throws { try encodeValue(value) }
    mutating func encode(_ value: UInt64) throws { try encodeValue(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { try encodeValue(value) }

    private func encodeValue<T: Encodable>(_ value: T) throws {
        let encoder = next()
        var container = SingleEncoder(node: encoder.node, codingPath: encoder.codingPath)
        try container.encode(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        next().container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { next().unkeyedContainer() }

    mutating func superEncoder() -> any Encoder { next() }
}

// MARK: - Decoding

private struct ValueDecoder: Decoder {
    let value: JSONValue
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = value else { throw mismatch(JSONObject.self, value, codingPath) }
        return KeyedDecodingContainer(KeyedDecoder<Key>(object: object, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw mismatch([JSONValue].self, value, codingPath) }
        return UnkeyedDecoder(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleDecoder(value: value, codingPath: codingPath) }
}

private func mismatch(_ type: Any.Type, _ value: JSONValue, _ path: [any CodingKey]) -> DecodingError {
    DecodingError.typeMismatch(type, DecodingError.Context(codingPath: path, debugDescription: "found \(value.typeName)"))
}

private func integer<T: FixedWidthInteger>(_ type: T.Type, _ value: JSONValue, _ path: [any CodingKey]) throws -> T {
    guard case .int(let number) = value else { throw mismatch(type, value, path) }
    guard let exact = T(exactly: number) else {
        throw DecodingError.dataCorrupted(DecodingError.Context(codingPath: path, debugDescription: "\(number) does not fit \(type)"))
    }
    return exact
}

private struct SingleDecoder: SingleValueDecodingContainer {
    let value: JSONValue
    var codingPath: [any CodingKey]

    func decodeNil() -> Bool { value == .null }
    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let flag) = value else { throw mismatch(type, value, codingPath) }
        return flag
    }
    func decode(_ type: String.Type) throws -> String {
        guard case .string(let text) = value else { throw mismatch(type, value, codingPath) }
        return text
    }
    func decode(_ type: Double.Type) throws -> Double { Double(try integer(Int64.self, value, codingPath)) }
    func decode(_ type: Float.Type) throws -> Float { Float(try integer(Int64.self, value, codingPath)) }
    func decode(_ type: Int.Type) throws -> Int { try integer(type, value, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type, value, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type, value, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type, value, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type, value, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type, value, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type, value, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type, value, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type, value, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type, value, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == JSONValue.self, let json = value as? T { return json }
        return try T(from: ValueDecoder(value: value, codingPath: codingPath))
    }
}

private struct KeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: JSONObject
    var codingPath: [any CodingKey]

    var allKeys: [Key] { object.keys.compactMap { Key(stringValue: $0) } }
    func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

    private func single(_ key: Key) throws -> SingleDecoder {
        guard let value = object[key.stringValue] else {
            throw DecodingError.keyNotFound(key, DecodingError.Context(codingPath: codingPath, debugDescription: "no \(key.stringValue)"))
        }
        return SingleDecoder(value: value, codingPath: codingPath + [key])
    }

    func decodeNil(forKey key: Key) throws -> Bool { try single(key).decodeNil() }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try single(key).decode(type) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try single(key).decode(type) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try single(key).decode(type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try single(key).decode(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try single(key).decode(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try single(key).decode(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try single(key).decode(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try single(key).decode(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try single(key).decode(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try single(key).decode(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try single(key).decode(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try single(key).decode(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try single(key).decode(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try single(key).decode(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try single(key).decode(type) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        let inner = try single(key)
        return try ValueDecoder(value: inner.value, codingPath: inner.codingPath).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let inner = try single(key)
        return try ValueDecoder(value: inner.value, codingPath: inner.codingPath).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        ValueDecoder(value: object["super"] ?? .null, codingPath: codingPath + [JSONKey("super")])
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        ValueDecoder(value: object[key.stringValue] ?? .null, codingPath: codingPath + [key])
    }
}

private struct UnkeyedDecoder: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    var codingPath: [any CodingKey]
    var currentIndex = 0
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    init(elements: [JSONValue], codingPath: [any CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    private mutating func next() throws -> SingleDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                JSONValue.self, DecodingError.Context(codingPath: codingPath, debugDescription: "the list has no more elements"))
        }
        defer { currentIndex += 1 }
        return SingleDecoder(value: elements[currentIndex], codingPath: codingPath + [JSONKey(intValue: currentIndex)])
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, elements[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }
    mutating func decode(_ type: Bool.Type) throws -> Bool { try next().decode(type) }
    mutating func decode(_ type: String.Type) throws -> String { try next().decode(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next().decode(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next().decode(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next().decode(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next().decode(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next().decode(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next().decode(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next().decode(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next().decode(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next().decode(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next().decode(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next().decode(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next().decode(type) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().decode(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let inner = try next()
        return try ValueDecoder(value: inner.value, codingPath: inner.codingPath).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let inner = try next()
        return try ValueDecoder(value: inner.value, codingPath: inner.codingPath).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
        let inner = try next()
        return ValueDecoder(value: inner.value, codingPath: inner.codingPath)
    }
}

// MARK: - JSONValue as a field of a Codable type

/// A `JSONValue` inside a Codable type (a policy in a reply, an event's data) is copied as it is by
/// `JSONValueEncoder` and `JSONValueDecoder`; other coders see its structure.
extension JSONValue: Codable {
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let flag):
            var container = encoder.singleValueContainer()
            try container.encode(flag)
        case .int(let number):
            var container = encoder.singleValueContainer()
            try container.encode(number)
        case .string(let text):
            var container = encoder.singleValueContainer()
            try container.encode(text)
        case .array(let elements):
            var container = encoder.unkeyedContainer()
            for element in elements { try container.encode(element) }
        case .object(let object):
            var container = encoder.container(keyedBy: JSONKey.self)
            for (key, value) in object.entries { try container.encode(value, forKey: JSONKey(key)) }
        }
    }

    public init(from decoder: any Decoder) throws {
        if let object = try? decoder.container(keyedBy: JSONKey.self) {
            var result = JSONObject()
            for key in object.allKeys { result[key.stringValue] = try object.decode(JSONValue.self, forKey: key) }
            self = .object(result)
        } else if var array = try? decoder.unkeyedContainer() {
            var elements: [JSONValue] = []
            while !array.isAtEnd { elements.append(try array.decode(JSONValue.self)) }
            self = .array(elements)
        } else {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() {
                self = .null
            } else if let flag = try? single.decode(Bool.self) {
                self = .bool(flag)
            } else if let number = try? single.decode(Int64.self) {
                self = .int(number)
            } else {
                self = .string(try single.decode(String.self))
            }
        }
    }
}

extension JSONValueEncoder {
    /// `value` as a `JSONValue`, for types made of strings, booleans, integers and `JSONValue`s, whose
    /// encoding cannot fail (only floating point numbers and integers past `Int64` are refused).
    public func value<T: Encodable>(of value: T) -> JSONValue {
        do { return try encode(value) } catch { preconditionFailure("\(T.self) cannot be encoded as JSON: \(error)") }
    }
}

/// An optional field that readers expect present: `null` when nil, where a synthesized `encode(to:)`
/// would leave it out (`@OrNull var reason: String?`).
@propertyWrapper
public struct OrNull<Value: Encodable & Sendable>: Encodable, Sendable {
    public var wrappedValue: Value?

    public init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue { try container.encode(wrappedValue) } else { try container.encodeNil() }
    }
}

extension OrNull: Equatable where Value: Equatable {}

/// A JSON object whose keys are data (user names, window names, categories), in a set order: the
/// order given, or the keys sorted (a `Dictionary` would follow its hash order).
public struct NamedValues<Value: Encodable & Sendable>: Encodable, Sendable {
    public var entries: [(name: String, value: Value)]

    public init(_ entries: [(name: String, value: Value)]) { self.entries = entries }

    /// The keys sorted, so the same values always print the same.
    public init(sorting entries: [String: Value]) { self.entries = entries.sorted { $0.key < $1.key }.map { ($0.key, $0.value) } }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: JSONKey.self)
        for (name, value) in entries { try container.encode(value, forKey: JSONKey(name)) }
    }
}
