import CurfewCore
import CurfewLinux
import CurfewTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Time zones come from the system's tz database (`$TZDIR`, else /usr/share/zoneinfo), not from a
/// copy frozen into the binaries: zones compiled by `zic` into a temporary directory, which no
/// other program knows.
@Suite(.serialized)
struct ZoneDatabaseTests {
    /// Summer time from the first Saturday of April at 02:00 to the first Saturday of October at
    /// 03:00, on +02:00: a rule no real zone has.
    static let testland = """
        Rule Tl 2020 max - Apr Sat>=1 2:00 1:00 S
        Rule Tl 2020 max - Oct Sat>=1 3:00 0 -
        Zone Curfew/Testland 2:00 Tl TL%s

        """

    @Test func aZoneOnlyTheSystemDatabaseKnowsWorksInAPolicyAndInSchedule() throws {
        let zones = try CompiledZones()
        defer { zones.remove() }
        try zones.compile(Self.testland)
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        try runner.ok(["init"])
        try runner.ok(["user", "add", "kid"])
        try runner.ok(["bedtime", "kid", "21:00-02:30"])
        let tzdir = ["TZDIR": zones.directory]
        // Without the directory the name is unknown, and nothing changes.
        let unknown = try runner.run(["timezone", "kid", "Curfew/Testland"])
        #expect(unknown.status == 64, "\(unknown)")
        #expect(
            unknown.stderr == "curfew: time zone must be an IANA zone name such as Europe/Berlin, got \"Curfew/Testland\"\n",
            "\(unknown)")
        let set = try runner.run(["timezone", "kid", "Curfew/Testland"], environment: tzdir)
        #expect(set.status == 0 && set.stdout.hasPrefix("kid: time zone is now Curfew/Testland"), "\(set)")
        // 2026-04-04 is the first Saturday of April: 02:00 to 03:00 does not happen.
        let spring = try runner.run(["schedule", "kid", "--date", "2026-04-04"], environment: tzdir)
        #expect(
            spring.stdout == """
                kid on Saturday 2026-04-04 (Curfew/Testland, a day of 23h)
                  00:00-03:00  bedtime  2h
                  03:00-21:00  allowed  18h
                  21:00-24:00  bedtime  3h
                daily limit 2h within 18h allowed

                """, "\(spring)")
        let json = try runner.run(["schedule", "kid", "--date", "2026-04-04", "--json"], environment: tzdir)
        #expect(json.stdout.contains(#""end": "2026-04-04T03:00:00+03:00""#), "\(json)")
        let autumn = try runner.run(["schedule", "kid", "--date", "2026-10-03"], environment: tzdir)
        #expect(autumn.stdout.hasPrefix("kid on Saturday 2026-10-03 (Curfew/Testland, a day of 25h)\n"), "\(autumn)")
        let shown = try runner.run(["policy", "show", "kid"], environment: tzdir)
        #expect(shown.status == 0 && shown.stdout.contains("Curfew/Testland"), "\(shown)")
    }

    /// A tzdata upgrade reaches the running agent: the zone's file is replaced by one with another
    /// offset, and within the agent's check interval its login verdict follows the new rules.
    @Test(.enabled(if: getuid() == 0, "needs root: a test account and the agent"))
    func aRuleChangeReachesARunningAgent() throws {
        let zones = try CompiledZones()
        defer { zones.remove() }
        try zones.compile("Zone Curfew/Shift 0:00 - SHA\n")
        let account = try TestAccount.ensure("curfewzone")
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        let tzdir = ["TZDIR": zones.directory]
        try runner.ok(["init"])
        try runner.ok(["user", "add", account.name])
        // Bedtime from two hours before now to two hours after, on the zone's first clock (UTC).
        let now = Int64(Date().timeIntervalSince1970)
        try runner.ok(["bedtime", account.name, "\(utcClock(now - 7200))-\(utcClock(now + 7200))"])
        let set = try runner.run(["timezone", account.name, "Curfew/Shift"], environment: tzdir)
        #expect(set.status == 0, "\(set)")
        let agent = try AgentProcess(runner, extraEnvironment: tzdir, arguments: ["--zone-recheck", "1"])
        defer { agent.killHard() }
        // The CLI asks the agent; it has no TZDIR of its own, so it could not judge the zone itself.
        let socket = ["check-login", "--user", account.name, "--socket", agent.socketPath]
        var before = try runner.run(socket)
        for _ in 0..<40 where before.status != 77 {
            usleep(250_000)
            before = try runner.run(socket)
        }
        #expect(before.status == 77, "\(before)\n\(agent.log)")
        // Local words: the end of a bedtime after midnight is "tomorrow at" its time.
        let again = ((now + 7200) / 86_400 > now / 86_400 ? "" : "at ") + utcWhen(now + 7200, now: now)
        #expect(before.stdout.contains("bedtime. You may log in again \(again)"), "\(before)")
        // The new rules: twelve hours east. Now is midday on the zone's clock, far from bedtime.
        try zones.compile("Zone Curfew/Shift 0:00 - SHA 2000\n 12:00 - SHB\n")
        var after = try runner.run(socket)
        let deadline = Date().addingTimeInterval(30)
        while after.status != 0 && Date() < deadline {
            usleep(250_000)
            after = try runner.run(socket)
        }
        #expect(after.status == 0, "the agent kept the old rules\n\(after)\n\(agent.log)")
    }
}
