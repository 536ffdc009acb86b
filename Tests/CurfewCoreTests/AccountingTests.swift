import Testing

@testable import CurfewCore

@Suite("Accounting") struct AccountingTests {
    let zone = ZoneRules(identifier: "Europe/Berlin")!
    var policy: Policy {
        var policy = Policy.defaults(for: "kid")
        policy.apps = [AppRule(app: "gcompris", rule: .allow), AppRule(app: "steam", rule: .block)]
        return policy
    }
    // 2026-11-21 09:30 in Berlin (UTC+1).
    let start = Instant(seconds: 1_795_249_800)

    func slices(_ counts: Bool, _ apps: Set<String>) -> [String: Int64] {
        Dictionary(
            uniqueKeysWithValues: Accounting.slices(
                user: "kid", observation: UserObservation(sessionCounts: counts, runningApps: apps), policy: policy,
                zone: zone, intervalStart: start, elapsedMilliseconds: 1_000
            ).map { ($0.0.app, $0.1) })
    }

    @Test func screenAndAppTimeCountOnlyWhileTheSessionCounts() {
        #expect(slices(false, ["minecraft"]).isEmpty)
        #expect(slices(true, []) == ["": 1_000])
        #expect(slices(true, ["minecraft", "firefox"]) == ["": 1_000, "minecraft": 1_000, "firefox": 1_000])
        // Shells count as terminal, once, beside the tools that already are.
        #expect(slices(true, ["bash", "zsh", "terminal"]) == ["": 1_000, "terminal": 1_000])
        #expect(slices(true, ["systemd", "dbus-daemon"]) == ["": 1_000])
    }

    @Test func alwaysAllowedAppsAloneDoNotCountTowardTheLimit() {
        #expect(slices(true, ["gcompris"]) == ["gcompris": 1_000])
        // A shell does not make the allowed app "not alone" (every console login has one); its time is
        // the app terminal's.
        #expect(slices(true, ["gcompris", "bash", "systemd"]) == ["gcompris": 1_000, "terminal": 1_000])
        #expect(slices(true, ["gcompris", "systemd"]) == ["gcompris": 1_000])
        #expect(slices(true, ["gcompris", "minecraft"]) == ["": 1_000, "gcompris": 1_000, "minecraft": 1_000])
    }

    @Test func slicesAreFiledUnderTheLocalDayAndHour() {
        let keys = Accounting.slices(
            user: "kid", observation: UserObservation(sessionCounts: true, runningApps: []), policy: policy, zone: zone,
            intervalStart: start, elapsedMilliseconds: 250)
        #expect(keys.map(\.0) == [UsageKey(user: "kid", day: LocalDate(year: 2026, month: 11, day: 21)!, hour: 9, app: "")])
    }

    @Test(arguments: [
        // wall, monotonic, boottime -> suspended, jump
        (Int64(1_000), Int64(1_000), Int64(1_000), Int64(0), Int64(0)),
        (601_000, 1_000, 1_000, 0, 600_000),  // clock set forward 10 minutes
        (-899_000, 1_000, 1_000, 0, -900_000),  // clock set back 15 minutes
        (3_601_000, 1_000, 3_601_000, 3_600_000, 0),  // an hour of suspend
        (2_500, 1_000, 1_000, 0, 0),  // small drift within tolerance
    ])
    func clockMovementsAreTold(wall: Int64, monotonic: Int64, boottime: Int64, suspended: Int64, jump: Int64) {
        let movement = Accounting.classify(wallDelta: wall, monotonicDelta: monotonic, boottimeDelta: boottime)
        #expect(movement == ClockMovement(suspendedMilliseconds: suspended, wallJumpMilliseconds: jump))
    }
}
