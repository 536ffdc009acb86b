import Testing

@testable import CurfewCore

@Suite("Requests a child may make")
struct RequestRulesTests {
    @Test("a reason is short plain text")
    func reasons() throws {
        try RequestRules.validate(minutes: 30, reason: "homework for school")
        try RequestRules.validate(minutes: 30, reason: nil)
        try RequestRules.validate(minutes: 30, reason: String(repeating: "é", count: 200))
        #expect(throws: PolicyError("reason must be at most 200 characters, got 201")) {
            try RequestRules.validate(minutes: 30, reason: String(repeating: "x", count: 201))
        }
        #expect(throws: PolicyError("reason must be at most 800 bytes of UTF-8, got 1010")) {
            try RequestRules.validate(minutes: 30, reason: "a" + String(repeating: "\u{301}", count: 504) + "b")
        }
        #expect(throws: PolicyError("reason must be plain text without control characters, got \\x1b in \"\\u001b[2J\"")) {
            try RequestRules.validate(minutes: 30, reason: "\u{1B}[2J")
        }
        #expect(throws: PolicyError("reason must be plain text without control characters, got \\n in \"a\\nb\"")) {
            try RequestRules.validate(minutes: 30, reason: "a\nb")
        }
        #expect(throws: PolicyError("requested time must be between 1 and 480 minutes, got 0")) {
            try RequestRules.validate(minutes: 0, reason: nil)
        }
    }

    @Test("at most 5 waiting and 10 an hour")
    func room() throws {
        try RequestRules.checkRoom(user: "kid", pending: 4, recent: 9)
        #expect(
            throws: PolicyError("at most 5 requests may wait for an answer, kid has 5; wait until a parent answers them")
        ) { try RequestRules.checkRoom(user: "kid", pending: 5, recent: 5) }
        #expect(throws: PolicyError("at most 10 requests an hour are recorded, kid made 10 in the last hour")) {
            try RequestRules.checkRoom(user: "kid", pending: 0, recent: 10)
        }
    }
}
