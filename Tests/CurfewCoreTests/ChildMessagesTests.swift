@testable import CurfewCore
import Foundation
import Testing

/// Every message a child can receive, in one table: one line, no banner of its own (the terminal and
/// the notification add one `Curfew:`), local clock times with relative days, never an ISO time, the
/// rule by name, and what to do whenever time ran out.
struct ChildMessagesTests {
    static let zone = ZoneRules(identifier: "Europe/Paris")!
    /// Tuesday 2026-11-24 19:45 in Paris.
    static let now = Instant(seconds: 1_795_545_900)
    static let tomorrow7 = now + .seconds(11 * 3600 + 15 * 60)

    static func warn(_ subject: WarningSubject, _ seconds: Int64) -> String {
        ChildMessages.warning(Warning(subject: subject, thresholdSeconds: seconds, remainingSeconds: seconds), now: now, zone: zone)
    }

    /// Bedtime 19:30-07:00 with the `network` lockout: at `now` the child's traffic is cut.
    static let offline = Schedule(
        policy: Policy(
            user: "kid", dailyLimit: .minutes(120), bedtime: try! BedtimeWindow.parse("19:30-07:00"), lockout: .logout,
            bedtimeLockout: .network, timezone: "Europe/Paris"),
        zone: zone)
    /// Bedtime 21:00-07:00, logins refused at the limit and at bedtime.
    static let refusing = Schedule(
        policy: Policy(
            user: "kid", dailyLimit: .minutes(120), bedtime: try! BedtimeWindow.parse("21:00-07:00"), lockout: .logout,
            timezone: "Europe/Paris"),
        zone: zone)

    static func networkOff(at instant: Instant) -> String {
        let plan = Enforcement.plan(schedule: offline, now: instant, usage: DayUsage(screenSeconds: 0), running: [], tracked: [])
        return ChildMessages.networkOff(plan.networkOffMessage(now: instant, zone: zone))
    }

    static func login(at instant: Instant, used: Int64) -> String {
        LoginVerdict.decide(user: "kid", schedule: refusing, usedSeconds: used, now: instant).message
    }

    /// Downtime homework 19:00-20:30 and bedtime 21:00-07:00: at `now` (19:45) the window is in force.
    static let homework = Schedule(
        policy: Policy(
            user: "kid", dailyLimit: .minutes(120), bedtime: try! BedtimeWindow.parse("21:00-07:00"), lockout: .lock,
            timezone: "Europe/Paris",
            downtime: [
                DowntimeWindow(name: "homework", start: ClockTime(hour: 19, minute: 0), end: ClockTime(hour: 20, minute: 30), days: Weekday.allCases)
            ]),
        zone: zone)

    /// The message of the lockout the schedule's decision brings at `instant`.
    static func lockout(_ schedule: Schedule, at instant: Instant, lockout: Lockout) -> String {
        ChildMessages.lockout(schedule.decide(now: instant, usedSeconds: 0), lockout: lockout, now: instant, zone: zone)
    }

