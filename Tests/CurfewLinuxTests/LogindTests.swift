import CSystemd
import Foundation
import Glibc
import Testing

@testable import CurfewLinux
import CurfewTestSupport

/// LogindClient against python-dbusmock's logind template on a private dbus-daemon. Each test starts its
/// own bus and mock and kills both (SIGKILL, waitpid) when it ends, whatever happened.
///
/// Serialized: each test blocks a thread in sd_bus_wait and waitpid polling, and the machine may have only
/// two cores for the whole test run.
@Suite(.serialized)
struct LogindTests {
    @Test func sessionsListsAddedSessionsWithTheirProperties() throws {
        let bus = try PrivateLogindBus()
        defer { bus.shutdown() }
        try bus.mock([
            ["add_session", "c1", "seat0", 1000, "kid", true],
            ["add_session", "c2", "seat0", 1001, "sibling", false],
        ])
        let client = try LogindClient(busAddress: bus.address)

        let sessions = try client.sessions().sorted { $0.id < $1.id }

        #expect(
            sessions == [
                LoginSession(
                    id: "c1", objectPath: "/org/freedesktop/login1/session/c1", uid: 1000, userName: "kid",
                    active: true, lockedHint: false, idleHint: false, type: "test", sessionClass: .user, tty: "",
                    display: "", remote: false, seat: "seat0", leader: 1, state: "active"),
                LoginSession(
                    id: "c2", objectPath: "/org/freedesktop/login1/session/c2", uid: 1001, userName: "sibling",
                    active: false, lockedHint: false, idleHint: false, type: "test", sessionClass: .user, tty: "",
                    display: "", remote: false, seat: "seat0", leader: 1, state: "online"),
            ])
        #expect(sessions.map(\.counts) == [true, false])
        #expect(try client.session(objectPath: "/org/freedesktop/login1/session/c1") == sessions.first)
        #expect(try client.session(objectPath: "/org/freedesktop/login1/session/none") == nil)
    }

    @Test func hintAndClassChangesArriveAsPropertiesChangedAndAReReadShowsThem() throws {
        let bus = try PrivateLogindBus()
        defer { bus.shutdown() }
        let path = try #require(try bus.mock([["add_session", "c1", "seat0", 1000, "kid", true]]).first as? String)
        let client = try LogindClient(busAddress: bus.address)
        #expect(try client.session(objectPath: path)?.counts == true)

        try bus.mock([["set_session_property", "c1", "LockedHint", true]])
        #expect(try client.collectEvents { !$0.isEmpty } == [.propertiesChanged(objectPath: path)])
        let locked = try #require(try client.session(objectPath: path))
        #expect(locked.lockedHint && !locked.idleHint && !locked.counts)

        try bus.mock([
            ["set_session_property", "c1", "LockedHint", false], ["set_session_property", "c1", "IdleHint", true],
        ])
        let idleEvents = try client.collectEvents { $0.count >= 2 }
        #expect(idleEvents == [.propertiesChanged(objectPath: path), .propertiesChanged(objectPath: path)])
        let idle = try #require(try client.session(objectPath: path))
        #expect(!idle.lockedHint && idle.idleHint && !idle.counts)

        try bus.mock([["set_session_property", "c1", "IdleHint", false]])
        #expect(try client.collectEvents { !$0.isEmpty } == [.propertiesChanged(objectPath: path)])
        #expect(try client.session(objectPath: path)?.counts == true)

        for greeterClass in ["greeter", "lock-screen"] {
            try bus.mock([["set_session_property", "c1", "Class", greeterClass]])
            #expect(try client.collectEvents { !$0.isEmpty } == [.propertiesChanged(objectPath: path)])
            let session = try #require(try client.session(objectPath: path))
            #expect(session.sessionClass.text == greeterClass && session.active && !session.counts)
        }
    }

    @Test func sessionNewAndSessionRemovedArriveAsEvents() throws {
        let bus = try PrivateLogindBus()
        defer { bus.shutdown() }
        let client = try LogindClient(busAddress: bus.address)
        #expect(try client.sessions().isEmpty)
        let path = "/org/freedesktop/login1/session/c7"

        try bus.mock([["new_session", "c7", "seat0", 1000, "kid", true]])
        #expect(try client.collectEvents { !$0.isEmpty } == [.sessionNew(id: "c7", objectPath: path)])
        #expect(try client.sessions().map(\.id) == ["c7"])

        try bus.mock([["remove_session", "c7"]])
        #expect(try client.collectEvents { !$0.isEmpty } == [.sessionRemoved(id: "c7", objectPath: path)])
        #expect(try client.sessions().isEmpty)
        #expect(try client.session(objectPath: path) == nil)
    }

    @Test func prepareForSleepArrivesAsEvents() throws {
        let bus = try PrivateLogindBus()
        defer { bus.shutdown() }
        let client = try LogindClient(busAddress: bus.address)

        try bus.mock([["prepare_for_sleep", true], ["prepare_for_sleep", false]])

        #expect(try client.collectEvents { $0.count >= 2 } == [.prepareForSleep(true), .prepareForSleep(false)])
    }

    @Test func signalsFromAnotherConnectionThanLogindAreIgnored() throws {
        let bus = try PrivateLogindBus()
        defer { bus.shutdown() }
        let client = try LogindClient(busAddress: bus.address)
        let clientName = try client.signalConnectionUniqueName()

        // Unicast to the client's signal connection (the bus routes it whatever the match rules say), and
        // broadcast; then the real thing from the name's owner.
        try bus.mock([["spoof_prepare_for_sleep", true, clientName], ["spoof_prepare_for_sleep", true, NSNull()]])
        try bus.mock([["prepare_for_sleep", false]])

        #expect(try client.collectEvents { $0.contains(.prepareForSleep(false)) } == [.prepareForSleep(false)])
    }

    @Test func lockTerminateAndKillReachLogind() throws {
        let bus = try PrivateLogindBus()
        defer { bus.shutdown() }
        try bus.mock([["add_session", "c1", "seat0", 1000, "kid", true]])
        let client = try LogindClient(busAddress: bus.address)

        try client.lockSession("c1")
        try client.terminateSession("c1")
        try client.killUser(1000, signal: SIGTERM)
        try client.killSession("c1", signal: SIGKILL)

        #expect(try bus.methodCalls("LockSession") == [["c1"]])
        #expect(try bus.methodCalls("TerminateSession") == [["c1"]])
        #expect(try bus.methodCalls("KillUser") == [["1000", "\(SIGTERM)"]])
        #expect(try bus.methodCalls("KillSession") == [["c1", "all", "\(SIGKILL)"]])
    }

    @Test func failuresAreTypedErrors() throws {
        let missing = "unix:path=/nonexistent/curfew-test-bus"
        let connectError = #expect(throws: LinuxSystemdError.self) { _ = try LogindClient(busAddress: missing) }
        #expect(connectError?.operation == "sd_bus_start")
        #expect(connectError?.errno == .noSuchFileOrDirectory)

        // A bus without logind on it.
        let bus = try PrivateLogindBus(startMock: false)
        defer { bus.shutdown() }
        let client = try LogindClient(busAddress: bus.address)
        let callError = #expect(throws: LinuxSystemdError.self) { try client.lockSession("c1") }
        #expect(callError?.busErrorName == "org.freedesktop.DBus.Error.ServiceUnknown")
        #expect(try client.nextEvents(timeoutMilliseconds: 10) == [])
    }

    @Test func losingTheBusEndsNextEventsWithAnError() throws {
        let bus = try PrivateLogindBus()
        defer { bus.shutdown() }
        let client = try LogindClient(busAddress: bus.address)
        #expect(try client.nextEvents(timeoutMilliseconds: 10) == [])

        bus.shutdown()

        let deadline = ContinuousClock.now + .seconds(5)
        var failure: LinuxSystemdError?
        while failure == nil, ContinuousClock.now < deadline {
            do { _ = try client.nextEvents(timeoutMilliseconds: 100) } catch { failure = error as? LinuxSystemdError }
        }
        #expect(failure != nil)
        #expect(throws: LinuxSystemdError.self) { _ = try client.sessions() }
    }

    @Test func busValuesSurviveAppendAndRead() throws {
        let bus = try PrivateLogindBus(startMock: false)
        defer { bus.shutdown() }
        let connection = try SDBus.open(address: bus.address)
        let values: [SDBusValue] = [
            .byte(7), .bool(true), .int16(-3), .uint16(3), .int32(-70_000), .uint32(4_000_000_000),
            .int64(-5_000_000_000), .uint64(UInt64.max), .double(1.5), .string("kid's \"laptop\""),
            .objectPath("/org/freedesktop/login1/session/c1"), .signature("a{sv}"),
            .array(elementSignature: "s", []),
            .array(
                elementSignature: "{sv}",
                [.dictEntry(.string("Active"), .variant(.bool(true))),
                    .dictEntry(.string("User"), .variant(.structure([.uint32(1000), .objectPath("/u/1000")])))]),
            .structure([.string("seat0"), .objectPath("/org/freedesktop/login1/seat/seat0")]),
        ]
        let message = try connection.newMethodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "Ping")
        try message.append(values)
        try LinuxSystemdError.check("sd_bus_message_seal") { sd_bus_message_seal(message.handle, 1, 0) }
        try message.rewind()

        #expect(try message.readAll() == values)
        #expect(values.map(\.signature).joined() == "ybnqiuxtdsogasa{sv}(so)")
        #expect(values[13].stringKeyedDictionary?["User"]?.structureFields?.first?.uint32Value == 1000)
    }

    /// The helper the other tests rely on: SIGTERM reaches a child even though this process blocks it.
    @Test func childrenStartWithACleanSignalMask() throws {
        let child = try ChildProcess("/bin/sleep", ["30"], output: "/dev/null")
        defer { child.killAndReap() }
        // glibc's posix_spawn returns once the child has exec'd, so this is sleep's own status.
        let status = try String(contentsOfFile: "/proc/\(child.pid)/status", encoding: .utf8)
        #expect(status.contains("SigBlk:\t0000000000000000"))
        kill(child.pid, SIGTERM)
        #expect(try child.waitForExit(within: .seconds(5)) == 128 + SIGTERM)
    }

    @Test func isAvailableNeedsSystemdAndLogind() {
        if access("/run/systemd/system", F_OK) != 0 || access("/run/systemd/seats", F_OK) != 0 {
            #expect(!LogindClient.isAvailable())
        } else {
            #expect(LogindClient.isAvailable())
        }
    }

    @Test(arguments: [
        ("user", true, false, false, true),
        ("user", false, false, false, false),
        ("user", true, true, false, false),
        ("user", true, false, true, false),
        ("greeter", true, false, false, false),
        ("lock-screen", true, false, false, false),
        ("background", true, false, false, false),
    ])
    func onlyAnActiveUnlockedBusyUserSessionCounts(
        sessionClass: String, active: Bool, locked: Bool, idle: Bool, counts: Bool
    ) {
        let session = LoginSession(
            id: "1", objectPath: "/org/freedesktop/login1/session/_31", uid: 1000, userName: "kid", active: active,
            lockedHint: locked, idleHint: idle, type: "wayland", sessionClass: SessionClass(sessionClass), tty: "", display: "",
            remote: false, seat: "seat0", leader: 42, state: active ? "active" : "online")
        #expect(session.counts == counts)
    }

    @Test func sessionClassesAreReadFromLogindsTextAndKeepIt() {
        let known: [(String, SessionClass)] = [
            ("user", .user), ("user-early", .userEarly), ("user-incomplete", .userIncomplete), ("user-light", .userLight),
            ("user-early-light", .userEarlyLight), ("greeter", .greeter), ("lock-screen", .lockScreen), ("background", .background),
            ("background-light", .backgroundLight), ("manager", .manager), ("manager-early", .managerEarly), ("none", .unclassified),
        ]
        for (text, sessionClass) in known {
            #expect(SessionClass(text) == sessionClass && sessionClass.text == text && "\(sessionClass)" == text)
        }
        for text in ["", "User", "user ", "from-the-future"] {
            #expect(SessionClass(text) == .other(text) && SessionClass(text).text == text && SessionClass(text) != .user)
        }
        #expect(SessionClass.other("user") == .user)
    }
}

extension LogindClient {
    /// Reads events until `done` says so or five seconds pass.
    fileprivate func collectEvents(until done: ([LogindEvent]) -> Bool) throws -> [LogindEvent] {
        let deadline = ContinuousClock.now + .seconds(5)
        var events: [LogindEvent] = []
        while !done(events), ContinuousClock.now < deadline {
            events += try nextEvents(timeoutMilliseconds: 100)
        }
        return events
    }
}
