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

    func plan(limit: TimeAllowance = .minutes(120), bedtime: String = "off", lockout: Lockout, now: String, screen: Int64)
        -> EnforcementPlan
    {
        let policy = Policy(
            user: "kid", dailyLimit: limit, bedtime: try! BedtimeWindow.parse(bedtime), apps: [], lockout: lockout, timezone: "UTC")
        let schedule = Schedule(policy: policy, zone: zoneRules("UTC"), adjustments: [:])
        return Enforcement.plan(
            schedule: schedule, now: utc(now), usage: DayUsage(screenSeconds: screen), running: ["firefox"], tracked: ["firefox"])
    }

    @Test func theBeltIsTheTimeLeftUnderLogoutAndLockAndNoneOtherwise() {
        let now = "2026-06-05T12:00Z"
        #expect(SessionBelt.secondsLeft(plan: plan(lockout: .logout, now: now, screen: 3_600), lockout: .logout, onlyAllowedApps: false) == 3_600)
        #expect(SessionBelt.secondsLeft(plan: plan(lockout: .lock, now: now, screen: 7_000), lockout: .lock, onlyAllowedApps: false) == 200)
        // Bedtime before the limit runs out: bedtime.
        #expect(
            SessionBelt.secondsLeft(
                plan: plan(bedtime: "12:10-07:00", lockout: .logout, now: now, screen: 0), lockout: .logout, onlyAllowedApps: false)
                == 600)
        // No time left: now.
        #expect(SessionBelt.secondsLeft(plan: plan(lockout: .logout, now: now, screen: 7_200), lockout: .logout, onlyAllowedApps: false) == 0)
        // Unlimited with no bedtime, always-allowed apps alone, and lockouts that never end a session: no cap.
        #expect(
            SessionBelt.secondsLeft(plan: plan(limit: .unlimited, lockout: .logout, now: now, screen: 9_000), lockout: .logout, onlyAllowedApps: false)
                == nil)
        #expect(SessionBelt.secondsLeft(plan: plan(lockout: .logout, now: now, screen: 3_600), lockout: .logout, onlyAllowedApps: true) == nil)
        #expect(SessionBelt.secondsLeft(plan: plan(lockout: .apps, now: now, screen: 3_600), lockout: .apps, onlyAllowedApps: false) == nil)
        #expect(SessionBelt.secondsLeft(plan: plan(lockout: .none, now: now, screen: 3_600), lockout: .none, onlyAllowedApps: false) == nil)
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
