import CurfewCore
import CurfewLinux
import CurfewStore
import CurfewSync
import Foundation
import Logging

/// A parent approves extra time on the child's own screen by typing the parent's PIN (`approve-pin`,
/// sent by the child's indicator after it filed a request). The PIN answers one request, once: the
/// child's newest pending request, with at most what it asked (`PINRules.grantable`) and at most the
/// parent's maximum (`ParentPINHash.maxMinutesPerDay`) in any 24 hours; a second `approve-pin` finds no
/// request to answer. The agent checks the PIN against `<state-dir>/parent-pin` only when there is
/// something to grant, and only as often as `PINRules.checkRoom(tries:now:)` allows (5 in 15 minutes,
/// then a doubling wait, at most 10 wrong in 24 hours), counted from the `pin-try` events in the
/// database (so a restart resets nothing); each try is an event, right or wrong, never the PIN. A right
/// PIN, in one transaction: the try, the request answered by `RequestTable.parentPIN`, a `pin-approved`
/// event, and a grant signed with this computer's parent key that answers the request and lifts what
/// blocks the child now (`ExtraTime.plan`), which the agent then applies like any other grant.
extension Agent {
    /// The outcome of one `approve-pin`.
    enum PINApproval {
        case granted(record: String, plan: ExtraTime.Plan, minutes: Int)
        case refused(AgentError)
    }

    /// One try as the database counted it.
    private enum PINTry {
        case right(record: String, minutes: Int)
        case wrong(triesLeft: Int)
        /// The tries are used up for now: not checked, not recorded.
        case full(PolicyError)
        /// Between the check and the transaction, the request was answered or the day's maximum used.
        case nothingLeft(AgentError)
    }

