import CurfewCore
import CurfewLinux
import CurfewStore
import CurfewSync
import Foundation
import Logging

/// A parent approves extra time on the child's own screen by typing the parent's PIN (`approve-pin`,
/// sent by the child's indicator). The agent checks it against `<state-dir>/parent-pin`, at most
/// `PINRules.maxTries` times per child in `PINRules.tryWindowSeconds`, counted from the `pin-try`
/// events in the database (so a restart does not reset them); each try is an event, right or wrong,
/// never the PIN. A right PIN publishes a grant signed with this computer's parent key that lifts what
/// blocks the child now, as `curfew approve` does for a request (`ExtraTime.plan`: more screen time, a
/// later bedtime or downtime window, the break ended), which the agent then applies like any other grant.
extension Agent {
    /// The outcome of one `approve-pin`.
    enum PINApproval {
        case granted(record: String, plan: ExtraTime.Plan)
        case refused(AgentError)
    }

    /// One try as the database counted it.
    private enum PINTry {
        case right
        case wrong(triesLeft: Int)
        /// The window's tries are used up: not checked, not recorded.
        case full(PolicyError)
    }

    func approveWithPIN(user: String, pin: String, minutes: Int, now: Instant) throws -> PINApproval {
        let pinFile = ParentPINFile(stateDirectory: configuration.stateDirectory)
        let hash: ParentPINHash
        do {
            hash = try pinFile.load()
        } catch .notSet {
            return .refused(
                AgentError(.noPIN, "no parent PIN is set on this computer; a parent can set one with: sudo curfew pin set"))
        } catch {
            logger.error("cannot read the parent's PIN", metadata: ["path": "\(pinFile.path)", "error": "\(error)"])
            return .refused(AgentError(.failed, "the parent's PIN cannot be read on this computer; nothing changed"))
        }
        // What the PIN would grant: what lifts the block in force now. Worked out before the PIN is
        // checked, so that a grant that would lift nothing costs the child no try.
        guard let schedule = state.schedule(of: user, systemZone: ZoneRules.system) else {
            return .refused(AgentError(.notPermitted, "\(user) is not managed on this computer"))
        }
        let block = ExtraTime.block(
            schedule: schedule, now: now, usage: Enforcement.dayUsage(schedule: schedule, live: state.live(of: user), now: now), app: nil)
        let plan: ExtraTime.Plan
        do {
            plan = try ExtraTime.plan(for: block, app: nil, minutes: minutes, user: user, schedule: schedule, now: now)
        } catch {
            return .refused(AgentError(.badRequest, error.message + "; nothing changed"))
        }
        let windowStart = now - .seconds(PINRules.tryWindowSeconds) + .milliseconds(1)
        // A child whose tries are used up costs no hashing.
        let earlier = try store.read { db in
            try EventLog.events(of: user, from: windowStart, before: nil, db).filter { $0.kind == .pinTry }
        }
        do throws(PolicyError) {
            try PINRules.checkRoom(triesInWindow: earlier.map(\.time), now: now)
        } catch {
            return .refused(AgentError(.tooManyTries, error.message + "; nothing changed"))
        }
        // The check (scrypt: 32 MiB, a tenth of a second or so in a release build) holds no database
        // lock; it happens at most `PINRules.maxTries` times per child and window.
        let right = try hash.matches(pin)
        // The count again and the event in one transaction: two tries at once cannot both take the last place.
        let outcome: PINTry = try store.write { db in
            let tries = try EventLog.events(of: user, from: windowStart, before: nil, db).filter { $0.kind == .pinTry }
            do throws(PolicyError) {
                try PINRules.checkRoom(triesInWindow: tries.map(\.time), now: now)
            } catch {
                return .full(error)
            }
            let count = tries.count + 1
            let words = right ? "the parent's PIN was typed to approve" : "a wrong PIN was typed to approve"
            try EventLog.append(
                AgentEvent(
                    time: now, user: user, kind: .pinTry,
                    message: "\(words) \(TimeAllowance.format(minutes: minutes)) more (try \(count) of \(PINRules.maxTries) in \(PINRules.tryWindowSeconds / 60) minutes)",
                    details: EventDetails.PINTry(right: right, minutes: minutes, try: count, of: PINRules.maxTries)), db)
            return right ? .right : .wrong(triesLeft: PINRules.maxTries - count)
        }
        switch outcome {
        case .wrong(let left):
            return .refused(
                AgentError(
                    .wrongPIN,
                    "wrong PIN; nothing changed (\(left) \(left == 1 ? "try" : "tries") left in the next \(PINRules.tryWindowSeconds / 60) minutes)"))
        case .full(let refusal):
            return .refused(AgentError(.tooManyTries, refusal.message + "; nothing changed"))
        case .right:
            break
        }
        let shared = SharedDirectory(path: configuration.sharedDirectory, trust: KeyRing(stateDirectory: configuration.stateDirectory))
        do {
            let record = try shared.publishGrant(
                user: user, date: plan.date, extraMinutes: plan.extraMinutes, bedtimeDelayMinutes: plan.bedtimeDelayMinutes,
                requestId: nil, now: now, lift: plan.lift, keyRing: KeyRing(stateDirectory: configuration.stateDirectory))
            logger.notice(
                "a parent approved extra time with the PIN",
                metadata: ["user": "\(user)", "minutes": "\(minutes)", "granted": "\(plan.words)", "record.id": "\(record)"])
            return .granted(record: record, plan: plan)
        } catch KeyError.noSigningKey {
            return .refused(
                AgentError(.failed, "this computer holds no parent key, so time cannot be approved here; nothing changed"))
        }
    }
}

extension SocketProtocol {
    /// `{"command": "approve-pin", "pin": "...", "minutes": 30}` from a managed user (not root).
    static func answerApprovePIN(pin: String, minutes: Int64, callerUID: UInt32, agent: Agent) -> JSONValue {
        guard callerUID != 0 else {
            return failure(.notPermitted, "root needs no PIN; grant time with curfew grant")
        }
        guard let caller = Accounts.account(uid: callerUID) else {
            return failure(.notPermitted, "your account has no name, so it cannot be managed")
        }
        guard agent.state.policies[caller.name] != nil else {
            return failure(.notPermitted, "\(caller.name) is not managed on this computer; there is no limit to extend")
        }
        do {
            switch try agent.approveWithPIN(
                user: caller.name, pin: pin, minutes: Int(minutes), now: agent.clock.wallSecond)
            {
            case .refused(let refusal):
                return refusal.reply
            case .granted(let record, let plan):
                return AgentReply(
                    message: "a parent approved \(plan.words)",
                    grant: AgentReply.PINGrant(record: record, date: "\(plan.date)", minutes: minutes)
                ).json
            }
        } catch {
            agent.logger.error("cannot check the parent's PIN", metadata: ["user": "\(caller.name)", "error": "\(error)"])
            return failure(.failed, "the agent could not check the PIN; nothing changed")
        }
    }
}
