import CurfewLinux
import Dispatch
import Foundation
import Logging
import Synchronization
import Testing

@testable import CurfewAgent

/// The notification worker's queue, with a send that stands for a session bus which answers only
/// when the test lets it (the real busctl against a bus that never answers is in EndToEndTests).
@Suite struct DesktopNotificationsTests {
    final class Bus: Sendable {
        let sends = Mutex<[String]>([])
        let release = DispatchSemaphore(value: 0)

        func send(_ job: DesktopNotifications.Job, _ timeout: Int) -> Result<Void, LinuxError> {
            sends.withLock { $0.append("\(job.user) \(job.message.kind.rawValue) \(job.message.body)") }
            release.wait()
            return .success(())
        }
    }

    static func job(_ user: String, uid: UInt32, _ kind: AgentState.ChildMessage.Kind, _ body: String) -> DesktopNotifications.Job {
        DesktopNotifications.Job(
            user: user, uid: uid, gid: uid, busAddress: "unix:path=/nonexistent",
            message: AgentState.ChildMessage(user: user, summary: "Curfew", body: body, kind: kind))
    }

    func waitUntil(_ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(5)
        while !condition() && Date() < deadline { usleep(5_000) }
    }

    @Test func oneSendAtATimeAndTheNewestOfEachUserAndKindWaits() {
        let bus = Bus()
        let notifications = DesktopNotifications(logger: Logger(label: "test"), send: { bus.send($0, $1) })
        defer {
            notifications.stop()
            for _ in 0..<10 { bus.release.signal() }
        }
        notifications.enqueue(Self.job("kid", uid: 1001, .appStopped, "stop 0"))
        waitUntil { bus.sends.withLock { $0.count } == 1 }
        // While the first send hangs, 399 more of the same kind leave one waiting, the newest.
        for index in 1..<400 { notifications.enqueue(Self.job("kid", uid: 1001, .appStopped, "stop \(index)")) }
        notifications.enqueue(Self.job("kid", uid: 1001, .lockout, "time is up"))
        notifications.enqueue(Self.job("sis", uid: 1002, .appStopped, "sis stop"))
        var counts = notifications.counts
        #expect(counts.waiting <= 3 && counts.tried == 0)
        for _ in 0..<4 { bus.release.signal() }
        waitUntil { notifications.counts.tried == 4 }
        counts = notifications.counts
        #expect(counts.tried == 4 && counts.waiting == 0)
        #expect(counts.coalesced == 398)
        let sends = bus.sends.withLock { $0 }
        #expect(sends == ["kid app-stopped stop 0", "kid app-stopped stop 399", "kid lockout time is up", "sis app-stopped sis stop"])
    }

    @Test func aUserWhoseBusFailedIsLeftAloneForAWhile() {
        let tries = Mutex(0)
        let notifications = DesktopNotifications(
            logger: Logger(label: "test"), quietMilliseconds: 60_000,
            send: { _, _ in
                tries.withLock { $0 += 1 }
                return .failure(LinuxError(operation: "busctl Notify", errno: .timedOut))
            })
        defer { notifications.stop() }
        notifications.enqueue(Self.job("kid", uid: 1001, .warning, "5 minutes left"))
        waitUntil { notifications.counts.tried == 1 }
        for index in 0..<50 {
            notifications.enqueue(Self.job("kid", uid: 1001, index % 2 == 0 ? .appStopped : .warning, "again"))
            usleep(1_000)
        }
        waitUntil { notifications.counts.waiting == 0 }
        usleep(50_000)
        #expect(tries.withLock { $0 } == 1)
    }
}