    static let table: [(label: String, text: String, expected: String)] = [
        (
            "network off at bedtime", networkOff(at: now),
            "it is bedtime: the internet is off until tomorrow at 07:00; ask a parent: curfew request 30m"
        ),
        ("network on", ChildMessages.networkOn, "the internet is on again."),
        (
            "login refused at the limit", login(at: now, used: 7200),
            "Curfew: kid may not log in now: today's limit of 2h is used up. You may log in again tomorrow at 07:00."
        ),
        (
            "login refused at bedtime", login(at: now + .seconds(6300), used: 0),
            "Curfew: kid may not log in now: it is bedtime. You may log in again tomorrow at 07:00."
        ),
        ("daily limit", warn(.dailyLimit, 900), "15 minutes of screen time left today (until 20:00); ask a parent: curfew request 30m"),
        ("daily limit countdown", warn(.dailyLimit, 10), "10 seconds of screen time left today (until 19:45); ask a parent: curfew request 30m"),
        ("weekly limit", warn(.weeklyLimit, 300), "5 minutes of screen time left this week (until 19:50); ask a parent: curfew request 30m"),
        ("app limit", warn(.app("minecraft"), 300), "5 minutes of minecraft left today (until 19:50); ask a parent: curfew request 30m"),
        ("bedtime", warn(.bedtime, 900), "bedtime starts in 15 minutes (at 20:00); save your work"),
        ("bedtime after midnight", warn(.bedtime, 5 * 3600), "bedtime starts in 300 minutes (tomorrow at 00:45); save your work"),
        ("downtime", warn(.downtime("homework"), 60), "downtime homework starts in 1 minute (at 19:46); save your work"),
        ("break", warn(.breakTime, 300), "a break starts in 5 minutes (at 19:50); save your work"),
        (
            "bedtime, apps", ChildMessages.lockout(reason: "it is bedtime", lockout: .apps, allowedAgainAt: tomorrow7, now: now, zone: zone),
            "time is up: it is bedtime until tomorrow at 07:00; apps are stopped; ask a parent: curfew request 30m"
        ),
        (
            "limit, logout",
            ChildMessages.lockout(
                reason: "today's limit of 2h is used up", lockout: .logout, allowedAgainAt: tomorrow7, now: now, zone: zone),
            "time is up: today's limit of 2h is used up until tomorrow at 07:00; your sessions end and logins are refused; ask a parent: curfew request 30m"
        ),
        (
            "downtime, lock",
            ChildMessages.lockout(
                reason: "downtime: homework until 20:30", lockout: .lock, allowedAgainAt: nil, now: now, zone: zone),
            "time is up: downtime: homework until 20:30; the screen is locked; ask a parent: curfew request 30m"
        ),
        (
            "break, monitor only",
            ChildMessages.lockout(reason: "time for a 10m break until 19:55", lockout: .none, allowedAgainAt: nil, now: now, zone: zone),
            "time is up: time for a 10m break until 19:55; nothing is stopped (a parent only watches); ask a parent: curfew request 30m"
        ),
        (
            "week, on Friday",
            ChildMessages.lockout(
                reason: "this week's limit of 10h is used up", lockout: .apps, allowedAgainAt: now + .seconds(3 * 86400 + 11 * 3600 + 900),
                now: now, zone: zone),
            "time is up: this week's limit of 10h is used up until Saturday at 07:00; apps are stopped; ask a parent: curfew request 30m"
        ),
        (
            "decision: downtime names its end once", lockout(homework, at: now, lockout: .lock),
            "time is up: downtime: homework until 20:30; the screen is locked; ask a parent: curfew request 30m"
        ),
        (
            "decision: bedtime says until when", lockout(homework, at: now + .seconds(2 * 3600), lockout: .lock),
            "time is up: it is bedtime until tomorrow at 07:00; the screen is locked; ask a parent: curfew request 30m"
        ),
        ("app blocked", ChildMessages.appStopped(app: "steam", reason: .blocked), "steam was stopped: a parent blocked it"),
        (
            "app limit", ChildMessages.appStopped(app: "minecraft", reason: .appLimit(minutes: 60)),
            "minecraft was stopped: its daily limit of 1h is used up; ask a parent: curfew request 30m"
        ),
        (
            "app at bedtime", ChildMessages.appStopped(app: "firefox", reason: .lockout(.bedtime)),
            "firefox was stopped: it is bedtime; ask a parent: curfew request 30m"
        ),
        ("approved", ChildMessages.answer(askedMinutes: 30, grantedMinutes: 15), "a parent approved your request for 30m more: 15m extra today."),
        ("denied", ChildMessages.answer(askedMinutes: 60, grantedMinutes: nil), "a parent said no to your request for 1h more."),
    ]

    @Test(arguments: table.indices) func everyMessageKeepsTheStyle(index: Int) {
        let (label, text, expected) = Self.table[index]
        #expect(text == expected, "\(label)")
        #expect(!text.contains("\n") && ChildMessages.oneLine(text) == text, "\(label): one line")
        // A login refusal is shown by PAM at the prompt with nothing around it: it carries the one banner.
        let banners = label.hasPrefix("login refused") ? 1 : 0
        #expect(text.components(separatedBy: "Curfew").count - 1 == banners, "\(label): the banner is added once, where it is shown")
        #expect(!label.hasPrefix("login refused") || text.hasPrefix("Curfew: "), "\(label)")
        #expect(text.range(of: #"\d{4}-\d\d-\d\dT"#, options: .regularExpression) == nil, "\(label): no ISO time")
        let ranOut = label.contains("limit") || label.hasPrefix("network off") || label.hasPrefix("bedtime,") || label.contains("logout") || label.contains("lock")
            || label.contains("monitor") || label.contains("week") || label == "app at bedtime"
        // Nothing can be run at a login prompt: a refusal says when, not what to type.
        if ranOut && label != "app blocked" && !["bedtime", "bedtime after midnight"].contains(label) && !label.hasPrefix("login refused") {
            #expect(text.hasSuffix(ChildMessages.askParent), "\(label): says what to do")
        }
    }

    @Test func moments() {
        #expect(ChildMessages.when(Self.now + .seconds(900), now: Self.now, zone: Self.zone) == "20:00")
        #expect(ChildMessages.when(Self.tomorrow7, now: Self.now, zone: Self.zone) == "tomorrow at 07:00")
        #expect(ChildMessages.oneLine("two\nlines\u{1B}") == "two lines ")
    }
}
