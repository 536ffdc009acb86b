import Testing

@testable import CurfewCore

enum RecordFixture {
    static let author = "0123456789abcdef"

    static let record = PolicyRecord(
        user: "kid", version: 2, baseVersion: 1, author: author, time: utc("2026-01-31T20:00:00Z"),
        policy: Policy.defaults(for: "kid"))

    static let payloadText =
        #"{"author":"0123456789abcdef","baseVersion":1,"format":1,"kind":"policy","policy":{"apps":[],"bedtime":{"end":"07:00","start":"20:00"},"dailyLimitMinutes":120,"lockout":"logout","timezone":null,"user":"kid","warnMinutes":[15,5,1],"weekdayBedtimes":{},"weekdayLimits":{}},"time":"2026-01-31T20:00:00Z","user":"kid","version":2}"#

    static let fileText =
        #"{"author":"0123456789abcdef","baseVersion":1,"format":1,"kind":"policy","policy":{"apps":[],"bedtime":{"end":"07:00","start":"20:00"},"dailyLimitMinutes":120,"lockout":"logout","timezone":null,"user":"kid","warnMinutes":[15,5,1],"weekdayBedtimes":{},"weekdayLimits":{}},"signature":"c2ln","time":"2026-01-31T20:00:00Z","user":"kid","version":2}"#

    /// The sample record's file, with one change made to its fields, in canonical form.
    static func bytes(_ edit: (inout JSONObject) -> Void) -> [UInt8] {
        guard case .object(var object) = record.signedPayload else { return [] }
        object["signature"] = .string("c2ln")
        edit(&object)
        return JSONValue.object(object).canonicalBytes
    }

    /// The sample record's file with a policy field changed.
    static func withPolicy(_ edit: (inout JSONObject) -> Void) -> [UInt8] {
        bytes { object in
            guard case .object(var policy)? = object["policy"] else { return }
            edit(&policy)
            object["policy"] = .object(policy)
        }
    }
}

struct RecordErrorCase: Sendable, CustomTestStringConvertible {
    var label: String
    var bytes: [UInt8]
    var reason: String

    init(_ label: String, _ bytes: [UInt8], _ reason: String) {
        self.label = label
        self.bytes = bytes
        self.reason = reason
    }

    init(_ label: String, text: String, _ reason: String) {
        self.init(label, Array(text.utf8), reason)
    }

    var testDescription: String { label }
}

@Suite("Policy records")
struct RecordTests {
    @Test("the signed payload in canonical form")
    func payload() {
        let record = RecordFixture.record
        #expect(record.signedPayload.canonicalString == RecordFixture.payloadText)
        #expect(record.signingBytes == Array("curfew-record-v1\n".utf8) + Array(RecordFixture.payloadText.utf8))
        #expect(record.fileBytes(signature: "c2ln") == Array(RecordFixture.fileText.utf8))
    }

