import Testing

@testable import CurfewCore

/// The syntax error a byte sequence raises, or nil when it parses.
func jsonSyntaxError(_ bytes: [UInt8]) -> JSONSyntaxError? {
    do {
        _ = try JSONValue.parse(bytes)
        return nil
    } catch {
        return error
    }
}

func jsonSyntaxError(_ text: String) -> JSONSyntaxError? { jsonSyntaxError(Array(text.utf8)) }

/// `depth` arrays inside each other around a 0.
func nestedArrays(_ depth: Int) -> String {
    String(repeating: "[", count: depth) + "0" + String(repeating: "]", count: depth)
}

@Suite("Strict JSON")
struct JSONTests {
    @Test("values of every kind")
    func kinds() throws {
        #expect(try JSONValue.parse("null") == .null)
        #expect(try JSONValue.parse("true") == .bool(true))
        #expect(try JSONValue.parse("false") == .bool(false))
        #expect(try JSONValue.parse("0") == .int(0))
        #expect(try JSONValue.parse("-0") == .int(0))
        #expect(try JSONValue.parse("42") == .int(42))
        #expect(try JSONValue.parse("-17") == .int(-17))
        #expect(try JSONValue.parse("9223372036854775807") == .int(Int64.max))
        #expect(try JSONValue.parse("-9223372036854775808") == .int(Int64.min))
        #expect(try JSONValue.parse(#""kid""#) == .string("kid"))
        #expect(try JSONValue.parse("[]") == .array([]))
        #expect(try JSONValue.parse("{}") == .object(JSONObject()))
        #expect(
            try JSONValue.parse(#"[1, "a", null, [true], {"k": false}]"#)
                == .array([.int(1), .string("a"), .null, .array([.bool(true)]), .object(JSONObject([("k", .bool(false))]))]))
    }

    @Test("whitespace around and between tokens")
    func whitespace() throws {
        let value = try JSONValue.parse(" \t\r\n{ \"a\" :\n[ 1 ,\t2 ] , \"b\"\r\n: { } } \n")
        #expect(value == .object(JSONObject([("a", .array([.int(1), .int(2)])), ("b", .object(JSONObject()))])))
    }

