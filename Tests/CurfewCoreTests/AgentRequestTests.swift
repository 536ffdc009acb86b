import CurfewCore
import Testing

/// The socket's requests as one Codable type: what the CLI and the indicator send is what the agent
/// reads, and every broken field is refused with its rule.
@Suite struct AgentRequestTests {
    static let requests: [AgentRequest] = [
        .status(user: nil), .status(user: "kid"), .checkLogin(user: "kid", service: "su"), .checkLogin(user: "kid", service: nil),
        .request(minutes: 30, reason: "homework", app: nil), .request(minutes: 15, reason: nil, app: "minecraft"), .extend,
        .watch(user: nil), .rules(user: "kid"),
        .usage(user: nil, from: try! LocalDate.parse("2026-11-01"), to: try! LocalDate.parse("2026-11-25")),
        .approvePIN(pin: "2468", minutes: 30),
    ]

    @Test(arguments: requests) func everyRequestReadsBackAsSent(request: AgentRequest) {
        #expect(AgentRequest.parse(request.line) == .success(request))
    }

    @Test func theLinesAreTheOnesOlderAgentsRead() {
        #expect(AgentRequest.status(user: nil).line == #"{"command":"status"}"#)
        #expect(AgentRequest.checkLogin(user: "kid", service: "su").line == #"{"command":"check-login","service":"su","user":"kid"}"#)
        #expect(AgentRequest.request(minutes: 30, reason: nil, app: nil).line == #"{"command":"request","minutes":30,"reason":null}"#)
        #expect(
            AgentRequest.request(minutes: 30, reason: "hw", app: "minecraft").line
                == #"{"app":"minecraft","command":"request","minutes":30,"reason":"hw"}"#)
        #expect(
            AgentRequest.usage(user: "kid", from: try! LocalDate.parse("2026-11-01"), to: try! LocalDate.parse("2026-11-02")).line
                == #"{"command":"usage","from":"2026-11-01","to":"2026-11-02","user":"kid"}"#)
    }

    @Test(arguments: [
        ("[1]", "the request must be a JSON object with a command"),
        (#"{"command": 3}"#, "the request must be a JSON object with a command"),
        ("not json", "the request must be a JSON object with a command"),
        (#"{"command": "reboot"}"#, #"unknown command "reboot""#),
        (#"{"command": "status", "user": 7}"#, #""user" must be a string"#),
        (#"{"command": "check-login"}"#, "check-login needs a user"),
        (#"{"command": "request", "minutes": "30"}"#, #""minutes" must be a whole number"#),
        (#"{"command": "request", "minutes": 30, "reason": 1}"#, #""reason" must be a string"#),
        (#"{"command": "request", "minutes": 30, "app": false}"#, #""app" must be a string"#),
        (#"{"command": "usage", "from": "2026-11-01"}"#, #"usage needs "from" and "to" dates (YYYY-MM-DD)"#),
        (#"{"command": "usage", "from": "2026-11-02", "to": "2026-11-01"}"#, "usage covers 1 to 92 days, got 2026-11-02 to 2026-11-01"),
    ])
    func aBrokenFieldIsRefusedWithItsRule(line: String, rule: String) {
        #expect(AgentRequest.parse(line) == .failure(AgentError(.badRequest, rule)))
    }

    @Test func lenientFieldsStayLenient() {
        // A service that is not a string is as good as none; an empty reason is no reason.
        #expect(AgentRequest.parse(#"{"command":"check-login","user":"kid","service":5}"#) == .success(.checkLogin(user: "kid", service: nil)))
        #expect(
            AgentRequest.parse(#"{"command":"request","minutes":30,"reason":""}"#) == .success(.request(minutes: 30, reason: nil, app: nil)))
        #expect(AgentRequest.parse(#"{"command":"status","user":null}"#) == .success(.status(user: nil)))
    }
}
