import Testing

@testable import CurfewCore

@Suite struct PINRulesTests {
    /// Each error names the rule and the shape of what was typed, never the PIN.
    @Test(arguments: [
        ("123", "a PIN must be 4 to 12 digits (0-9), got 3 digits"),
        ("", "a PIN must be 4 to 12 digits (0-9), got 0 digits"),
        ("1234567890123", "a PIN must be 4 to 12 digits (0-9), got 13 digits"),
        ("12a4", "a PIN must be 4 to 12 digits (0-9), got 4 characters, 1 of them not a digit"),
        ("ab cd", "a PIN must be 4 to 12 digits (0-9), got 5 characters, 5 of them not digits"),
        ("١٢٣٤", "a PIN must be 4 to 12 digits (0-9), got 4 characters, 4 of them not digits"),
    ])
    func refusesPINsOutsideTheRule(pin: String, message: String) {
        #expect(throws: PolicyError(message)) { try PINRules.validate(pin) }
    }

    @Test(arguments: ["0000", "2468", "123456789012"])
    func acceptsFourToTwelveDigits(pin: String) throws {
        try PINRules.validate(pin)
    }

    @Test func fiveTriesInFifteenMinutesThenWaitForTheOldest() throws {
        let now = Instant(seconds: 1_800_000_000)
        func ago(_ seconds: Int64) -> Instant { now - .seconds(seconds) }
        try PINRules.checkRoom(triesInWindow: [], now: now)
        try PINRules.checkRoom(triesInWindow: [ago(800), ago(600), ago(10), ago(5)], now: now)
        #expect(throws: PolicyError("too many PIN tries: 5 in the last 15 minutes; try again in 2 min")) {
            try PINRules.checkRoom(triesInWindow: [ago(10), ago(800), ago(600), ago(5), ago(1)], now: now)
        }
        #expect(throws: PolicyError("too many PIN tries: 5 in the last 15 minutes; try again in 15 min")) {
            try PINRules.checkRoom(triesInWindow: [now, now, now, now, now], now: now)
        }
    }

    @Test(arguments: [
        // offered, asked, approved in the last 24 hours, maximum: granted
        (30, 30, 0, 60, 30),
        (480, 20, 0, 60, 20),  // more than the request asked: what it asked
        (60, 60, 20, 60, 40),  // stacked on earlier approvals: what is left of the day
        (30, 30, 60, 60, 0),  // the day's maximum used up: nothing
        (30, 30, 90, 60, 0),  // a lowered maximum: nothing, never less than nothing
        (15, 60, 0, 480, 15),  // less than asked, when the parent approves less
    ])
    func anApprovalGivesAtMostTheRequestAndWhatIsLeftOfTheDay(
        offered: Int, asked: Int, approvedInDay: Int, maxPerDay: Int, granted: Int
    ) {
        #expect(PINRules.grantable(offered: offered, asked: asked, approvedInDay: approvedInDay, maxPerDay: maxPerDay) == granted)
    }

    @Test func wrongTriesInARowWaitLongerAndTenADayAtMost() throws {
        let now = Instant(seconds: 1_800_000_000)
        func ago(_ minutes: Int64, right: Bool = false) -> PINRules.Try { PINRules.Try(time: now - .seconds(minutes * 60), right: right) }
        func refusal(_ tries: [PINRules.Try]) -> String? {
            do throws(PolicyError) {
                try PINRules.checkRoom(tries: tries, now: now)
                return nil
            } catch {
                return error.message
            }
        }
        let table: [([PINRules.Try], String?)] = [
            ([], nil),
            // The 15-minute window as before, right tries included.
            ([ago(5), ago(4, right: true), ago(3), ago(2), ago(1)], "too many PIN tries: 5 in the last 15 minutes; try again in 10 min"),
            // Five wrong in a row, the window over: the sixth may come 15 minutes after the fifth.
            ([ago(40), ago(39), ago(38), ago(37), ago(36)], nil),
            ([ago(20), ago(19), ago(18), ago(17), ago(10)], "too many wrong PINs: 5 in a row; try again in 5m"),
            // Six in a row: 30 minutes after the last; seven: an hour; nine: four hours.
            ([ago(60), ago(59), ago(58), ago(57), ago(56), ago(20)], "too many wrong PINs: 6 in a row; try again in 10m"),
            ([ago(60), ago(59), ago(58), ago(57), ago(56), ago(30)], nil),
            ([ago(90), ago(89), ago(88), ago(87), ago(86), ago(50), ago(20)], "too many wrong PINs: 7 in a row; try again in 40m"),
            ([ago(300), ago(299), ago(298), ago(297), ago(296), ago(250), ago(200), ago(100), ago(30)], "too many wrong PINs: 9 in a row; try again in 3h30m"),
            // A right try ends the row.
            ([ago(60), ago(59), ago(58), ago(57), ago(56), ago(50, right: true), ago(20)], nil),
            // Ten wrong in 24 hours, whatever came between: wait until the oldest is a day old.
            (
                [ago(1400), ago(1399, right: true), ago(1300), ago(1299, right: true), ago(1200), ago(1100), ago(1000), ago(900), ago(800),
                 ago(700, right: true), ago(600), ago(500), ago(400)],
                "too many wrong PINs: 10 in the last 24 hours; try again in 40m"
            ),
            // Tries older than a day count for nothing.
            ([ago(1500), ago(1499), ago(1498), ago(1497), ago(1496), ago(1495), ago(1494), ago(1493), ago(1492), ago(1491)], nil),
        ]
        for (tries, expected) in table {
            #expect(refusal(tries) == expected, "\(tries.map { ($0.time.seconds - now.seconds) / 60 })")
        }
    }

    @Test func approvePINIsBoundedBeforeTheAgentLooksAtIt() {
        #expect(AgentRequest.parse(#"{"command":"approve-pin","pin":"2468","minutes":30}"#) == .success(.approvePIN(pin: "2468", minutes: 30)))
        #expect(AgentRequest.parse(AgentRequest.approvePIN(pin: "2468", minutes: 30).line) == .success(.approvePIN(pin: "2468", minutes: 30)))
        for line in [
            #"{"command":"approve-pin","pin":"1234567890123","minutes":30}"#, #"{"command":"approve-pin","pin":2468,"minutes":30}"#,
            #"{"command":"approve-pin","minutes":30}"#,
        ] {
            #expect(AgentRequest.parse(line) == .failure(AgentError(.badRequest, "\"pin\" must be a string; a PIN must be 4 to 12 digits (0-9)")))
        }
        for minutes in ["0", "481", "-5", "\"30\"", "null"] {
            #expect(
                AgentRequest.parse(#"{"command":"approve-pin","pin":"2468","minutes":\#(minutes)}"#)
                    == .failure(AgentError(.badRequest, "\"minutes\" must be a whole number from 1 to 480")), "\(minutes)")
        }
    }
}
