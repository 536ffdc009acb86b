import Testing

@testable import CurfewCore

@Suite("Instants")
struct InstantTests {
    @Test("seconds and milliseconds are the same instant, whole seconds rounded toward minus infinity")
    func units() {
        #expect(Instant(seconds: 1_795_000_000).milliseconds == 1_795_000_000_000)
        #expect(Instant(seconds: -2).milliseconds == -2_000)
        #expect(Instant(milliseconds: 1_795_000_000_999).seconds == 1_795_000_000)
        #expect(Instant(milliseconds: 1_000).seconds == 1)
        #expect(Instant(milliseconds: 999).seconds == 0)
        #expect(Instant(milliseconds: 0).seconds == 0)
        #expect(Instant(milliseconds: -1).seconds == -1)
        #expect(Instant(milliseconds: -1_000).seconds == -1)
        #expect(Instant(milliseconds: -1_001).seconds == -2)
        #expect(Instant(seconds: Instant(milliseconds: -1_500).seconds) == Instant(milliseconds: -2_000))
        #expect(Instant.epoch == Instant(seconds: 0))
    }

    @Test("ordered by time; a duration moves an instant, two instants are a duration apart")
    func arithmetic() {
        let start = Instant(milliseconds: 10_500)
        #expect(start < Instant(milliseconds: 10_501))
        #expect(!(start < start))
        #expect(Instant(milliseconds: -1) < Instant.epoch)
        #expect(start + .seconds(2) == Instant(milliseconds: 12_500))
        #expect(start - .milliseconds(11_000) == Instant(milliseconds: -500))
        #expect(start + .seconds(60) == Instant(seconds: 70) + .milliseconds(500))
        #expect(Instant(milliseconds: 12_750) - start == .milliseconds(2_250))
        #expect(start - Instant(milliseconds: 12_750) == .milliseconds(-2_250))
        // What is finer than a millisecond is dropped.
        #expect(start + .microseconds(1_999) == Instant(milliseconds: 10_501))
        #expect(start - .microseconds(1_999) == Instant(milliseconds: 10_499))
        var moving = start
        moving += .seconds(1)
        #expect(moving == Instant(milliseconds: 11_500))
        moving -= .milliseconds(1_501)
        #expect(moving == Instant(milliseconds: 9_999))
    }

    @Test("a duration in whole milliseconds toward zero, in whole seconds toward minus infinity")
    func durations() {
        #expect(Duration.milliseconds(-1_500).wholeMilliseconds == -1_500)
        #expect(Duration.microseconds(-1_999).wholeMilliseconds == -1)
        #expect(Duration.seconds(3).wholeMilliseconds == 3_000)
        #expect(Duration.milliseconds(2_999).wholeSeconds == 2)
        #expect(Duration.milliseconds(-1).wholeSeconds == -1)
        #expect(Duration.milliseconds(-1_000).wholeSeconds == -1)
        #expect(Duration.milliseconds(-1_001).wholeSeconds == -2)
    }

    @Test("described in UTC to the millisecond, before the epoch too")
    func description() {
        #expect("\(Instant(milliseconds: 1_795_000_000_250))" == "2026-11-18T11:06:40.250Z")
        #expect("\(Instant(seconds: 0))" == "1970-01-01T00:00:00.000Z")
        #expect("\(Instant(milliseconds: -1))" == "1969-12-31T23:59:59.999Z")
        #expect("\(Instant(milliseconds: -1_005))" == "1969-12-31T23:59:58.995Z")
    }

    @Test("the local time of an instant is that of its whole second")
    func localTime() {
        let zone = ZoneRules(identifier: "X", data: .fixed(offset: 3_600, abbreviation: "X"))
        let instant = Instant(milliseconds: 86_400_000 - 3_600_000 - 1)
        #expect(zone.localTime(at: instant) == zone.localTime(at: Int64(86_400 - 3_600 - 1)))
        #expect(zone.localTime(at: instant).secondOfDay == 86_399)
        #expect(zone.localTime(at: Instant(milliseconds: -1)) == zone.localTime(at: Int64(-1)))
        // A day begins at its local midnight: 1970-01-02 00:00 at UTC+1 is 23:00 UTC on the 1st.
        let second = zone.localTime(at: Int64(0)).date.adding(days: 1)
        #expect(zone.start(of: second) == Instant(seconds: 86_400 - 3_600))
    }
}
