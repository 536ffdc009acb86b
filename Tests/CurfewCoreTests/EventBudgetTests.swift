import Testing

@testable import CurfewCore

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
