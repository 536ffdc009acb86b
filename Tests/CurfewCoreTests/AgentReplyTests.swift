import Testing

@testable import CurfewCore

/// The agent's replies encoded through Codable over `JSONValue`: the same canonical bytes as the
/// hand-built objects they replace, and read back by the same types without Foundation.
@Suite struct AgentReplyTests {
    @Test func refusalsKeepTheirBytes() {
        let refusal = AgentError(.notPermitted, "you may only see your own status")
        #expect(refusal.reply.canonicalString == #"{"error":"not-permitted","message":"you may only see your own status","ok":false}"#)
    }

    @Test func loginVerdictsAndSelfExtensionsKeepTheirFields() {
        #expect(AgentReply(message: "ok", allowed: true).json.canonicalString == #"{"allowed":true,"message":"ok","ok":true}"#)
        let use = SelfExtensionUse(minutes: 15, date: "2026-11-25", used: 1, perWeek: 3, limitMinutes: nil)
        // limitMinutes is sent as null, and `curfew extend --json` prints the fields in this order.
        #expect(use.json.prettyString == JSONValue.object(
            JSONObject([("minutes", .int(15)), ("date", .string("2026-11-25")), ("used", .int(1)), ("perWeek", .int(3)), ("limitMinutes", .null)])
        ).prettyString)
        #expect(AgentReply(message: use.message, extended: use).json.canonicalString
            == #"{"extension":{"date":"2026-11-25","limitMinutes":null,"minutes":15,"perWeek":3,"used":1},"message":"15m more today (1 of 3 this week)","ok":true}"#)
    }

    @Test func requestsAreSentWithEveryField() {
        let request = AgentReply.RecordedRequest(
            id: 4, user: "kid", minutes: 30, reason: nil, createdMs: 1_000, status: "pending", answeredMs: nil, grantedMinutes: nil,
            answeredBy: nil, cause: "bedtime", app: nil)
        #expect(AgentReply(request: request).json.canonicalString
            == #"{"ok":true,"request":{"answeredBy":null,"answeredMs":null,"app":null,"cause":"bedtime","createdMs":1000,"grantedMinutes":null,"id":4,"minutes":30,"reason":null,"status":"pending","user":"kid"}}"#)
    }

    @Test func statusRoundTripsAndKeepsItsNulls() throws {
        var report = StatusReport(
            user: "kid", date: "2026-11-25", timezone: "UTC", screenSeconds: 60, otherComputersSeconds: nil, limitMinutes: nil,
            extraMinutes: 0, bedtimeDelayMinutes: 0, remainingSeconds: nil, state: .allowed, reason: nil, nextChange: nil,
            allowedAgainAt: nil, counting: true, apps: [StatusReport.App(app: "minecraft", seconds: 60, running: true)],
            rules: [StatusReport.Rule(app: "steam", rule: "block", limitMinutes: nil, seconds: 0)],
            blocked: [StatusReport.Window(start: "21:00", end: "24:00", state: "bedtime", window: nil)], selfExtension: nil)
        report.downtimeDelayMinutes = ["school": 30, "homework": 15]
        let json = report.json
        guard case .object(let object) = json else {
            Issue.record("not an object")
            return
        }
        #expect(object.keys == [
            "user", "date", "timezone", "screenSeconds", "limitMinutes", "extraMinutes", "bedtimeDelayMinutes", "remainingSeconds",
            "state", "reason", "downtimeDelayMinutes", "nextChange", "allowedAgainAt", "counting", "apps", "rules", "blocked",
        ])
        #expect(object["limitMinutes"] == .null)
        #expect(object["downtimeDelayMinutes"] == .object(JSONObject([("homework", .int(15)), ("school", .int(30))])))
        #expect(object["rules"] == .array([.object(JSONObject([("app", .string("steam")), ("rule", .string("block")), ("limitMinutes", .null), ("seconds", .int(0))]))]))
        let line = AgentReply(status: report).json.canonicalString
        let back = try JSONValueDecoder().decode(AgentReply.self, from: line)
        #expect(back.status == report)
        #expect(back.ok)
    }

    @Test func unknownRefusalsReadAsFailures() throws {
        let reply = try JSONValueDecoder().decode(AgentReply.self, from: #"{"ok":false,"error":"from-the-future","message":"no"}"#)
        #expect(reply.error == .failed)
        #expect(reply.message == "no")
    }

    @Test func theDecoderIsStrictAboutTypes() {
        #expect(throws: DecodingError.self) { try JSONValueDecoder().decode(AgentReply.self, from: #"{"ok":"yes"}"#) }
        #expect(throws: DecodingError.self) { try JSONValueDecoder().decode(AgentReply.self, from: #"{"message":"no ok"}"#) }
        #expect(throws: DecodingError.self) { try JSONValueDecoder().decode(Int8.self, from: .int(300)) }
        #expect(throws: (any Error).self) { try JSONValueDecoder().decode(AgentReply.self, from: #"{"ok":true,"ok":false}"#) }
    }

    @Test func jsonValuesPassThroughUnchanged() throws {
        let value = JSONValue.object(JSONObject([("b", .int(1)), ("a", .array([.null, .bool(true), .string("x")]))]))
        #expect(try JSONValueEncoder().encode(value) == value)
        #expect(try JSONValueDecoder().decode(JSONValue.self, from: value) == value)
        #expect(try JSONValueEncoder().encode(["x": [1, 2]]) == .object(JSONObject([("x", .array([.int(1), .int(2)]))])))
        #expect(throws: EncodingError.self) { try JSONValueEncoder().encode(1.5) }
    }

    @Test func rulesAndUsageKeepTheirShape() throws {
        let day = try LocalDate.parse("2026-11-25")
        let extra = AgentReply.DayExtra(
            date: day, adjustment: DayAdjustment(extraMinutes: 15, bedtimeDelayMinutes: 0, appExtraMinutes: ["minecraft": 10]))
        let rules = AgentReply(policy: .object(JSONObject()), adjustments: [extra]).json.canonicalString
        #expect(rules == #"{"adjustments":[{"appExtraMinutes":{"minecraft":10},"bedtimeDelayMinutes":0,"date":"2026-11-25","extraMinutes":15}],"ok":true,"policy":{}}"#)
        #expect(try JSONValueDecoder().decode(AgentReply.self, from: rules).adjustments == [extra])
        let usage = AgentReply(
            rows: [UsageRow(day: day, hour: 14, app: "minecraft", milliseconds: 600_000)],
            events: [AgentReply.SavedEvent(time: Instant(milliseconds: 1), kind: "time-requested", message: "asked", data: nil)]
        ).json.canonicalString
        #expect(usage == #"{"events":[{"data":null,"kind":"time-requested","message":"asked","time":1}],"ok":true,"rows":[["2026-11-25",14,"minecraft",600000]]}"#)
        let back = try JSONValueDecoder().decode(AgentReply.self, from: usage)
        #expect(back.rows == [UsageRow(day: day, hour: 14, app: "minecraft", milliseconds: 600_000)])
        #expect(back.events?.first?.data == nil)
    }
}
