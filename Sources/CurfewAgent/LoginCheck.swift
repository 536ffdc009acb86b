import CurfewCore
import CurfewLinux
import CurfewStore
import Foundation
import Logging

extension Agent {
    /// The login check from the agent's live figures; a refusal is recorded as an event.
    public func checkLogin(user: String, service: String, now: Instant, recordRefusal: Bool = true) -> LoginVerdict {
        guard let schedule = state.schedule(of: user, systemZone: ZoneRules.system) else {
            return LoginVerdict(allowed: true, message: "\(user) is not managed on this computer")
        }
        var usage = ScheduleUsage(daySeconds: 0)
        if let live = state.live(of: user), live.day == schedule.zone.localTime(at: now).date {
            usage = live.scheduleUsage
        }
        let verdict = LoginVerdict.decide(user: user, schedule: schedule, usage: usage, now: now)
        // Bounded: a child can ask for refusals as fast as PAM runs (su to themself at bedtime).
        if !verdict.allowed && recordRefusal,
            let unrecorded = state.admitLoginRefusal(of: user, monotonic: ClockReading.now().monotonic)
        {
            logger.notice("login refused", metadata: ["user": "\(user)", "service": "\(service)", "unrecorded.before": "\(unrecorded)"])
            recordEvent(verdict.event(user: user, service: service, now: now, unrecordedBefore: unrecorded))
        }
        return verdict
    }
}
