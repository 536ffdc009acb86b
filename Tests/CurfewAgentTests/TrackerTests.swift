import CurfewCore
import CurfewLinux
import CurfewStore
import Foundation
import Logging
import Synchronization
import Testing

@testable import CurfewAgent

/// The tracker against real processes (a `sleep` of a real unprivileged account, `curfewtracker`, since
/// root is never managed) and a clock the test moves.
@Suite(.enabled(if: getuid() == 0, "creates an account and runs a process as it"))
struct TrackerTests {
    static let user = "curfewtracker"

    /// The account, created on first use, with a process of its own for the test to count.
    final class Subject {
        let pid: Int32
        init() throws {
            var account = Accounts.account(named: TrackerTests.user)
            if account == nil {
                let pid = try spawnProcess("/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", TrackerTests.user])
                _ = reap(pid)
                account = Accounts.account(named: TrackerTests.user)
            }
            guard let account else { throw LinuxError(operation: "useradd \(TrackerTests.user)", errno: .noSuchFileOrDirectory) }
            pid = try spawnProcess("/bin/sleep", ["600"], uid: account.uid)
        }
        deinit { killAndReap(pid) }
    }

    final class FakeClock: Sendable {
        let reading: Mutex<ClockReading>
        init(_ reading: ClockReading) { self.reading = Mutex(reading) }
        func advance(monotonic: Int64, boottime: Int64? = nil, wall: Int64? = nil) {
            reading.withLock {
                $0.monotonic += monotonic
                $0.boottime += boottime ?? monotonic
                $0.wall += .milliseconds(wall ?? monotonic)
            }
        }
        var now: ClockReading { reading.withLock { $0 } }
    }

    // 2026-11-21 12:00:00 UTC.
    static let noon = Instant(milliseconds: 1_795_262_400_000)

    func tracker(_ clock: FakeClock) throws -> (Tracker, StateStore, String, Subject) {
        let subject = try Subject()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-tracker-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = try StateStore(path: "\(directory)/curfew.db", concurrentReaders: true)
        let state = AgentState()
        var policy = Policy.defaults(for: TrackerTests.user)
        policy.bedtime = nil
        policy.timezone = "UTC"
        state.setPolicies([TrackerTests.user: policy], versions: [TrackerTests.user: 1])
        state.setSessions(nil)  // no logind: time counts while the user has processes, which it has
        let tracker = Tracker(
            state: state, store: store, catalog: AppCatalog([]), logger: Logger(label: "test"), useProcessConnector: false,
            flushIntervalMilliseconds: 0, clock: { clock.now })
        tracker.start()
        return (tracker, store, directory, subject)
    }

    func screen(_ store: StateStore) throws -> Int64 {
        try store.read { try UsageTable.dayTotals(user: TrackerTests.user, day: LocalDate(year: 2026, month: 11, day: 21)!, $0) }[""] ?? 0
    }

    @Test func wallClockJumpsNeverCreditOrDebitAndAreRecorded() throws {
        let clock = FakeClock(ClockReading(monotonic: 10_000, boottime: 10_000, wall: TrackerTests.noon))
        let (tracker, store, directory, subject) = try tracker(clock)
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            withExtendedLifetime(subject) {}
        }
        clock.advance(monotonic: 1_000)
        tracker.tick()
        #expect(try screen(store) == 1_000)
        clock.advance(monotonic: 1_000, wall: 601_000)  // set 10 minutes forward
        tracker.tick()
        clock.advance(monotonic: 1_000, wall: -899_000)  // then 15 minutes back
        tracker.tick()
        #expect(try screen(store) == 3_000)
        let events = try store.read { try EventLog.list(user: nil, since: nil, $0) }.filter { $0.kind == .clockJump }
        #expect(
            events.map(\.message) == [
                "the wall clock was set forward by 600 s; no time was credited or lost",
                "the wall clock was set back by 900 s; no time was credited or lost",
            ])
    }

    @Test func suspendIsNotCountedAndSleepPausesCounting() throws {
        let clock = FakeClock(ClockReading(monotonic: 10_000, boottime: 10_000, wall: TrackerTests.noon))
        let (tracker, store, directory, subject) = try tracker(clock)
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            withExtendedLifetime(subject) {}
        }
        // An hour asleep: the monotonic clock stood still, boot time and wall time moved on.
        clock.advance(monotonic: 500, boottime: 3_600_500, wall: 3_600_500)
        tracker.tick()
        #expect(try screen(store) == 500)
        #expect(try store.read { try EventLog.list(user: nil, since: nil, $0) }.filter { $0.kind == .clockJump }.isEmpty)
        // Between PrepareForSleep(true) and (false) nothing counts.
        tracker.state.setSleeping(true)
        clock.advance(monotonic: 2_000)
        tracker.tick()
        tracker.state.setSleeping(false)
        clock.advance(monotonic: 1_000)
        tracker.tick()
        #expect(try screen(store) == 1_500)
    }

    @Test func pendingUsageSurvivesAFailedFlush() throws {
        let clock = FakeClock(ClockReading(monotonic: 10_000, boottime: 10_000, wall: TrackerTests.noon))
        let (tracker, store, directory, subject) = try tracker(clock)
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            withExtendedLifetime(subject) {}
        }
        try store.write { try $0.execute(sql: "CREATE TRIGGER refuse BEFORE INSERT ON usage BEGIN SELECT RAISE(ABORT, 'full'); END") }
        clock.advance(monotonic: 1_000)
        tracker.tick()
        #expect(try screen(store) == 0)
        #expect(tracker.pending.filter { $0.key.app == UsageKey.screen }.values.reduce(0, +) == 1_000)
        try store.write { try $0.execute(sql: "DROP TRIGGER refuse") }
        clock.advance(monotonic: 1_000)
        tracker.tick()
        #expect(try screen(store) == 2_000)
        #expect(tracker.pending.isEmpty)
    }

    /// A child relaunching a blocked app in a loop: 60 events at once, then one a minute, and the
    /// stops past the budget are recorded as a count per app once there is room again.
    @Test func stopsPastTheBudgetAreCountedNotRecordedOneByOne() throws {
        let clock = FakeClock(ClockReading(monotonic: 10_000, boottime: 10_000, wall: TrackerTests.noon))
        let (tracker, store, directory, subject) = try tracker(clock)
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            withExtendedLifetime(subject) {}
        }
        let user = TrackerTests.user
        func stop(_ app: String, pids: Int32) {
            let now = clock.now
            tracker.enforcement.stopped(
                app: app, reason: StopReason.blocked, user: user, processes: (0..<pids).map { ProcessRef(pid: 1_000 + $0, startTime: 1) },
                now: now.wall, monotonic: now.monotonic, events: &tracker.pendingEvents)
        }
        for _ in 0..<500 { stop("steam", pids: 2) }
        for _ in 0..<3 { stop("minecraft", pids: 1) }
        tracker.enforcement.recordUnrecordedStops(now: clock.now.wall, monotonic: clock.now.monotonic, events: &tracker.pendingEvents)
        tracker.flush(force: true)
        func stopEvents() throws -> [AgentEvent] {
            try store.read { try EventLog.list(user: user, since: nil, $0) }.filter { $0.kind == .appStopped }
        }
        #expect(try stopEvents().count == AppEnforcement.stopEventBurst)
        #expect(tracker.state.takeMessages().count <= AgentState.maxOutbox)
        // A minute later: one token, for the first app in name order; another minute, the next.
        clock.advance(monotonic: 60_000)
        tracker.enforcement.recordUnrecordedStops(now: clock.now.wall, monotonic: clock.now.monotonic, events: &tracker.pendingEvents)
        clock.advance(monotonic: 60_000)
        tracker.enforcement.recordUnrecordedStops(now: clock.now.wall, monotonic: clock.now.monotonic, events: &tracker.pendingEvents)
        tracker.flush(force: true)
        let summaries = try stopEvents().dropFirst(AppEnforcement.stopEventBurst).map(\.message)
        #expect(summaries == ["minecraft was stopped 3 more times (not recorded one by one)", "steam was stopped 880 more times (not recorded one by one)"])
        #expect(tracker.enforcement.stopRecords[user]?.unrecorded.isEmpty == true)
        // Once the budget is full again, nothing of it is kept.
        clock.advance(monotonic: 3_600_000)
        tracker.enforcement.recordUnrecordedStops(now: clock.now.wall, monotonic: clock.now.monotonic, events: &tracker.pendingEvents)
        #expect(tracker.enforcement.stopRecords.isEmpty)
    }

    /// Breaks against a real process and the test's clock: after `afterMinutes` of counted
    /// screen time the decision is a break, the tracker stops the child's processes (logout without
    /// logind), and after a pause of the break's length use is allowed again. Its own account
    /// (`curfewbreaks`): the lockout stops every process of it, which must not hit the other tests'.
    @Test func aBreakAfterTheStretchOfRealUse() throws {
        let clock = FakeClock(ClockReading(monotonic: 10_000, boottime: 10_000, wall: TrackerTests.noon))
        let user = "curfewbreaks"
        if Accounts.account(named: user) == nil {
            _ = reap(try spawnProcess("/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user]))
        }
        let account = try #require(Accounts.account(named: user))
        let pid = try spawnProcess("/bin/sleep", ["600"], uid: account.uid)
        defer { killAndReap(pid) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-tracker-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try StateStore(path: "\(directory)/curfew.db", concurrentReaders: true)
        let state = AgentState()
        var policy = Policy.defaults(for: user)
        policy.bedtime = nil
        policy.timezone = "UTC"
        policy.dailyLimit = .unlimited
        policy.breaks = Breaks(afterMinutes: 15, lengthMinutes: 5)
        state.setPolicies([user: policy], versions: [user: 1])
        state.setSessions(nil)
        let tracker = Tracker(
            state: state, store: store, catalog: AppCatalog([]), logger: Logger(label: "test"), useProcessConnector: false,
            flushIntervalMilliseconds: 0, clock: { clock.now })
        tracker.start()
        func screen() throws -> Int64 {
            try store.read { try UsageTable.dayTotals(user: user, day: LocalDate(year: 2026, month: 11, day: 21)!, $0) }[""] ?? 0
        }
        func decision() throws -> Decision {
            let schedule = try #require(tracker.state.schedule(of: user, systemZone: ZoneRules(identifier: "UTC")!))
            return Enforcement.plan(
                schedule: schedule, live: tracker.state.live(of: user), running: [], catalog: AppCatalog([]),
                now: clock.now.wall
            ).decision
        }
        tracker.tick()
        for _ in 0..<14 {
            clock.advance(monotonic: 60_000)
            tracker.tick()
        }
        #expect(tracker.state.live(of: user)?.breakClock.continuousSeconds == Int64(14 * 60))
        #expect(try decision().state == .allowed)
        #expect(try decision().nextChange?.state == .breakTime)
        #expect(kill(pid, 0) == 0, "the child's process runs before the break")
        clock.advance(monotonic: 60_000)
        tracker.tick()
        let due = try decision()
        #expect(due.state == .breakTime && due.reason == "time for a 5m break until 12:20", "\(due)")
        // The lockout (logout, without logind: every process of the child) stops the real process.
        var status: Int32 = 0
        var gone = false
        for _ in 0..<100 where !gone {
            clock.advance(monotonic: 50)
            tracker.tick()
            gone = waitpid(pid, &status, WNOHANG) == pid
            if !gone { usleep(50_000) }
        }
        #expect(gone, "the break did not stop the child's process")
        // The tracker observes each tick for the next interval: one short tick sees the process gone.
        clock.advance(monotonic: 50)
        tracker.tick()
        // Five minutes without screen time end the break.
        for _ in 0..<5 {
            clock.advance(monotonic: 60_000)
            tracker.tick()
        }
        let after = try decision()
        #expect(after.state == .allowed, "\(after) \(String(describing: tracker.state.live(of: user)))")
        #expect(try screen() >= Int64(15 * 60_000))
    }
}
