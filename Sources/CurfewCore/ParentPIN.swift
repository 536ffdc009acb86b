/// The rules of the parent's PIN, with which a parent approves extra time on the child's own screen
/// (`curfew pin set`, the indicator's "A parent approves … here…", the agent's `approve-pin`).
///
/// A PIN is 4 to 12 digits: what a parent can type on any keyboard or keypad, and short enough to type
/// with a child watching. It is weak against guessing by itself; what holds is that the agent checks it
/// at most `maxTries` times in `tryWindowSeconds` per child, then ever more slowly (`checkRoom(tries:now:)`:
/// the wait doubles with each wrong try in a row, and at most `maxWrongPerDay` wrong tries in 24 hours),
/// each try an event, and that its hash is root's alone. A PIN a child learnt (watched, or caught with a
/// dialog of their own) is worth little: an approval answers one pending request, once, with at most what
/// it asked and at most the parent's `maxMinutesPerDay` in any 24 hours (`grantable`). Errors describe the
/// shape of what was typed, never the PIN itself.
public enum PINRules {
    public static let minDigits = 4
    public static let maxDigits = 12
    /// Tries (right or wrong) per child within `tryWindowSeconds`; past that the agent refuses to check.
    public static let maxTries = 5
    public static let tryWindowSeconds: Int64 = 15 * 60

    /// The rule in words, for help text and errors.
    public static let rule = "a PIN must be \(minDigits) to \(maxDigits) digits (0-9)"

    /// Checks `pin` against the rule; the error names the rule and what was typed by its shape only
    /// (`got 3 characters`, `got 6 characters, 2 of them not digits`).
    public static func validate(_ pin: String) throws(PolicyError) {
        let characters = pin.count
        let others = pin.unicodeScalars.filter { !("0"..."9").contains($0) }.count
        guard others == 0 else {
            throw PolicyError("\(rule), got \(characters) characters, \(others) of them not \(others == 1 ? "a digit" : "digits")")
        }
        guard (minDigits...maxDigits).contains(characters) else {
            throw PolicyError("\(rule), got \(characters) \(characters == 1 ? "digit" : "digits")")
        }
    }

    /// Whether one more try may be checked now, given the times of the child's tries in the
    /// last `tryWindowSeconds`; the error says when the next one may be made.
    public static func checkRoom(triesInWindow: [Instant], now: Instant) throws(PolicyError) {
        guard triesInWindow.count >= maxTries else { return }
        // The window frees a try when the oldest one in it is `tryWindowSeconds` old.
        let oldest = triesInWindow.sorted()[triesInWindow.count - maxTries]
        let wait = max(1, (oldest.seconds + tryWindowSeconds - now.seconds + 59) / 60)
        throw PolicyError(
            "too many PIN tries: \(maxTries) in the last \(tryWindowSeconds / 60) minutes; try again in \(wait) min")
    }

    /// The minutes a parent may approve on the child's screen: what a grant of extra time allows.
    public static let minutes = 1...GrantRecord.maxMinutes

    /// Past `maxTries` wrong tries in a row, the next try waits `backoffBaseSeconds` after the last
    /// one, doubled for each wrong try more (15 min, 30 min, 1 h, 2 h, 4 h, ...).
    public static let backoffBaseSeconds: Int64 = 15 * 60
    /// Wrong tries of one child in any `daySeconds`: with 10, guessing a 4-digit PIN takes 500 days on
    /// average.
    public static let maxWrongPerDay = 10
    public static let daySeconds: Int64 = 24 * 3600

    /// The minutes the PIN may approve in any `daySeconds` when the parent set no figure
    /// (`curfew pin set --max-per-day`).
    public static let defaultMaxMinutesPerDay = 60
    /// What `curfew pin set --max-per-day` accepts.
    public static let maxMinutesPerDay = 1...GrantRecord.maxMinutes

    /// One try of the PIN as the events record it: when, and whether it was right.
    public struct Try: Sendable, Equatable {
        public var time: Instant
        public var right: Bool
        public init(time: Instant, right: Bool) {
            self.time = time
            self.right = right
        }
    }

    /// Whether one more try may be checked now, given the child's tries of the last `daySeconds`
    /// (older ones are ignored): at most `maxTries` in `tryWindowSeconds`; past `maxTries` wrong tries
    /// in a row, a wait that doubles with each (`backoffBaseSeconds`); at most `maxWrongPerDay` wrong
    /// tries in `daySeconds`. The error names the rule and when the next try may be made.
    public static func checkRoom(tries: [Try], now: Instant) throws(PolicyError) {
        let recent = tries.filter { $0.time > now - .seconds(daySeconds) && $0.time <= now }.sorted { $0.time < $1.time }
        try checkRoom(triesInWindow: recent.filter { $0.time > now - .seconds(tryWindowSeconds) }.map(\.time), now: now)
        let wrong = recent.filter { !$0.right }
        if wrong.count >= maxWrongPerDay {
            let oldest = wrong[wrong.count - maxWrongPerDay].time
            let wait = max(1, (oldest.seconds + daySeconds - now.seconds + 59) / 60)
            throw PolicyError(
                "too many wrong PINs: \(maxWrongPerDay) in the last 24 hours; try again in \(TimeAllowance.format(minutes: Int(wait)))")
        }
        let inARow = recent.reversed().prefix { !$0.right }
        guard inARow.count >= maxTries, let last = inARow.first else { return }
        let doublings = min(inARow.count - maxTries, 20)
        let next = last.time.seconds + backoffBaseSeconds << doublings
        guard next > now.seconds else { return }
        let wait = max(1, (next - now.seconds + 59) / 60)
        throw PolicyError(
            "too many wrong PINs: \(inARow.count) in a row; try again in \(TimeAllowance.format(minutes: Int(wait)))")
    }

    /// What one approval may grant: what the parent approved (`offered`), at most what the pending
    /// request asked (`asked`) and what is left of `maxPerDay` after `approvedInDay` minutes approved
    /// with the PIN in the last `daySeconds`; 0 when nothing is left.
    public static func grantable(offered: Int, asked: Int, approvedInDay: Int, maxPerDay: Int) -> Int {
        max(0, min(offered, asked, maxPerDay - approvedInDay))
    }
}
