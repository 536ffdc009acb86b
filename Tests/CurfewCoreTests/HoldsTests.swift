import Testing

@testable import CurfewCore

@Suite("Holds: busy apps and the session belt")
struct HoldsTests {
    @Test func aProcessIsBusyAtTwoPercentOfACPUOverTheWindow() {
        var window = CPUWindow()
        window.add(at: 0, cpuMilliseconds: 1_000)
        #expect(!window.isBusy, "one reading says nothing")
        window.add(at: 200, cpuMilliseconds: 1_200)
        #expect(!window.isBusy, "a window under 400 ms says nothing, even at 100 %")
        window.add(at: 1_000, cpuMilliseconds: 1_020)
        #expect(window.isBusy, "20 ms of CPU in 1 s is 2 %")
        var idle = CPUWindow()
        idle.add(at: 0, cpuMilliseconds: 500)
        idle.add(at: 1_000, cpuMilliseconds: 510)
        idle.add(at: 5_000, cpuMilliseconds: 590)
        #expect(!idle.isBusy, "90 ms in 5 s is 1.8 %")
        idle.add(at: 6_000, cpuMilliseconds: 600)
        #expect(!idle.isBusy)
    }

    @Test func oldReadingsLeaveTheWindowSoAnAppThatStopsIsNoLongerBusy() {
        var window = CPUWindow()
        // Busy for 5 s, then asleep.
        for second in 0...5 { window.add(at: Int64(second) * 1_000, cpuMilliseconds: Int64(second) * 1_000) }
        #expect(window.isBusy)
        for second in 6...12 { window.add(at: Int64(second) * 1_000, cpuMilliseconds: 5_000) }
        #expect(!window.isBusy, "asleep for the last 5 s: \(window.samples.map(\.at))")
        #expect(window.samples.count <= 7)
    }

    func plan(
        limit: TimeAllowance = .minutes(120), bedtime: String = "off", lockout: Lockout, bedtimeLockout: Lockout? = nil, now: String,
        screen: Int64
    ) -> EnforcementPlan {
        let policy = Policy(
            user: "kid", dailyLimit: limit, bedtime: try! BedtimeWindow.parse(bedtime), apps: [], lockout: lockout,
            bedtimeLockout: bedtimeLockout, timezone: "UTC")
        let schedule = Schedule(policy: policy, zone: zoneRules("UTC"), adjustments: [:])
        return Enforcement.plan(
            schedule: schedule, now: utcInstant(now), usage: DayUsage(screenSeconds: screen), running: ["firefox"], tracked: ["firefox"])
    }

