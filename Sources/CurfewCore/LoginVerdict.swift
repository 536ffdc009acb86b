/// The answer to "may this user log in now?", asked by `curfew check-login` from PAM's account stack.
public struct LoginVerdict: Sendable, Equatable {
    public var allowed: Bool
    /// For the person at the login prompt.
    public var message: String

    public init(allowed: Bool, message: String) {
        self.allowed = allowed
        self.message = message
    }

    /// PAM services that start no login: jobs run on a schedule (a child's crontab at bedtime, a
    /// parent's `at` job under the child's account). PAM's account stack runs for them too, but they
    /// open no session to refuse; their processes are counted and stopped by the agent like any
    /// other. Every other service (login, sshd, gdm, lightdm, su, sudo, screen lockers, systemd-user)
    /// is a login.
    public static let nonLoginServices: Set<String> = ["cron", "atd", "anacron"]

    public static func isLogin(service: String) -> Bool { !nonLoginServices.contains(service) }

    /// The answer to anyone but root who asks about another account than their own (root aside), the
    /// same whether that account is managed or not: the check never tells a child who is managed.
    public static let onlyRootChecksOthers = "only root may check another user's login"

    /// A managed user's login when nobody can say whether they may log in: the agent did not answer
    /// (`why`: not running, busy, no answer in time) and its state is root's alone. Refused, saying
    /// why, unless the computer fails open.
    public static func unanswered(user: String, why: String, failOpen: Bool) -> LoginVerdict {
        failOpen
            ? LoginVerdict(allowed: true, message: "\(user) let in: Curfew's agent \(why) and Curfew fails open")
            : LoginVerdict(
                allowed: false,
                message: "Curfew: \(user) may not log in now: Curfew's agent \(why), and \(user) is managed on this computer. Ask a parent.")
    }

    /// A managed user may log in while use is allowed; at bedtime or with no time left they may not,
    /// whatever the lockout (with `lock` or `apps` the session would be unusable anyway), unless the
    /// lockout in force only monitors (`none`) or only cuts the network (`network`: offline use goes on).
    public static func decide(user: String, schedule: Schedule, usedSeconds: Int64, now: Instant) -> LoginVerdict {
        decide(user: user, schedule: schedule, usage: ScheduleUsage(daySeconds: usedSeconds), now: now)
    }

    /// The same, with the week's and the break's figures too.
    public static func decide(user: String, schedule: Schedule, usage: ScheduleUsage, now: Instant) -> LoginVerdict {
        let decision = schedule.decide(now: now, usage: usage)
        if let lockout = schedule.policy.lockout(in: decision.state), !lockout.refusesLogins {
            let how = lockout == .network ? "the internet is off" : "monitor only"
            return LoginVerdict(
                allowed: true, message: "\(user) may log in (\(how): \(decision.blockedReason))")
        }
        guard decision.state != .allowed else {
            let left = decision.remainingSeconds.map { "; \(Warning.describe(seconds: $0)) left" } ?? ""
            return LoginVerdict(allowed: true, message: "\(user) may log in\(left)")
        }
        let again = decision.allowedAgainAt.map { describe(instant: $0, from: now, zone: schedule.zone) }
        return LoginVerdict(
            allowed: false,
            message: "Curfew: " + ChildMessages.loginRefused(user: user, reason: decision.reason ?? "use is not allowed", again: again))
    }

    /// "at 07:00", "tomorrow at 07:00", or "on Mon 2026-11-23 at 07:00", in the policy's zone.
    public static func describe(instant: Instant, from now: Instant, zone: ZoneRules) -> String {
        let (date, second) = zone.localTime(at: instant)
        let clock = ClockTime(hour: second / 3600 % 24, minute: second / 60 % 60)
        let today = zone.localTime(at: now).date
        if date == today { return "at \(clock)" }
        if date == today.adding(days: 1) { return "tomorrow at \(clock)" }
        return "on \(date.weekday.rawValue.prefix(1).uppercased() + date.weekday.rawValue.dropFirst()) \(date) at \(clock)"
    }

    /// The event a refusal leaves in the audit log; `unrecordedBefore`: refusals since the last
    /// event that were only counted (past the user's budget).
    public func event(user: String, service: String, now: Instant, unrecordedBefore: Int = 0) -> AgentEvent {
        AgentEvent(
            time: now, user: user, kind: .loginRefused, message: message,
            details: EventDetails.LoginRefused(service: service, unrecordedBefore: unrecordedBefore))
    }
}
