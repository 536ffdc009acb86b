/// What a child may ask for with `curfew request`, and how often. Everything here is reachable by a
/// child through the agent's socket, so each rule bounds the rows, events and output a child can
/// cause: at most `maxPerHour` requests (answered ones included) and at most `maxPending` waiting.
public enum RequestRules {
    /// Requests of one child waiting for an answer at once.
    public static let maxPending = 5
    /// Requests of one child in any `windowMilliseconds` (the rolling hour), answered ones included.
    public static let maxPerHour = 10
    public static let windowMilliseconds: Int64 = 3_600_000
    /// A reason is a few words: at most this many characters ...
    public static let maxReasonCharacters = 200
    /// ... and this many bytes of UTF-8 (combining marks make characters of any size).
    public static let maxReasonBytes = 800

    /// 1...480 minutes; a reason of at most 200 characters (800 bytes) with no control character
    /// (C0, DEL or C1: no escape sequences, no newlines) so it is stored as plain text.
    public static func validate(minutes: Int64, reason: String?) throws(PolicyError) {
        guard (1...Int64(GrantRecord.maxMinutes)).contains(minutes) else {
            throw PolicyError("requested time must be between 1 and \(GrantRecord.maxMinutes) minutes, got \(minutes)")
        }
        guard let reason else { return }
        if reason.count > maxReasonCharacters {
            throw PolicyError("reason must be at most \(maxReasonCharacters) characters, got \(reason.count)")
        }
        if reason.utf8.count > maxReasonBytes {
            throw PolicyError("reason must be at most \(maxReasonBytes) bytes of UTF-8, got \(reason.utf8.count)")
        }
        if let control = reason.unicodeScalars.first(where: UntrustedText.isControl) {
            throw PolicyError(
                "reason must be plain text without control characters, got \(UntrustedText.terminal(String(control))) in \(quoted(reason))")
        }
    }

    /// Whether a child who has `pending` requests waiting and made `recent` requests in the last
    /// hour may make one more; the error names the rule and the value.
    public static func checkRoom(user: String, pending: Int, recent: Int) throws(PolicyError) {
        if pending >= maxPending {
            throw PolicyError(
                "at most \(maxPending) requests may wait for an answer, \(user) has \(pending); wait until a parent answers them")
        }
        if recent >= maxPerHour {
            throw PolicyError("at most \(maxPerHour) requests an hour are recorded, \(user) made \(recent) in the last hour")
        }
    }
}
