import CurfewCore
import Testing

@Suite struct ConfirmationFormatTests {
    static let record = String(repeating: "ab", count: 32) + ".json"

    static func sample(_ outcome: CurfewCore.Confirmation.Outcome = .superseded) -> CurfewCore.Confirmation {
        CurfewCore.Confirmation(
            machine: "kids-pc", host: "kids-pc.lan", key: "0123456789abcdef", record: record, user: "kid",
            outcome: outcome, reason: outcome == .applied ? nil : "version 3 is newer",
            conflicts: outcome == .merged ? ["dailyLimitMinutes"] : [], enforcedVersion: 3, time: 1_790_000_000)
    }

    @Test func canonicalBytesAreSortedWithoutWhitespaceAndSignedUnderTheirOwnDomain() {
        let text = String(decoding: Self.sample().fileBytes(signature: "c2ln"), as: UTF8.self)
        #expect(
            text
                == #"{"conflicts":[],"enforcedVersion":3,"format":1,"host":"kids-pc.lan","key":"0123456789abcdef","kind":"confirmation","machine":"kids-pc","outcome":"superseded","reason":"version 3 is newer","record":"\#(Self.record)","signature":"c2ln","time":"2026-09-21T14:13:20Z","user":"kid"}"#
        )
        let signing = Self.sample().signingBytes
        #expect(signing.starts(with: Array("curfew-confirmation-v1\n".utf8)))
        #expect(Array(signing.dropFirst("curfew-confirmation-v1\n".utf8.count)) == Self.sample().signedPayload.canonicalBytes)
        #expect(ConfirmationFormat.signingDomain != RecordFormat.signingDomain)
    }

    @Test(arguments: CurfewCore.Confirmation.Outcome.allCases) func parsesWhatItWrites(outcome: CurfewCore.Confirmation.Outcome) throws {
        let parsed = try CurfewCore.Confirmation.parse(Self.sample(outcome).fileBytes(signature: "c2ln"))
        #expect(parsed.confirmation == Self.sample(outcome))
        #expect(parsed.signature == "c2ln")
    }

    @Test func refusesAnythingNotStrictlyAConfirmation() {
        let good = String(decoding: Self.sample().fileBytes(signature: "c2ln"), as: UTF8.self)
        func edited(_ from: String, _ to: String) -> String { good.replacingOccurrences(of: from, with: to) }
        let cases: [(String, String)] = [
            (edited(#""format":1"#, #""format":2"#), "confirmation format 2 is not supported"),
            (edited(#""conflicts":[],"#, #""conflicts":[],"extra":1,"#), "unknown confirmation field \"extra\""),
            (edited(#""kind":"confirmation""#, #""kind":"policy""#), "confirmation field \"kind\" must be \"confirmation\""),
            (edited("{", "{ "), "confirmation is not in canonical form"),
            (edited(#""outcome":"superseded""#, #""outcome":"ignored""#), "confirmation field \"outcome\" must be"),
            (edited(#""outcome":"superseded""#, #""outcome":"applied""#), "confirmation field \"reason\" must be null when applied"),
            (edited(#""reason":"version 3 is newer""#, #""reason":null"#), "must say why it was superseded"),
            (edited(#""conflicts":[]"#, #""conflicts":["bedtime"]"#), "must be empty unless merged"),
            (edited(#""machine":"kids-pc""#, #""machine":"../x""#), "confirmation field \"machine\" must be a machine id"),
            (edited(Self.record, "ab.json"), "confirmation field \"record\" must be a record id"),
            (edited(#""user":"kid""#, #""user":"Kid Name""#), "user"),
            (edited(#""enforcedVersion":3"#, #""enforcedVersion":-1"#), "enforcedVersion"),
            (edited(#""time":"2026-09-21T14:13:20Z""#, #""time":"yesterday""#), "must be a UTC time"),
            (edited(#""signature":"c2ln""#, #""signature":7"#), "confirmation field \"signature\" must be a string"),
            ("[1]", "a confirmation must be a JSON object"),
            (#"{"a":1,"a":2}"#, "not valid JSON"),
            (String(repeating: " ", count: 17_000), "confirmation is larger than 16384 bytes"),
        ]
        for (text, reason) in cases {
            #expect(throws: RecordError.self, "\(reason)") { try CurfewCore.Confirmation.parse(Array(text.utf8)) }
            do {
                _ = try CurfewCore.Confirmation.parse(Array(text.utf8))
            } catch {
                #expect(error.reason.contains(reason), "\(error.reason) should contain \(reason)")
            }
        }
    }

    @Test func aRecordIsNeverAConfirmationNorTheOtherWayRound() throws {
        let record = PolicyRecord(
            user: "kid", version: 1, baseVersion: 0, author: "0123456789abcdef", time: 1_790_000_000,
            policy: Policy.defaults(for: "kid"))
        #expect(throws: RecordError.self) { try CurfewCore.Confirmation.parse(record.fileBytes(signature: "c2ln")) }
        #expect(throws: RecordError.self) { try PolicyRecord.parse(Self.sample().fileBytes(signature: "c2ln")) }
    }

    @Test func machineFilesAreStrictAndCanonical() throws {
        let machine = MachineAnnouncement(
            machine: "kids-pc", host: "kids-pc", publicKey: "AAAA", keyId: "0123456789abcdef")
        #expect(
            String(decoding: machine.bytes, as: UTF8.self)
                == #"{"format":1,"host":"kids-pc","key":"AAAA","keyId":"0123456789abcdef","kind":"machine","machine":"kids-pc"}"#)
        #expect(try MachineAnnouncement.parse(machine.bytes) == machine)
        #expect(throws: RecordError.self) { try MachineAnnouncement.parse(Array(#"{"format":1}"#.utf8)) }
    }
}
