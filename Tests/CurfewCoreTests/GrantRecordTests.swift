import Testing

@testable import CurfewCore

enum GrantFixture {
    static let nonce = "00112233445566778899aabbccddeeff"

    static let grant = GrantRecord(
        user: "kid", date: LocalDate(year: 2026, month: 11, day: 22)!, extraMinutes: 30, bedtimeDelayMinutes: 15,
        author: RecordFixture.author, time: utc("2026-11-22T14:00:00Z"), nonce: nonce, requestId: 4)

    static let fileText =
        #"{"author":"0123456789abcdef","bedtimeDelayMinutes":15,"date":"2026-11-22","extraMinutes":30,"format":1,"kind":"grant","nonce":"00112233445566778899aabbccddeeff","requestId":4,"signature":"c2ln","time":"2026-11-22T14:00:00Z","user":"kid"}"#

    /// The sample grant's file with one change made to its fields, in canonical form.
    static func bytes(_ edit: (inout JSONObject) -> Void) -> [UInt8] {
        guard case .object(var object) = grant.signedPayload else { return [] }
        object["signature"] = .string("c2ln")
        edit(&object)
        return JSONValue.object(object).canonicalBytes
    }
}

@Suite("Grant records")
struct GrantRecordTests {
    @Test("the signed payload in canonical form, under the records' signing domain")
    func payload() throws {
        let grant = GrantFixture.grant
        #expect(grant.fileBytes(signature: "c2ln") == Array(GrantFixture.fileText.utf8))
        let payload = try JSONValue.parse(Array(GrantFixture.fileText.utf8))
        guard case .object(var object) = payload else { throw PolicyError("not an object") }
        object["signature"] = nil
        #expect(grant.signingBytes == Array("curfew-record-v1\n".utf8) + JSONValue.object(object).canonicalBytes)
        var plain = grant
        plain.requestId = nil
        #expect(plain.signedPayload.canonicalString.contains(#""requestId":null"#))
    }

    @Test("grant files parse back to the grant, through either parser")
    func roundTrip() throws {
        let bytes = Array(GrantFixture.fileText.utf8)
        let (parsed, signature) = try GrantRecord.parse(bytes)
        #expect(parsed == GrantFixture.grant)
        #expect(signature == "c2ln")
        let (any, _) = try SignedRecord.parse(bytes)
        #expect(any == .grant(GrantFixture.grant))
        #expect(any.user == "kid")
        #expect(any.signingBytes == GrantFixture.grant.signingBytes)
        let policy = try SignedRecord.parse(Array(RecordFixture.fileText.utf8))
        #expect(policy.record == .policy(RecordFixture.record))
        var bedtimeOnly = GrantFixture.grant
        bedtimeOnly.extraMinutes = 0
        bedtimeOnly.requestId = nil
        #expect(try GrantRecord.parse(bedtimeOnly.fileBytes(signature: "x")).record == bedtimeOnly)
    }

