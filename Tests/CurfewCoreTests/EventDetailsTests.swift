import CurfewCore
import Testing

/// The audit log's event data as scripts read it: each shape's fields, in order, with `null` and
/// the optional fields exactly as the hand-built objects before them wrote them.
@Suite struct EventDetailsTests {
    func text(_ details: some Encodable) -> String {
        AgentEvent(time: .epoch, kind: .warning, message: "", details: details).data!.prettyString
            .split(separator: "\n").map { $0.trimmingPrefix(while: { $0 == " " }) }.joined()
    }

    @Test func eachShapeWritesItsFieldsInOrder() {
        #expect(
            text(EventDetails.Warning(subject: "app", remainingSeconds: 300, thresholdSeconds: 300, app: "minecraft"))
                == #"{"subject": "app","remainingSeconds": 300,"thresholdSeconds": 300,"app": "minecraft"}"#)
        #expect(
            text(EventDetails.Warning(subject: "screen", remainingSeconds: 60, thresholdSeconds: 60, app: nil))
                == #"{"subject": "screen","remainingSeconds": 60,"thresholdSeconds": 60}"#)
        #expect(
            text(EventDetails.Lockout(state: "bedtime", lockout: "logout", allowedAgainAt: nil))
                == #"{"state": "bedtime","lockout": "logout","allowedAgainAt": null}"#)
        #expect(text(EventDetails.Session(session: "3", tty: "tty2", why: nil)) == #"{"session": "3","tty": "tty2"}"#)
        #expect(text(EventDetails.Session(session: "3")) == #"{"session": "3"}"#)
        #expect(
            text(EventDetails.AppStopped(app: "steam", reason: "blocked", pids: [7, 9], execDenied: true))
                == #"{"app": "steam","reason": "blocked","pids": [7, 9],"execDenied": true}"#)
        #expect(
            text(EventDetails.AppStopped(app: "steam", reason: "blocked", pids: [], execDenied: false))
                == #"{"app": "steam","reason": "blocked","pids": []}"#)
        #expect(text(EventDetails.AppStopsCounted(app: "steam", count: 4)) == #"{"app": "steam","count": 4,"summary": true}"#)
        #expect(
            text(EventDetails.PINTry(right: false, minutes: 30, try: 2, of: 5)) == #"{"right": false,"minutes": 30,"try": 2,"of": 5}"#)
        #expect(
            text(EventDetails.Request(request: 4, minutes: 30, reason: nil, cause: "bedtime", app: nil))
                == #"{"request": 4,"minutes": 30,"reason": null,"cause": "bedtime","app": null}"#)
        #expect(
            text(EventDetails.SelfExtension(request: 5, minutes: 15, date: "2026-11-26", used: 1, perWeek: 3))
                == #"{"request": 5,"minutes": 15,"date": "2026-11-26","used": 1,"perWeek": 3,"reason": null}"#)
        #expect(text(EventDetails.LoginRefused(service: "sshd", unrecordedBefore: 0)) == #"{"service": "sshd"}"#)
        #expect(
            text(EventDetails.LoginRefused(service: "sshd", unrecordedBefore: 3)) == #"{"service": "sshd","unrecordedBefore": 3}"#)
        #expect(text(EventDetails.Network(uid: 1001)) == #"{"uid": 1001}"#)
        #expect(text(EventDetails.Summarised(count: 12, retentionDays: 30)) == #"{"count": 12,"retentionDays": 30}"#)
    }

    @Test func aGrantCarriesOnlyTheLiftsItHas() {
        let plain = EventDetails.Grant(record: "ab", date: "2026-11-26", minutes: 30, bedtimeDelayMinutes: 0, requestId: nil, lift: GrantLift())
        #expect(text(plain) == #"{"record": "ab","date": "2026-11-26","minutes": 30,"bedtimeDelayMinutes": 0,"requestId": null}"#)
        let lifted = EventDetails.Grant(
            record: "ab", date: "2026-11-26", minutes: 0, bedtimeDelayMinutes: 0, requestId: 7,
            lift: GrantLift(app: .init(app: "minecraft", minutes: 30), downtime: .init(window: "school", delayMinutes: 15), endsBreak: true))
        #expect(
            text(lifted)
                == #"{"record": "ab","date": "2026-11-26","minutes": 0,"bedtimeDelayMinutes": 0,"requestId": 7,"app": "minecraft","appMinutes": 30,"downtimeWindow": "school","downtimeDelayMinutes": 15,"endsBreak": true}"#
        )
    }
}
