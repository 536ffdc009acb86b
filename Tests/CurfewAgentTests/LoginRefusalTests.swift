import CurfewCore
import CurfewLinux
import CurfewStore
import Foundation
import Testing

@testable import CurfewAgent

/// A child at bedtime who asks for logins in a loop (`su` to themself runs PAM's account check each
/// time): every one is refused, a bounded number is recorded, and the next recorded one says how
/// many were not.
@Suite struct LoginRefusalTests {
    @Test func refusalsInALoopAreRefusedEveryTimeAndRecordedWithinABudget() throws {
        let (agent, root) = try makeTestAgent(user: "nobody", prefix: "curfew-logins", adjust: { $0.dailyLimit = .minutes(0) })
        defer { try? FileManager.default.removeItem(atPath: root) }
        let now = Instant(seconds: Int64(Date().timeIntervalSince1970))
        let verdicts = (0..<500).map { _ in agent.checkLogin(user: "nobody", service: "su", now: now) }
        #expect(verdicts.allSatisfy { !$0.allowed })
        let refused = try agent.store.read { try EventLog.list(user: "nobody", since: nil, $0) }.filter { $0.kind == .loginRefused }
        #expect(refused.count == AgentState.loginRefusalBurst)
        #expect(refused.allSatisfy { $0.data == .object(JSONObject([("service", .string("su"))])) })
        // A minute later the next refusal is recorded, with the count of those that were not.
        #expect(agent.state.admitLoginRefusal(of: "nobody", monotonic: ClockReading.now().monotonic + 60_000) == 480)
        #expect(agent.state.admitLoginRefusal(of: "nobody", monotonic: ClockReading.now().monotonic + 60_000) == nil)
    }
}