    @Test("objects keep document order, and order matters for equality but not for canonical bytes")
    func order() throws {
        let ba = try JSONValue.parse(#"{"b": 1, "a": 2}"#)
        let ab = try JSONValue.parse(#"{"a": 2, "b": 1}"#)
        guard case .object(let object) = ba else {
            Issue.record("not an object")
            return
        }
        #expect(object.keys == ["b", "a"])
        #expect(object["a"] == .int(2))
        #expect(object["c"] == nil)
        #expect(ba != ab)
        #expect(ba.canonicalBytes == ab.canonicalBytes)
        #expect(ba.canonicalString == #"{"a":2,"b":1}"#)
    }

    @Test("JSONObject subscript replaces in place, appends new keys and removes with nil")
    func objectEditing() {
        var object = JSONObject([("x", .int(1)), ("y", .int(2)), ("x", .int(3))])
        #expect(object.keys == ["x", "y"])
        #expect(object["x"] == .int(3))
        object["z"] = .null
        object["x"] = .bool(true)
        #expect(object.keys == ["x", "y", "z"])
        object["y"] = nil
        #expect(object.keys == ["x", "z"])
        #expect(JSONValue.object(object).canonicalString == #"{"x":true,"z":null}"#)
    }

    @Test(
        "canonical text reads back to itself",
        arguments: [
            "null", "true", "false", "0", "-1", "9223372036854775807", "-9223372036854775808", #""""#, #""kid""#,
            "[]", "{}", "[[],{}]", "[1,2,3]", #"{"a":{"b":[1,2,{"c":null}]},"d":"e"}"#,
            #""\u0000\u001f\b\f\n\r\t""#, #""\"\\""#, #""/""#, #""é😀ü漢""#, "\"\u{7F}\u{2028}\"",
            #"{"":0,"B":0,"a":0,"a b":0,"aa":0,"b":0,"é":0,"｡":0,"😀":0}"#,
        ])
    func canonicalRoundTrip(text: String) throws {
        let value = try JSONValue.parse(text)
        #expect(value.canonicalString == text)
        #expect(value.canonicalBytes == Array(text.utf8))
        #expect(try JSONValue.parse(value.canonicalBytes) == value)
        #expect(try JSONValue.parse(value.prettyString) == value)
    }

    @Test(
        "non-canonical text gets its canonical form",
        arguments: [
            (#"{ "b" : 1 , "a" : 2 }"#, #"{"a":2,"b":1}"#),
            (#"{"b":{"d":1,"c":2},"a":[{"z":0,"y":1}]}"#, #"{"a":[{"y":1,"z":0}],"b":{"c":2,"d":1}}"#),
            (#""\/""#, #""/""#),
            (#""\u0041""#, #""A""#),
            (#""\u00e9\u00E9""#, #""éé""#),
            (#""\ud83d\ude00""#, #""😀""#),
            (#""\u007f""#, "\"\u{7F}\""),
            (#""\u000b""#, #""\u000b""#),
            (#""\u0008\u000C""#, #""\b\f""#),
            ("-0", "0"),
            (" [ 1 ,\n 2 ] ", "[1,2]"),
            // UTF-8 byte order, not UTF-16 order: U+FF61 (EF BD A1) sorts before U+1F600 (F0 9F 98 80).
            (#"{"😀":1,"｡":2}"#, #"{"｡":2,"😀":1}"#),
            (#"{"a":1,"B":2,"_":3,"1":4}"#, #"{"1":4,"B":2,"_":3,"a":1}"#),
        ])
    func canonicalForm(input: String, canonical: String) throws {
        #expect(try JSONValue.parse(input).canonicalString == canonical)
    }

    @Test("escapes decode to the characters they name")
    func escapes() throws {
        let value = try JSONValue.parse(#""\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00\u0000\u001F""#)
        #expect(value == .string("\"\\/\u{08}\u{0C}\n\r\tAé😀\u{00}\u{1F}"))
        #expect(value.canonicalString == #""\"\\/\b\f\n\r\tAé😀\u0000\u001f""#)
    }

    @Test("every control character is escaped in canonical output")
    func controlCharacters() throws {
        for code in 0..<0x20 {
            let text = String(Unicode.Scalar(UInt8(code)))
            let written = JSONValue.string(text).canonicalString
            let expected: String
            switch code {
            case 0x08: expected = #""\b""#
            case 0x09: expected = #""\t""#
            case 0x0A: expected = #""\n""#
            case 0x0C: expected = #""\f""#
            case 0x0D: expected = #""\r""#
            default:
                let hex = Array("0123456789abcdef")
                expected = "\"\\u00\(hex[code / 16])\(hex[code % 16])\""
            }
            #expect(written == expected, "U+\(code)")
            #expect(try JSONValue.parse(written) == .string(text))
        }
    }

    @Test(
        "syntax errors: reason and byte offset",
        arguments: [
            // Duplicate keys, also when spelled differently.
            (#"{"a":1,"a":2}"#, #"duplicate key "a""#, 7),
            (#"{"a":1,"\u0061":2}"#, #"duplicate key "a""#, 7),
            (#"{"x":{"a":1,"b":2,"a":3}}"#, #"duplicate key "a""#, 18),
            // Numbers.
            ("01", "numbers may not have leading zeros", 0),
            ("-01", "numbers may not have leading zeros", 1),
            ("[00]", "numbers may not have leading zeros", 1),
            ("1.5", "only whole numbers are allowed", 0),
            ("1.0", "only whole numbers are allowed", 0),
            ("-2.5", "only whole numbers are allowed", 0),
            ("1e3", "only whole numbers are allowed", 0),
            ("[7E2]", "only whole numbers are allowed", 1),
            ("1.", "only whole numbers are allowed", 0),
            ("9223372036854775808", "number 9223372036854775808 is too large", 0),
            ("-9223372036854775809", "number -9223372036854775809 is too large", 0),
            ("[123456789012345678901234567890]", "number 123456789012345678901234 is too large", 1),
            ("-", "invalid number", 1),
            ("-a", "invalid number", 1),
            (".5", "unexpected character", 0),
            ("+1", "unexpected character", 0),
            ("NaN", "unexpected character", 0),
            ("Infinity", "unexpected character", 0),
            // Strings.
            (#""\ud800""#, "unpaired surrogate in string", 7),
            (#""\udc00""#, "unpaired surrogate in string", 7),
            (#""\ud800\u0041""#, "unpaired surrogate in string", 13),
            (#""\ud800x""#, "unpaired surrogate in string", 7),
            (#""\udfff\ud800""#, "unpaired surrogate in string", 7),
            (#""\x""#, "invalid escape", 3),
            (#""\u12G4""#, #"invalid \u escape"#, 5),
            (#""\u12""#, #"invalid \u escape"#, 3),
            ("\"a\nb\"", "control character in string", 2),
            ("\"a\tb\"", "control character in string", 2),
            (#""abc"#, "unterminated string", 4),
            (#""abc\"#, "unterminated string", 5),
            ("'a'", "unexpected character", 0),
            // Structure.
            ("", "unexpected end of JSON", 0),
            ("   ", "unexpected end of JSON", 3),
            ("tru", "unexpected end of JSON", 0),
            ("nul", "unexpected end of JSON", 0),
            ("nulL", "unexpected character", 0),
            ("[1,]", "unexpected character", 3),
            ("[1 2]", "expected ',' or ']'", 3),
            ("[1", "unexpected end of JSON", 2),
            (#"{"a"}"#, "expected ':'", 4),
            (#"{"a":1,}"#, "expected a quoted key", 7),
            (#"{a:1}"#, "expected a quoted key", 1),
            (#"{"a":1 "b":2}"#, "expected ',' or '}'", 7),
            (#"{"a":1"#, "unexpected end of JSON", 6),
            ("\u{0C}1", "unexpected character", 0),
            // Trailing data.
            ("{} {}", "unexpected data after the JSON document", 3),
            ("1 2", "unexpected data after the JSON document", 2),
            ("nullx", "unexpected data after the JSON document", 4),
            (#""a"x"#, "unexpected data after the JSON document", 3),
            ("[]]", "unexpected data after the JSON document", 2),
            ("0 ,", "unexpected data after the JSON document", 2),
        ])
    func syntaxErrors(text: String, reason: String, offset: Int) {
        #expect(jsonSyntaxError(text) == JSONSyntaxError(reason: reason, offset: offset))
    }

    @Test("the error description gives the reason and the byte")
    func errorDescription() {
        #expect(jsonSyntaxError("[1,]")?.description == "unexpected character at byte 3")
    }

    @Test(
        "invalid UTF-8 is refused",
        arguments: [
            ([0x22, 0xFF, 0x22], 1),  // a byte that never occurs in UTF-8
            ([0x22, 0x61, 0xC0, 0xAF, 0x22], 1),  // overlong encoding of '/'
            ([0x22, 0xED, 0xA0, 0x80, 0x22], 1),  // a surrogate encoded as UTF-8
            ([0x22, 0xE2, 0x82, 0x22], 1),  // truncated sequence
            ([0x22, 0x80, 0x22], 1),  // lone continuation byte
            ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], 1),  // above U+10FFFF
            ([0x22, 0x5C, 0x6E, 0xFF, 0x22], 3),  // after an escape
        ] as [([UInt8], Int)])
    func invalidUTF8(bytes: [UInt8], offset: Int) {
        #expect(jsonSyntaxError(bytes) == JSONSyntaxError(reason: "invalid UTF-8 in string", offset: offset))
    }

    @Test("invalid UTF-8 outside a string, and a byte order mark, are unexpected characters")
    func invalidOutsideStrings() {
        #expect(jsonSyntaxError([0xFF]) == JSONSyntaxError(reason: "unexpected character", offset: 0))
        #expect(jsonSyntaxError([0xEF, 0xBB, 0xBF, 0x31]) == JSONSyntaxError(reason: "unexpected character", offset: 0))
        #expect(jsonSyntaxError([0x5B, 0x31, 0x2C, 0xC3, 0x5D]) == JSONSyntaxError(reason: "unexpected character", offset: 3))
    }

    @Test("valid multi-byte UTF-8 is kept byte for byte")
    func validUTF8() throws {
        let bytes: [UInt8] = [0x22, 0xC3, 0xA9, 0xE6, 0xBC, 0xA2, 0xF0, 0x9F, 0x98, 0x80, 0x22]
        let value = try JSONValue.parse(bytes)
        #expect(value == .string("é漢😀"))
        #expect(value.canonicalBytes == bytes)
    }

    @Test("nesting up to 32 levels is accepted", arguments: [1, 2, 31, 32])
    func depthAccepted(depth: Int) throws {
        #expect(try JSONValue.parse(nestedArrays(depth)).canonicalString == nestedArrays(depth))
    }

    @Test("nesting beyond 32 levels is refused", arguments: [33, 34, 100, 100_000])
    func depthRefused(depth: Int) {
        #expect(
            jsonSyntaxError(nestedArrays(depth))
                == JSONSyntaxError(reason: "JSON nested deeper than 32 levels", offset: 32))
    }

    @Test("objects and arrays count towards the same depth")
    func mixedDepth() throws {
        let level = #"{"a":["#
        let ok = String(repeating: level, count: 16) + "0" + String(repeating: "]}", count: 16)
        #expect(try JSONValue.parse(ok).canonicalString == ok)
        let deep = String(repeating: level, count: 16) + "{}" + String(repeating: "]}", count: 16)
        #expect(jsonSyntaxError(deep) == JSONSyntaxError(reason: "JSON nested deeper than 32 levels", offset: 16 * 6))
        // Siblings do not add up: depth goes back down when a container closes.
        let wide = "[" + Array(repeating: nestedArrays(31), count: 50).joined(separator: ",") + "]"
        #expect(try JSONValue.parse(wide).canonicalString == wide)
    }

    @Test("pretty output: two spaces, document order, short lists of scalars on one line")
    func pretty() throws {
        let value = try JSONValue.parse(
            #"{"user":"kid","warnMinutes":[15,5,1],"bedtime":{"start":"21:00","end":"07:00"},"apps":[{"app":"steam","rule":"block"}],"weekdayLimits":{},"list":[],"nested":[[1],[2]],"text":"a\"b"}"#
        )
        let expected = """
            {
              "user": "kid",
              "warnMinutes": [15, 5, 1],
              "bedtime": {
                "start": "21:00",
                "end": "07:00"
              },
              "apps": [
                {
                  "app": "steam",
                  "rule": "block"
                }
              ],
              "weekdayLimits": {},
              "list": [],
              "nested": [
                [1],
                [2]
              ],
              "text": "a\\"b"
            }
            """
        #expect(value.prettyString == expected)
        #expect(try JSONValue.parse(expected) == value)
        #expect(JSONValue.int(5).prettyString == "5")
        #expect(JSONValue.array([]).prettyString == "[]")
    }

    @Test("type names for messages")
    func typeNames() {
        #expect(JSONValue.null.typeName == "null")
        #expect(JSONValue.bool(true).typeName == "a boolean")
        #expect(JSONValue.int(1).typeName == "a number")
        #expect(JSONValue.string("").typeName == "a string")
        #expect(JSONValue.array([]).typeName == "a list")
        #expect(JSONValue.object(JSONObject()).typeName == "an object")
    }

    @Test("parsing bytes and text agree")
    func bytesAndText() throws {
        let text = #"{"z":[1,"é"],"a":null}"#
        #expect(try JSONValue.parse(text) == JSONValue.parse(Array(text.utf8)))
        #expect(try JSONValue.parse(text) == JSONValue.parse(text.utf8))
    }
}
