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

@Suite("Event budgets")
struct EventBudgetTests {
    @Test("a burst up to the capacity, then one per refill period, never more than the capacity saved up")
    func tokenBucket() {
        var budget = EventBudget(capacity: 3, refillMilliseconds: 1_000, now: 10_000)
        func takes(_ count: Int, at now: Int64) -> [Bool] { (0..<count).map { _ in budget.take(now: now) } }
        #expect(takes(5, at: 10_000) == [true, true, true, false, false])
        #expect(takes(1, at: 10_999) == [false])
        #expect(takes(2, at: 11_000) == [true, false])
        #expect(takes(1, at: 12_000) == [true])
        // Idle for long: the capacity, not more.
        #expect(takes(5, at: 100_000) == [true, true, true, false, false])
        // Partial periods are kept: 2.5 periods give 2 tokens, the half period counts toward the next.
        #expect(takes(3, at: 102_500) == [true, true, false])
        #expect(takes(1, at: 103_000) == [true])
        // A clock that goes back earns nothing.
        #expect(takes(1, at: 50_000) == [false])
        var full = budget
        let isFull = full.isFull(now: 200_000)
        #expect(isFull)
    }
}
