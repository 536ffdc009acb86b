/// A token bucket: at most `capacity` at once, one more every `refillMilliseconds`. It bounds what a
/// child can make the agent write by repeating something it answers (relaunching a blocked app):
/// past the budget the agent counts instead of recording one by one.
public struct EventBudget: Sendable, Equatable {
    public let capacity: Int
    public let refillMilliseconds: Int64
    public private(set) var tokens: Int
    /// Monotonic milliseconds the tokens were counted at.
    private var countedAt: Int64

    public init(capacity: Int, refillMilliseconds: Int64, now: Int64) {
        precondition(capacity > 0 && refillMilliseconds > 0)
        self.capacity = capacity
        self.refillMilliseconds = refillMilliseconds
        tokens = capacity
        countedAt = now
    }

    /// Whether there is a token at `now` (monotonic milliseconds), without taking it.
    public mutating func hasRoom(now: Int64) -> Bool {
        refill(now: now)
        return tokens > 0
    }

    /// Whether the bucket is full again at `now`: nothing of the past is held against anyone.
    public mutating func isFull(now: Int64) -> Bool {
        refill(now: now)
        return tokens == capacity
    }

    /// Takes a token if there is one.
    public mutating func take(now: Int64) -> Bool {
        guard hasRoom(now: now) else { return false }
        tokens -= 1
        return true
    }

    private mutating func refill(now: Int64) {
        guard now > countedAt else { return }
        let earned = (now - countedAt) / refillMilliseconds
        guard earned > 0 else { return }
        if tokens + Int(min(earned, Int64(capacity))) >= capacity {
            tokens = capacity
            countedAt = now
        } else {
            tokens += Int(earned)
            countedAt += earned * refillMilliseconds
        }
    }
}
