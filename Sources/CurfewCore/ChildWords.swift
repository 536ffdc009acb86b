/// Words a child reads: durations as `1 h 12 min`, moments as local clock times with relative days
/// (`at 21:00`, `tomorrow at 07:00`), and rules by name (`minecraft 40 min of 1 h`).
public enum ChildWords {
    /// `1 h 12 min`, `40 min`, `2 h`; under a minute `less than a minute`; `no time` for 0.
    /// `roundingUp` for time left (a child with 30 s left has `1 min`, not none), down for time used.
    public static func duration(seconds: Int64, roundingUp: Bool = false) -> String {
        guard seconds > 0 else { return "no time" }
        let minutes = roundingUp ? (seconds + 59) / 60 : seconds / 60
        guard minutes > 0 else { return "less than a minute" }
        let hours = minutes / 60
        let rest = minutes % 60
        switch (hours, rest) {
        case (0, _): return "\(rest) min"
        case (_, 0): return "\(hours) h"
        default: return "\(hours) h \(rest) min"
        }
    }

    /// `minecraft 40 min of 1 h`, `steam blocked`, `gcompris always allowed`.
    public static func rule(_ rule: StatusReport.Rule) -> String {
        switch rule.rule {
        case "block": return "\(rule.app) blocked"
        case "allow": return "\(rule.app) always allowed"
        default:
            let limit = rule.limitMinutes.map { duration(seconds: Int64($0) * 60) } ?? "no limit"
            let used = rule.seconds < 60 ? "0 min" : duration(seconds: rule.seconds)
            let extra = rule.extraMinutes.map { " (\(duration(seconds: Int64($0) * 60)) extra granted today)" } ?? ""
            return "\(rule.app) \(used) of \(limit)\(extra)"
        }
    }

    /// `21:00` on `today`, `tomorrow at 07:00`, `on 2026-11-26 at 07:00`, from an ISO 8601 time in the
    /// policy's zone (`2026-11-24T21:00:00+01:00`), as the agent sends them. `at` is left out for the
    /// plain clock time, so callers say `bedtime at 21:00` or `until 21:00`.
    public static func moment(_ iso: String, today: String) -> String {
        let parts = iso.split(separator: "T", maxSplits: 1)
        guard parts.count == 2, parts[1].count >= 5 else { return iso }
        let date = String(parts[0])
        let clock = String(parts[1].prefix(5))
        if date == today { return clock }
        if let day = try? LocalDate.parse(today), let then = try? LocalDate.parse(date) {
            if then == day.adding(days: 1) { return "tomorrow at \(clock)" }
            if then == day.adding(days: -1) { return "yesterday at \(clock)" }
        }
        return "on \(date) at \(clock)"
    }

    /// What a state's start is called: `bedtime`, `downtime`, `a break`, `time up`, `allowed`.
    public static func stateName(_ state: UseState, window: String? = nil) -> String {
        switch state {
        case .bedtime: "bedtime"
        case .downtime: window.map { "downtime (\($0))" } ?? "downtime"
        case .breakTime: "a break"
        case .limitReached: "time up"
        case .weekLimitReached: "the week's time up"
        case .allowed: "allowed"
        }
    }

    /// The indicator's title and tooltip line: `1 h 12 min left today · bedtime at 21:00`;
    /// `no time left today · allowed again tomorrow at 07:00`; `no daily limit · bedtime at 21:00`.
    public static func summary(_ status: StatusReport) -> String {
        var parts: [String] = []
        let blocked = status.state != .allowed
        if blocked {
            switch status.state {
            case .limitReached: parts.append("no time left today")
            case .weekLimitReached: parts.append("no time left this week")
            default: parts.append("it is \(stateName(status.state))")
            }
            if let again = status.allowedAgainAt {
                let when = moment(again, today: status.date)
                parts.append(when.contains("at ") ? "allowed again \(when)" : "allowed again at \(when)")
            }
        } else {
            if let remaining = status.remainingSeconds {
                parts.append("\(duration(seconds: remaining, roundingUp: true)) left today")
            } else {
                parts.append("no daily limit")
            }
            if let change = status.nextChange, change.state != .allowed {
                let when = moment(change.at, today: status.date)
                let name = stateName(change.state)
                // Time running out is already said by the time left.
                if !(name == "time up" && status.remainingSeconds != nil) {
                    parts.append(when.contains("at ") ? "\(name) \(when)" : "\(name) at \(when)")
                }
            }
        }
        return parts.joined(separator: " · ")
    }
}
