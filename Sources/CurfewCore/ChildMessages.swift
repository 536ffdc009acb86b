/// Every message a child receives (desktop notification and terminal alike), in one place: one line
/// each, local clock times with relative days (`until 21:00`, `tomorrow at 07:00`), the rule that
/// bites by name, and what the child can do about it. The `Curfew:` banner is added once, where the
/// message is shown (`TerminalMessages`, the notification's summary), never here.
public enum ChildMessages {
    /// What a child can do when time runs out.
    public static let askParent = "ask a parent: curfew request 30m"

    /// `21:00`, `tomorrow at 07:00`, `on Friday at 07:00` for an instant, seen from `now` in `zone`.
    public static func when(_ instant: Instant, now: Instant, zone: ZoneRules) -> String {
        let (day, second) = zone.localTime(at: instant)
        let clock = "\(ClockTime(hour: second / 3600, minute: second / 60 % 60))"
        let today = zone.localTime(at: now).date
        if day == today { return clock }
        if day == today.adding(days: 1) { return "tomorrow at \(clock)" }
        if day.daysSinceEpoch - today.daysSinceEpoch < 7 && day > today { return "on \(day.weekday.name) at \(clock)" }
        return "on \(day) at \(clock)"
    }

    /// `until 21:00` / `until tomorrow at 07:00`.
    static func until(_ instant: Instant, now: Instant, zone: ZoneRules) -> String {
        let moment = when(instant, now: now, zone: zone)
        return "until " + (moment.hasPrefix("on ") ? String(moment.dropFirst(3)) : moment)
    }

    /// A warning before something runs out, with the local time it does:
    /// `15 minutes of screen time left today (until 20:15); ask a parent: curfew request 30m`,
    /// `bedtime starts in 5 minutes (at 21:00); save your work`.
    public static func warning(_ warning: Warning, now: Instant, zone: ZoneRules) -> String {
        let at = now + .seconds(warning.remainingSeconds)
        let clock = when(at, now: now, zone: zone)
        let moment = clock.contains(" at ") ? clock : "at \(clock)"
        switch warning.subject {
        case .dailyLimit, .weeklyLimit, .app:
            return "\(warning.message) (\(until(at, now: now, zone: zone))); \(askParent)"
        case .bedtime, .downtime, .breakTime:
            return "\(warning.message) (\(moment)); save your work"
        }
    }

    /// The lockout the decision brings starts: its reason, and until when unless the reason names its
    /// own end (a downtime window's or a break's: `blockedUntil`).
    public static func lockout(_ decision: Decision, lockout: Lockout, now: Instant, zone: ZoneRules) -> String {
        Self.lockout(
            reason: decision.blockedReason, lockout: lockout,
            allowedAgainAt: decision.blockedUntil == nil ? decision.allowedAgainAt : nil, now: now, zone: zone)
    }

    /// The lockout starts: `time is up: it is bedtime until tomorrow at 07:00; apps are stopped; ask a parent: curfew request 30m`.
    /// `allowedAgainAt` adds the `until`; nil for a reason that says it already.
    public static func lockout(reason: String, lockout: Lockout, allowedAgainAt: Instant?, now: Instant, zone: ZoneRules) -> String {
        let what: String
        switch lockout {
        case .logout: what = "your sessions end and logins are refused"
        case .lock: what = "the screen is locked"
        case .apps: what = "apps are stopped"
        case .none: what = "nothing is stopped (a parent only watches)"
        case .network: what = "the internet is off"
        }
        let again = allowedAgainAt.map { " \(until($0, now: now, zone: zone))" } ?? ""
        return "time is up: \(reason)\(again); \(what); \(askParent)"
    }

    /// An app stopped: the rule by name, and what to do unless a parent blocked it for good.
    public static func appStopped(app: String, reason: StopReason) -> String {
        switch reason {
        case .blocked: return reason.message(app: app)
        case .appLimit, .lockout: return "\(reason.message(app: app)); \(askParent)"
        }
    }

    /// A parent's answer to the child's request.
    public static func answer(askedMinutes: Int, grantedMinutes: Int?) -> String {
        let asked = TimeAllowance.format(minutes: askedMinutes)
        guard let grantedMinutes else { return "a parent said no to your request for \(asked) more." }
        return "a parent approved your request for \(asked) more: \(TimeAllowance.format(minutes: grantedMinutes)) extra today."
    }

    /// The `network` lockout cut the child's traffic (`EnforcementPlan.networkOffMessage` says why and
    /// until when): `it is bedtime: the internet is off until tomorrow at 07:00; ask a parent: curfew request 30m`.
    public static func networkOff(_ cut: String) -> String { "\(cut); \(askParent)" }

    /// The `network` lockout was lifted.
    public static let networkOn = "the internet is on again."

    /// A login refused, as PAM shows it at the prompt; `LoginVerdict` adds the banner there, the one
    /// place it is shown: `kid may not log in now: it is bedtime. You may log in again tomorrow at 07:00.`
    /// No command to run: nothing can be run at a login prompt.
    public static func loginRefused(user: String, reason: String, again: String?) -> String {
        "\(user) may not log in now: \(reason)." + (again.map { " You may log in again \($0)." } ?? "")
    }

    /// The text as one line: line breaks and other control characters become spaces, and layout
    /// controls (a right-to-left override in an app's name) are shown escaped, `\u{202e}`.
    public static func oneLine(_ text: String) -> String {
        var output = ""
        for scalar in text.unicodeScalars {
            if UntrustedText.isControl(scalar) {
                output += " "
            } else if UntrustedText.isLayoutControl(scalar) {
                output += UntrustedText.terminal(String(scalar))
            } else {
                output.unicodeScalars.append(scalar)
            }
        }
        return output
    }
}