    static let malformed: [RecordErrorCase] = [
        RecordErrorCase("unknown field", GrantFixture.bytes { $0["note"] = .string("x") }, #"unknown record field "note""#),
        RecordErrorCase("missing nonce", GrantFixture.bytes { $0["nonce"] = nil }, #"record field "nonce" must be 32 lowercase hex digits"#),
        RecordErrorCase(
            "short nonce", GrantFixture.bytes { $0["nonce"] = .string("abc") }, #"record field "nonce" must be 32 lowercase hex digits"#),
        RecordErrorCase(
            "format 2", GrantFixture.bytes { $0["format"] = .int(2) },
            "record format 2 is not supported (this version reads format 1)"),
        RecordErrorCase(
            "wrong kind", GrantFixture.bytes { $0["kind"] = .string("gift") },
            #"record field "kind" must be "policy" or "grant""#),
        RecordErrorCase(
            "not canonical", Array(GrantFixture.fileText.replacingOccurrences(of: ",", with: ", ").utf8),
            "record is not in canonical form"),
        RecordErrorCase(
            "too much extra", GrantFixture.bytes { $0["extraMinutes"] = .int(500) },
            "extra time must be between 0 and 480 minutes, got 500"),
        RecordErrorCase(
            "negative delay", GrantFixture.bytes { $0["bedtimeDelayMinutes"] = .int(-5) },
            "bedtime delay must be between 0 and 480 minutes, got -5"),
        RecordErrorCase(
            "huge delay", GrantFixture.bytes { $0["bedtimeDelayMinutes"] = .int(Int64.max) },
            "bedtime delay must be between 0 and 480 minutes, got \(Int64.max)"),
        RecordErrorCase(
            "nothing granted",
            GrantFixture.bytes {
                $0["extraMinutes"] = .int(0)
                $0["bedtimeDelayMinutes"] = .int(0)
            }, "extra time must be between 1 and 480 minutes, got 0"),
        RecordErrorCase(
            "bad date", GrantFixture.bytes { $0["date"] = .string("2026-02-30") },
            #"record field "date" must be a date like 2026-01-31"#),
        RecordErrorCase(
            "request id zero", GrantFixture.bytes { $0["requestId"] = .int(0) },
            #"record field "requestId" must be a positive whole number or null"#),
        RecordErrorCase(
            "missing request id", GrantFixture.bytes { $0["requestId"] = nil },
            #"record field "requestId" must be a positive whole number or null"#),
        RecordErrorCase(
            "bad user", GrantFixture.bytes { $0["user"] = .string("Kid!") },
            "user name must be 1 to 32 lowercase letters, digits, '_', '-' or '.', starting with a letter or '_', got \"Kid!\""),
        RecordErrorCase(
            "bad author", GrantFixture.bytes { $0["author"] = .string("me") },
            #"record field "author" must be a key id (16 hex digits)"#),
    ]

    @Test("malformed grant files are refused with a reason", arguments: malformed)
    func malformedFiles(_ example: RecordErrorCase) {
        #expect(throws: RecordError(example.reason)) { _ = try SignedRecord.parse(example.bytes) }
    }

    @Test("a grant file is not a policy record and a policy record is not a grant")
    func kindsDoNotMix() {
        #expect(throws: RecordError(#"unknown record field "bedtimeDelayMinutes""#)) {
            _ = try PolicyRecord.parse(Array(GrantFixture.fileText.utf8))
        }
        #expect(throws: RecordError(#"record field "kind" must be "grant""#)) {
            _ = try GrantRecord.parse(Array(RecordFixture.fileText.utf8))
        }
    }

    @Test("a changed byte changes what was signed")
    func tampering() throws {
        let tampered = GrantFixture.bytes { $0["extraMinutes"] = .int(300) }
        let (record, _) = try GrantRecord.parse(tampered)
        #expect(record.signingBytes != GrantFixture.grant.signingBytes)
    }

    @Test("validation names the rule and the value")
    func validation() {
        #expect(throws: PolicyError("extra time must be between 1 and 480 minutes, got 500")) {
            try GrantRecord.validate(extraMinutes: 500, bedtimeDelayMinutes: 0)
        }
        #expect(throws: PolicyError("extra time must be between 1 and 480 minutes, got 0")) {
            try GrantRecord.validate(extraMinutes: 0, bedtimeDelayMinutes: 0)
        }
        #expect(throws: PolicyError("bedtime delay must be between 0 and 480 minutes, got 481")) {
            try GrantRecord.validate(extraMinutes: 30, bedtimeDelayMinutes: 481)
        }
        #expect(throws: Never.self) { try GrantRecord.validate(extraMinutes: 0, bedtimeDelayMinutes: 30) }
        #expect(throws: Never.self) { try GrantRecord.validate(extraMinutes: 480, bedtimeDelayMinutes: 480) }
        var grant = GrantFixture.grant
        grant.nonce = "XYZ"
        #expect(throws: PolicyError(#"nonce must be 32 lowercase hex digits, got "XYZ""#)) { try grant.validate() }
    }

    @Test("grants add up per user and day, and the schedule uses them")
    func fold() {
        let day = LocalDate(year: 2026, month: 11, day: 22)!
        func summary(_ id: String, _ user: String, _ date: LocalDate, _ extra: Int, _ delay: Int) -> GrantSummary {
            GrantSummary(
                id: id, user: user, date: date, extraMinutes: extra, bedtimeDelayMinutes: delay, author: RecordFixture.author,
                time: 0, requestId: nil)
        }
        let adjustments = GrantFold.adjustments([
            summary("a", "kid", day, 30, 0), summary("b", "kid", day, 15, 20), summary("c", "kid", day.adding(days: 1), 10, 0),
            summary("d", "sis", day, 60, 0),
        ])
        #expect(adjustments["kid"]?[day] == DayAdjustment(extraMinutes: 45, bedtimeDelayMinutes: 20))
        #expect(adjustments["kid"]?[day.adding(days: 1)] == DayAdjustment(extraMinutes: 10))
        #expect(adjustments["sis"]?[day] == DayAdjustment(extraMinutes: 60))
        let schedule = Schedule(policy: Policy.defaults(for: "kid"), zone: ZoneRules(identifier: "UTC")!, adjustments: adjustments["kid"]!)
        #expect(schedule.limitMinutes(on: day) == 165)
        #expect(schedule.limitMinutes(on: day.adding(days: 2)) == 120)
    }
}