    private func nothingToAnswer(user: String, maxPerDay: Int, room: PINApprovals.Room?) -> AgentError? {
        guard let room else {
            return AgentError(
                .notPermitted, "the PIN answers a request, and \(user) has none waiting; ask first (curfew request 30m); nothing changed")
        }
        guard room.minutes > 0 else {
            return AgentError(
                .notPermitted,
                "the PIN approved \(TimeAllowance.format(minutes: room.approvedInDay)) in the last 24 hours, the most a parent allows "
                    + "(\(TimeAllowance.format(minutes: maxPerDay)), curfew pin set --max-per-day); a parent can use curfew approve "
                    + "\(room.request.id); nothing changed")
        }
        return nil
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
        let maxPerDay = hash.maxMinutesPerDay
        // The request it answers and what is left of the day's maximum: nothing to grant costs no try.
        let room = try store.read { db in try PINApprovals.room(user: user, offered: minutes, maxPerDay: maxPerDay, now: now, db) }
        if let refusal = nothingToAnswer(user: user, maxPerDay: maxPerDay, room: room) { return .refused(refusal) }
        // What the PIN would grant: what lifts the block in force now. Worked out before the PIN is
        // checked, so that a grant that would lift nothing costs the child no try.
        guard let schedule = state.schedule(of: user, systemZone: ZoneRules.system) else {
            return .refused(AgentError(.notPermitted, "\(user) is not managed on this computer"))
        }
        let block = ExtraTime.block(
            schedule: schedule, now: now, usage: Enforcement.dayUsage(schedule: schedule, live: state.live(of: user), now: now), app: nil)
        func planFor(minutes: Int) throws(PolicyError) -> ExtraTime.Plan {
            try ExtraTime.plan(for: block, app: nil, minutes: minutes, user: user, schedule: schedule, now: now)
        }
        do throws(PolicyError) {
            _ = try planFor(minutes: room?.minutes ?? minutes)
        } catch {
            return .refused(AgentError(.badRequest, error.message + "; nothing changed"))
        }
        let windowStart = now - .seconds(PINRules.tryWindowSeconds) + .milliseconds(1)
        // A child whose tries are used up costs no hashing.
        let earlier = try store.read { db in try PINApprovals.tries(of: user, now: now, db) }
        do throws(PolicyError) {
            try PINRules.checkRoom(tries: earlier, now: now)
        } catch {
            return .refused(AgentError(.tooManyTries, error.message + "; nothing changed"))
        }
        // The check (scrypt: 32 MiB, a tenth of a second or so in a release build) holds no database
        // lock; it happens at most `PINRules.maxTries` times per child and window.
        let right = try hash.matches(pin)
        let shared = SharedDirectory(path: configuration.sharedDirectory, trust: KeyRing(stateDirectory: configuration.stateDirectory))
        var granted: ExtraTime.Plan?
        // The count, the event, the request's answer and the grant in one transaction: two tries at once
        // cannot both take the last place, and two approvals cannot both answer one request.
        let outcome: PINTry
        do {
            outcome = try store.write { db in
                let tries = try PINApprovals.tries(of: user, now: now, db)
                do throws(PolicyError) {
                    try PINRules.checkRoom(tries: tries, now: now)
                } catch {
                    return .full(error)
                }
                let room = try PINApprovals.room(user: user, offered: minutes, maxPerDay: maxPerDay, now: now, db)
                if let refusal = nothingToAnswer(user: user, maxPerDay: maxPerDay, room: room) { return .nothingLeft(refusal) }
                guard let room else { return .nothingLeft(AgentError(.failed, "nothing changed")) }
                let count = tries.filter { $0.time >= windowStart }.count + 1
                let words = right ? "the parent's PIN was typed to approve" : "a wrong PIN was typed to approve"
                try EventLog.append(
                    AgentEvent(
                        time: now, user: user, kind: .pinTry,
                        message: "\(words) \(TimeAllowance.format(minutes: minutes)) more (try \(count) of \(PINRules.maxTries) in \(PINRules.tryWindowSeconds / 60) minutes)",
                        details: EventDetails.PINTry(right: right, minutes: minutes, try: count, of: PINRules.maxTries)), db)
                guard right else { return .wrong(triesLeft: max(0, PINRules.maxTries - count)) }
                let plan = try planFor(minutes: room.minutes)
                try RequestTable.answer(
                    id: room.request.id, status: .approved, minutes: room.minutes, by: RequestTable.parentPIN, now: now, db)
                let record = try shared.publishGrant(
                    user: user, date: plan.date, extraMinutes: plan.extraMinutes, bedtimeDelayMinutes: plan.bedtimeDelayMinutes,
                    requestId: room.request.id, now: now, lift: plan.lift, keyRing: KeyRing(stateDirectory: configuration.stateDirectory))
                let approvedInDay = room.approvedInDay + room.minutes
                try EventLog.append(
                    AgentEvent(
                        time: now, user: user, kind: .pinApproval,
                        message: "a parent approved request \(room.request.id) with the PIN: \(plan.words) (asked "
                            + "\(TimeAllowance.format(minutes: room.request.minutes)); \(TimeAllowance.format(minutes: approvedInDay)) of "
                            + "\(TimeAllowance.format(minutes: maxPerDay)) by PIN in 24 hours; record \(record))",
                        details: EventDetails.PINApproval(
                            request: room.request.id, asked: room.request.minutes, granted: room.minutes, record: record,
                            approvedInDay: approvedInDay, maxPerDay: maxPerDay)), db)
                granted = plan
                return .right(record: record, minutes: room.minutes)
            }
        } catch KeyError.noSigningKey {
            return .refused(
                AgentError(.failed, "this computer holds no parent key, so time cannot be approved here; nothing changed"))
        }
        switch outcome {
        case .wrong(let left):
            return .refused(
                AgentError(
                    .wrongPIN,
                    "wrong PIN; nothing changed (\(left) \(left == 1 ? "try" : "tries") left in the next \(PINRules.tryWindowSeconds / 60) minutes)"))
        case .full(let refusal):
            return .refused(AgentError(.tooManyTries, refusal.message + "; nothing changed"))
        case .nothingLeft(let refusal):
            return .refused(refusal)
        case .right(let record, let minutes):
            guard let plan = granted else { return .refused(AgentError(.failed, "nothing changed")) }
            logger.notice(
                "a parent approved extra time with the PIN",
                metadata: ["user": "\(user)", "minutes": "\(minutes)", "granted": "\(plan.words)", "record.id": "\(record)"])
            return .granted(record: record, plan: plan, minutes: minutes)
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
            case .granted(let record, let plan, let granted):
                return AgentReply(
                    message: "a parent approved \(plan.words)",
                    grant: AgentReply.PINGrant(record: record, date: "\(plan.date)", minutes: Int64(granted))
                ).json
            }
        } catch {
            agent.logger.error("cannot check the parent's PIN", metadata: ["user": "\(caller.name)", "error": "\(error)"])
            return failure(.failed, "the agent could not check the PIN; nothing changed")
        }
    }
}