    @Test func theBeltIsTheTimeLeftUnderLogoutAndLockAndNoneOtherwise() {
        let now = "2026-06-05T12:00Z"
        #expect(SessionBelt.secondsLeft(plan: plan(lockout: .logout, now: now, screen: 3_600), onlyAllowedApps: false) == 3_600)
        #expect(SessionBelt.secondsLeft(plan: plan(lockout: .lock, now: now, screen: 7_000), onlyAllowedApps: false) == 200)
        // Bedtime before the limit runs out: bedtime.
        #expect(
            SessionBelt.secondsLeft(
                plan: plan(bedtime: "12:10-07:00", lockout: .logout, now: now, screen: 0), onlyAllowedApps: false)
                == 600)
        // No time left: now.
        #expect(SessionBelt.secondsLeft(plan: plan(lockout: .logout, now: now, screen: 7_200), onlyAllowedApps: false) == 0)
        // Unlimited with no bedtime, always-allowed apps alone, and lockouts that never end a session: no cap.
        #expect(
            SessionBelt.secondsLeft(plan: plan(limit: .unlimited, lockout: .logout, now: now, screen: 9_000), onlyAllowedApps: false)
                == nil)
        #expect(SessionBelt.secondsLeft(plan: plan(lockout: .logout, now: now, screen: 3_600), onlyAllowedApps: true) == nil)
        #expect(SessionBelt.secondsLeft(plan: plan(lockout: .apps, now: now, screen: 3_600), onlyAllowedApps: false) == nil)
        #expect(SessionBelt.secondsLeft(plan: plan(lockout: .none, now: now, screen: 3_600), onlyAllowedApps: false) == nil)
    }

    /// Each cause by its own lockout (the lockout by cause): only a block that ends or locks
    /// sessions caps them.
    @Test func theBeltFollowsTheLockoutOfEachCause() {
        let now = "2026-06-05T12:00Z"
        // The internet off at bedtime (12:10), logout at the limit (an hour left): the limit, not bedtime.
        #expect(
            SessionBelt.secondsLeft(
                plan: plan(bedtime: "12:10-07:00", lockout: .logout, bedtimeLockout: .network, now: now, screen: 3_600),
                onlyAllowedApps: false) == 3_600)
        // At bedtime under `network`, the session goes on until the limit is used up.
        #expect(
            SessionBelt.secondsLeft(
                plan: plan(bedtime: "11:00-07:00", lockout: .logout, bedtimeLockout: .network, now: now, screen: 3_600),
                onlyAllowedApps: false) == 3_600)
        // ... and with no limit, nothing ends it.
        #expect(
            SessionBelt.secondsLeft(
                plan: plan(limit: .unlimited, bedtime: "11:00-07:00", lockout: .logout, bedtimeLockout: .network, now: now, screen: 0),
                onlyAllowedApps: false) == nil)
        // The reverse: the internet off at the limit, logout at bedtime: bedtime, whatever the limit.
        #expect(
            SessionBelt.secondsLeft(
                plan: plan(bedtime: "13:00-07:00", lockout: .network, bedtimeLockout: .logout, now: now, screen: 7_000),
                onlyAllowedApps: false) == 3_600)
        #expect(
            SessionBelt.secondsLeft(
                plan: plan(bedtime: "13:00-07:00", lockout: .network, bedtimeLockout: .logout, now: now, screen: 7_200),
                onlyAllowedApps: false) == 3_600, "the limit is used up: the internet is off, the session goes on until bedtime")
    }

    /// While the agent keeps a session locked (no time left under `lock`) it moves the belt on before
    /// systemd would end the session: at least a horizon away at every pass (every 3 s while locked),
    /// rewritten once per horizon; under `logout` the cap is now plus the grace.
    @Test func aLockedSessionsBeltIsMovedOnBeforeItComes() {
        let grace: Int64 = 60_000
        let horizon = SessionBelt.lockedHorizonSeconds * 1000
        let locked = plan(lockout: .lock, now: "2026-06-05T12:00Z", screen: 7_200)
        #expect(locked.blocked && SessionBelt.secondsLeft(plan: locked, onlyAllowedApps: false) == 0)
        var set: Int64? = nil
        var rewrites = 0
        for now in stride(from: Int64(123_456), through: 3_723_456, by: 3_000) {
            let wanted = SessionBelt.deadline(plan: locked, onlyAllowedApps: false, now: now, graceMilliseconds: grace)
            if SessionBelt.needsUpdate(current: .some(set), wanted: wanted, graceMilliseconds: grace) {
                set = wanted
                rewrites += 1
            }
            #expect(set! - now >= horizon, "at \(now) ms the cap was \(set!)")
            #expect(set! - now <= 2 * horizon + grace, "at \(now) ms the cap was \(set!)")
        }
        // One rewrite per horizon (180 s) over an hour, not one per pass.
        #expect(rewrites >= 20 && rewrites <= 21, "\(rewrites) rewrites")
        let loggedOut = plan(lockout: .logout, now: "2026-06-05T12:00Z", screen: 7_200)
        #expect(SessionBelt.deadline(plan: loggedOut, onlyAllowedApps: false, now: 5_000, graceMilliseconds: grace) == 65_000)
        #expect(SessionBelt.deadline(plan: locked, onlyAllowedApps: true, now: 5_000, graceMilliseconds: grace) == nil)
    }

    @Test func theBeltIsRewrittenWhenTheDeadlineMovesEarlierOrPastTheGrace() {
        let grace: Int64 = 60_000
        #expect(SessionBelt.needsUpdate(current: nil, wanted: nil, graceMilliseconds: grace), "never set: set it")
        #expect(SessionBelt.needsUpdate(current: .some(nil), wanted: 100_000, graceMilliseconds: grace))
        #expect(SessionBelt.needsUpdate(current: .some(100_000), wanted: nil, graceMilliseconds: grace))
        #expect(!SessionBelt.needsUpdate(current: .some(nil), wanted: nil, graceMilliseconds: grace))
        #expect(!SessionBelt.needsUpdate(current: .some(100_000), wanted: 101_000, graceMilliseconds: grace), "jitter")
        #expect(!SessionBelt.needsUpdate(current: .some(100_000), wanted: 160_000, graceMilliseconds: grace), "idle time within the grace")
        #expect(SessionBelt.needsUpdate(current: .some(100_000), wanted: 160_001, graceMilliseconds: grace), "a grant")
        #expect(SessionBelt.needsUpdate(current: .some(100_000), wanted: 97_000, graceMilliseconds: grace), "a lower limit")
    }
}
