/// The rules of the parent's PIN, with which a parent approves extra time on the child's own screen
/// (`curfew pin set`, the indicator's "A parent approves … here…", the agent's `approve-pin`).
///
/// A PIN is 4 to 12 digits: what a parent can type on any keyboard or keypad, and short enough to type
/// with a child watching. It is weak against guessing by itself; what holds is that the agent checks it
/// at most `maxTries` times in `tryWindowSeconds` per child (each try an event), and that its hash is
/// root's alone. Errors describe the shape of what was typed, never the PIN itself.
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
}