    @Test("a record that removes the user has a null policy")
    func removal() throws {
        var record = RecordFixture.record
        record.policy = nil
        #expect(
            record.signedPayload.canonicalString
                == #"{"author":"0123456789abcdef","baseVersion":1,"format":1,"kind":"policy","policy":null,"time":"2026-01-31T20:00:00Z","user":"kid","version":2}"#
        )
        let parsed = try PolicyRecord.parse(record.fileBytes(signature: "x"))
        #expect(parsed.record == record)
        #expect(RecordSummary(id: "abc.json", record: parsed.record).removesUser)
    }

    @Test("valid files parse back to the record they were made from")
    func roundTrip() throws {
        let detailed = try decodePolicy(PolicyDecodeTests.full)
        let records = [
            RecordFixture.record,
            PolicyRecord(user: "kid", version: 1, baseVersion: 0, author: "ffffffffffffffff", time: 0, policy: detailed),
            PolicyRecord(
                user: "anna-lena", version: Int(Int32.max), baseVersion: Int(Int32.max) - 1, author: "00000000000000aa",
                time: utc("2038-01-19T03:14:08Z"), policy: Policy(user: "anna-lena", dailyLimit: .unlimited, bedtime: nil)),
        ]
        for record in records {
            for signature in ["c2ln", "", String(repeating: "A", count: 88)] {
                let parsed = try PolicyRecord.parse(record.fileBytes(signature: signature))
                #expect(parsed == ParsedRecord(record: record, signature: signature))
            }
        }
        #expect(try PolicyRecord.parse(Array(RecordFixture.fileText.utf8)).record == RecordFixture.record)
    }

    /// A record file made before `bedtimeLockout` existed reads as it always did: the one
    /// lockout at the limit and at bedtime alike, and its bytes (what was signed) come back unchanged.
    @Test("an old record file without bedtimeLockout reads as before")
    func oldRecordWithoutBedtimeLockout() throws {
        let old = RecordFixture.fileText.replacingOccurrences(of: #""lockout":"logout""#, with: #""lockout":"lock""#)
        let parsed = try PolicyRecord.parse(Array(old.utf8))
        let policy = try #require(parsed.record.policy)
        #expect(policy.lockout == .lock)
        #expect(policy.bedtimeLockout == nil)
        #expect(policy.lockout(for: .bedtime) == .lock && policy.lockout(for: .limit) == .lock)
        #expect(policy.lockout(in: .bedtime) == .lock && policy.lockout(in: .downtime) == .lock && policy.lockout(in: .allowed) == nil)
        #expect(parsed.record.fileBytes(signature: "c2ln") == Array(old.utf8))
        // A record with the field keeps it, and says it in the canonical payload.
        var record = parsed.record
        record.policy?.bedtimeLockout = .network
        #expect(record.signedPayload.canonicalString.contains(#""bedtimeLockout":"network","bedtime":"#) == false)
        #expect(record.signedPayload.canonicalString.contains(#""bedtimeLockout":"network""#))
        #expect(try PolicyRecord.parse(record.fileBytes(signature: "c2ln")).record == record)
    }

    @Test("a file of exactly the size limit is read; one byte more is refused unread")
    func sizeLimit() throws {
        let base = RecordFixture.record.fileBytes(signature: "").count
        let signature = String(repeating: "A", count: RecordFormat.maxBytes - base)
        let bytes = RecordFixture.record.fileBytes(signature: signature)
        #expect(bytes.count == 262_144)
        #expect(try PolicyRecord.parse(bytes).signature == signature)
        let tooLong = RecordFixture.record.fileBytes(signature: signature + "A")
        #expect(throws: RecordError("record is larger than 262144 bytes")) { try PolicyRecord.parse(tooLong) }
    }

    static let errorCases: [RecordErrorCase] = [
        .init("oversized", Array(repeating: 0x20, count: 262_145), "record is larger than 262144 bytes"),
        .init("oversized garbage", Array(repeating: 0xFF, count: 300_000), "record is larger than 262144 bytes"),
        .init("not JSON", text: "{", "not valid JSON: expected a quoted key at byte 1"),
        .init("empty", text: "", "not valid JSON: unexpected end of JSON at byte 0"),
        .init("duplicate key", text: #"{"format":1,"format":1}"#, #"not valid JSON: duplicate key "format" at byte 12"#),
        .init("a list", text: "[]", "a record must be a JSON object"),
        .init("unknown field", RecordFixture.bytes { $0["comment"] = .string("hi") }, #"unknown record field "comment""#),
        .init(
            "unknown field in a non-canonical file", text: #"{ "format": 1, "extra": true }"#, #"unknown record field "extra""#),
        .init("unknown field without a format", text: #"{"extra":true}"#, #"record field "format" is missing"#),
        .init("no format", RecordFixture.bytes { $0["format"] = nil }, #"record field "format" is missing"#),
        .init("format as text", RecordFixture.bytes { $0["format"] = .string("1") }, #"record field "format" is missing"#),
        .init(
            "future format", RecordFixture.bytes { $0["format"] = .int(2) },
            "record format 2 is not supported (this version reads format 1)"),
        .init(
            "future format with fields this version does not know",
            text: #"{"format":3,"kind":"policy","payload":{}}"#, "record format 3 is not supported (this version reads format 1)"),
        .init(
            "format 0", RecordFixture.bytes { $0["format"] = .int(0) },
            "record format 0 is not supported (this version reads format 1)"),
        .init(
            "future format, not canonical", text: #"{ "format": 2 }"#,
            "record format 2 is not supported (this version reads format 1)"),
        .init("another kind", RecordFixture.bytes { $0["kind"] = .string("confirmation") }, #"record field "kind" must be "policy""#),
        .init("no kind", RecordFixture.bytes { $0["kind"] = nil }, #"record field "kind" must be "policy""#),
        .init(
            "whitespace after the brace", text: "{ " + RecordFixture.fileText.dropFirst(), "record is not in canonical form"),
        .init("a trailing newline", text: RecordFixture.fileText + "\n", "record is not in canonical form"),
        .init(
            "pretty printed", text: try! JSONValue.parse(RecordFixture.fileText).prettyString,
            "record is not in canonical form"),
        .init(
            "keys out of order",
            text: #"{"format":1,"kind":"policy","author":"0123456789abcdef","baseVersion":1,"policy":null,"signature":"c2ln","time":"2026-01-31T20:00:00Z","user":"kid","version":2}"#,
            "record is not in canonical form"),
        .init(
            "an unnecessary escape",
            text: RecordFixture.fileText.replacingFirst(#""user":"kid","version""#, with: #""user":"\u006bid","version""#),
            "record is not in canonical form"),
        .init("no user", RecordFixture.bytes { $0["user"] = nil }, #"record field "user" must be a string"#),
        .init("user as a number", RecordFixture.bytes { $0["user"] = .int(1000) }, #"record field "user" must be a string"#),
        .init(
            "a bad user name", RecordFixture.bytes { $0["user"] = .string("Kid") },
            #"user name must be 1 to 32 lowercase letters, digits, '_', '-' or '.', starting with a letter or '_', got "Kid""#),
        .init(
            "version 0", RecordFixture.bytes { $0["version"] = .int(0); $0["baseVersion"] = .int(0) },
            #"record field "version" must be a positive whole number"#),
        .init(
            "version as text", RecordFixture.bytes { $0["version"] = .string("2") },
            #"record field "version" must be a positive whole number"#),
        .init(
            "version too large", RecordFixture.bytes { $0["version"] = .int(2_147_483_648) },
            #"record field "version" must be a positive whole number"#),
        .init(
            "baseVersion equal to version", RecordFixture.bytes { $0["baseVersion"] = .int(2) },
            #"record field "baseVersion" must be a whole number below version"#),
        .init(
            "baseVersion above version", RecordFixture.bytes { $0["baseVersion"] = .int(7) },
            #"record field "baseVersion" must be a whole number below version"#),
        .init(
            "negative baseVersion", RecordFixture.bytes { $0["baseVersion"] = .int(-1) },
            #"record field "baseVersion" must be a whole number below version"#),
        .init(
            "no baseVersion", RecordFixture.bytes { $0["baseVersion"] = nil },
            #"record field "baseVersion" must be a whole number below version"#),
        .init(
            "author in upper case", RecordFixture.bytes { $0["author"] = .string("0123456789ABCDEF") },
            #"record field "author" must be a key id (16 hex digits)"#),
        .init(
            "author too short", RecordFixture.bytes { $0["author"] = .string("0123456789abcde") },
            #"record field "author" must be a key id (16 hex digits)"#),
        .init(
            "author too long", RecordFixture.bytes { $0["author"] = .string("0123456789abcdef0") },
            #"record field "author" must be a key id (16 hex digits)"#),
        .init(
            "author not hex", RecordFixture.bytes { $0["author"] = .string("0123456789abcdeg") },
            #"record field "author" must be a key id (16 hex digits)"#),
        .init(
            "author as a number", RecordFixture.bytes { $0["author"] = .int(123) },
            #"record field "author" must be a key id (16 hex digits)"#),
        .init(
            "time without Z", RecordFixture.bytes { $0["time"] = .string("2026-01-31T20:00:00") },
            #"record field "time" must be a UTC time like 2026-01-31T20:00:00Z"#),
        .init(
            "time with an offset", RecordFixture.bytes { $0["time"] = .string("2026-01-31T20:00:00+00:00") },
            #"record field "time" must be a UTC time like 2026-01-31T20:00:00Z"#),
        .init(
            "time on a day that does not exist", RecordFixture.bytes { $0["time"] = .string("2026-02-29T20:00:00Z") },
            #"record field "time" must be a UTC time like 2026-01-31T20:00:00Z"#),
        .init(
            "time as seconds", RecordFixture.bytes { $0["time"] = .int(1_769_889_600) },
            #"record field "time" must be a UTC time like 2026-01-31T20:00:00Z"#),
        .init("no signature", RecordFixture.bytes { $0["signature"] = nil }, #"record field "signature" must be a string"#),
        .init(
            "signature as a list", RecordFixture.bytes { $0["signature"] = .array([]) },
            #"record field "signature" must be a string"#),
        .init("no policy", RecordFixture.bytes { $0["policy"] = nil }, #"record field "policy" is missing"#),
        .init(
            "the policy names another user", RecordFixture.withPolicy { $0["user"] = .string("max") },
            "the policy's user differs from the record's user"),
        .init(
            "an invalid policy", RecordFixture.withPolicy { $0["dailyLimitMinutes"] = .int(17) },
            "invalid policy: daily limit must be a multiple of 15 minutes, got 17"),
        .init(
            "a policy with an unknown field", RecordFixture.withPolicy { $0["bonus"] = .int(1) },
            #"invalid policy: unknown policy field "bonus" (known fields: user, dailyLimitMinutes, weekdayLimits, bedtime, weekdayBedtimes, apps, warnMinutes, lockout, bedtimeLockout, timezone, limitScope, weeklyLimitMinutes, downtime, breaks, exceptions, selfExtension)"#
        ),
        .init(
            "a policy without a user", RecordFixture.withPolicy { $0["user"] = nil },
            #"invalid policy: policy field "user" is missing"#),
        .init(
            "a policy that is a string", RecordFixture.bytes { $0["policy"] = .string("{}") },
            "invalid policy: a policy must be a JSON object, got a string"),
        .init(
            "a policy with a huge number", RecordFixture.withPolicy { $0["dailyLimitMinutes"] = .int(Int64.min) },
            #"invalid policy: policy field "dailyLimitMinutes" is out of range, got -9223372036854775808"#),
    ]

    @Test("files that are not usable records", arguments: errorCases)
    func errors(_ test: RecordErrorCase) {
        // Bytes that are not (yet) whole JSON may be a file still being written; everything else is refused for good.
        let cause: RejectionCause = test.reason.hasPrefix("not valid JSON") ? .mayBeIncomplete : .invalid
        #expect(throws: RecordError(test.reason, cause: cause)) { try PolicyRecord.parse(test.bytes) }
    }

    @Test("key ids", arguments: [("0123456789abcdef", true), ("ffffffffffffffff", true), ("0123456789ABCDEF", false), ("", false), ("0123456789abcde", false), ("０123456789abcde", false)])
    func keyIDs(text: String, valid: Bool) {
        #expect(KeyID.isValid(text) == valid)
    }

    @Test("a summary keeps what folding needs")
    func summary() {
        let summary = RecordSummary(id: "abc.json", record: RecordFixture.record)
        #expect(
            summary
                == RecordSummary(
                    id: "abc.json", user: "kid", version: 2, baseVersion: 1, author: RecordFixture.author,
                    time: utc("2026-01-31T20:00:00Z"), removesUser: false))
    }
}

func foldSummary(
    _ id: String, user: String = "kid", version: Int, author: String = "0000000000000001", time: Int64 = 1000
) -> RecordSummary {
    RecordSummary(
        id: id, user: user, version: version, baseVersion: version - 1, author: author, time: time, removesUser: false)
}

/// Every ordering of a short list.
func permutations<T>(_ items: [T]) -> [[T]] {
    guard items.count > 1 else { return [items] }
    return items.indices.flatMap { index in
        var rest = items
        let item = rest.remove(at: index)
        return permutations(rest).map { [item] + $0 }
    }
}

@Suite("Choosing the current record")
struct PolicyFoldTests {
    @Test("no records, no current one")
    func empty() {
        #expect(PolicyFold.current([]) == nil)
        #expect(PolicyFold.currentByUser([]).isEmpty)
    }

    @Test(
        "tie-breaks: version, then time, then key id, then record id; in any order of arrival",
        arguments: [
            // The highest version wins even when it is older.
            ([foldSummary("a", version: 2, time: 5000), foldSummary("b", version: 3, time: 100), foldSummary("c", version: 1, time: 9000)], "b"),
            // Same version: the later one.
            ([foldSummary("a", version: 3, time: 200), foldSummary("b", version: 3, time: 100), foldSummary("c", version: 2, time: 900)], "a"),
            // Same version and time: the greater key id.
            (
                [
                    foldSummary("a", version: 3, author: "ffffffffffffffff"), foldSummary("b", version: 3, author: "00000000000000ff"),
                    foldSummary("c", version: 3, author: "fffffffffffffff0"),
                ], "a"
            ),
            // Same version, time and key: the greater record id.
            ([foldSummary("1f.json", version: 3), foldSummary("2a.json", version: 3), foldSummary("0b.json", version: 3)], "2a.json"),
            // A single record.
            ([foldSummary("only", version: 1)], "only"),
        ])
    func current(records: [RecordSummary], winner: String) {
        for order in permutations(records) {
            #expect(PolicyFold.current(order)?.id == winner)
        }
    }

    @Test("current by user")
    func byUser() {
        let records = [
            foldSummary("k1", user: "kid", version: 1), foldSummary("k2", user: "kid", version: 2),
            foldSummary("a1", user: "anna", version: 1, time: 10), foldSummary("a1b", user: "anna", version: 1, time: 20),
            foldSummary("m5", user: "max", version: 5),
        ]
        for order in permutations(Array(records.prefix(4))) {
            let current = PolicyFold.currentByUser(order + [records[4]])
            #expect(current.mapValues(\.id) == ["kid": "k2", "anna": "a1b", "max": "m5"])
        }
    }
}

extension String {
    /// The text with the first occurrence of `target` replaced; used to build malformed files.
    func replacingFirst(_ target: String, with replacement: String) -> String {
        var index = startIndex
        while index < endIndex {
            if self[index...].hasPrefix(target) {
                return String(self[..<index]) + replacement + String(self[self.index(index, offsetBy: target.count)...])
            }
            index = self.index(after: index)
        }
        return self
    }
}
