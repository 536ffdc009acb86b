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
