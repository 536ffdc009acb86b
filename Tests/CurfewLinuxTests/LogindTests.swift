import CSystemd
import Foundation
import Glibc
import Testing

@testable import CurfewLinux

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
                    active: true, lockedHint: false, idleHint: false, type: "test", sessionClass: "user", tty: "",
                    display: "", remote: false, seat: "seat0", leader: 1, state: "active"),
                LoginSession(
                    id: "c2", objectPath: "/org/freedesktop/login1/session/c2", uid: 1001, userName: "sibling",
                    active: false, lockedHint: false, idleHint: false, type: "test", sessionClass: "user", tty: "",
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
            #expect(session.sessionClass == greeterClass && session.active && !session.counts)
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
        #expect(connectError?.errno == ENOENT)

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
            lockedHint: locked, idleHint: idle, type: "wayland", sessionClass: sessionClass, tty: "", display: "",
            remote: false, seat: "seat0", leader: 42, state: active ? "active" : "online")
        #expect(session.counts == counts)
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

// MARK: - The private bus and the mock

private struct TestSetupError: Error, CustomStringConvertible {
    var description: String
}

/// A dbus-daemon listening in a temporary directory, and (unless told not to)
/// `python3 -m dbusmock --template logind` on it, with KillUser and KillSession given logind's signatures.
///
/// The bus configuration and the helper script are written into the directory from the strings at the end
/// of this file: files of their own under the test target would each draw SwiftPM's "unhandled file"
/// warning until Package.swift excludes them.
private final class PrivateLogindBus {
    static let python = "/usr/bin/python3"

    let directory: String
    private(set) var address = ""
    private var processes: [ChildProcess] = []

    init(startMock: Bool = true) throws {
        var template = Array("/tmp/curfew-logind-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else { throw TestSetupError(description: "mkdtemp: \(errno)") }
        directory = String(cString: created)
        do {
            try busConfiguration.write(toFile: "\(directory)/bus.conf", atomically: false, encoding: .utf8)
            try mockHelperScript.write(toFile: "\(directory)/logind_mock.py", atomically: false, encoding: .utf8)
            // A socket pair rather than a pipe: socketpair takes SOCK_CLOEXEC, and Swift does not import pipe2.
            // Close-on-exec keeps other tests' children from holding the write end.
            var addressPipe: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &addressPipe) == 0
            else { throw TestSetupError(description: "socketpair: \(errno)") }
            defer { close(addressPipe[0]) }
            let daemon: ChildProcess
            do {
                defer { close(addressPipe[1]) }
                daemon = try ChildProcess(
                    "/usr/bin/dbus-daemon",
                    [
                        "--config-file=\(directory)/bus.conf", "--address=unix:path=\(directory)/bus",
                        "--nofork", "--nopidfile", "--print-address=3",
                    ],
                    output: "\(directory)/dbus-daemon.log", passing: [(addressPipe[1], 3)])
            }
            processes.append(daemon)
            address = try Self.readLine(from: addressPipe[0], within: .seconds(5), log: "\(directory)/dbus-daemon.log")
            if startMock {
                let mock = try ChildProcess(
                    Self.python, ["-m", "dbusmock", "--template", "logind"], output: "\(directory)/dbusmock.log",
                    environment: ["DBUS_SYSTEM_BUS_ADDRESS": address])
                processes.append(mock)
                try waitForLogind(mock)
                try self.mock([["fix_signatures"]])
            }
        } catch {
            shutdown()
            throw error
        }
    }

    /// Kills the mock and the daemon (SIGKILL, waitpid) and removes the directory. Safe to call twice.
    func shutdown() {
        for process in processes.reversed() { process.killAndReap() }
        processes.removeAll()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs logind_mock.py (`mockHelperScript`) with these commands; returns one result per command.
    @discardableResult
    func mock(_ commands: [[Any]]) throws -> [Any] {
        let json = String(decoding: try JSONSerialization.data(withJSONObject: commands), as: UTF8.self)
        let output = "\(directory)/helper.out"
        let helper = try ChildProcess(
            Self.python, ["\(directory)/logind_mock.py", address, json], output: output,
            errors: "\(directory)/helper.err")
        let status = try helper.waitForExit(within: .seconds(10))
        guard status == 0 else {
            let errors = (try? String(contentsOfFile: "\(directory)/helper.err", encoding: .utf8)) ?? ""
            throw TestSetupError(description: "logind_mock.py \(json) exited with \(status): \(errors)")
        }
        let data = try Data(contentsOf: URL(fileURLWithPath: output))
        guard let results = try JSONSerialization.jsonObject(with: data) as? [Any] else {
            throw TestSetupError(description: "logind_mock.py printed \(String(decoding: data, as: UTF8.self))")
        }
        return results
    }

    /// The argument lists of the calls the mock logged for a Manager method, each argument as text.
    func methodCalls(_ member: String) throws -> [[String]] {
        guard let calls = try mock([["method_calls", member]]).first as? [[Any]] else {
            throw TestSetupError(description: "method_calls \(member): unexpected result")
        }
        return calls.map { $0.map { "\($0)" } }
    }

    /// Polls the bus until org.freedesktop.login1 has an owner.
    private func waitForLogind(_ mock: ChildProcess) throws {
        let connection = try SDBus.open(address: address)
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let reply = try connection.callMethod(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "NameHasOwner", arguments: [.string(LogindClient.busName)])
            if reply.first?.boolValue == true { return }
            if let status = mock.exitStatus() {
                let log = (try? String(contentsOfFile: "\(directory)/dbusmock.log", encoding: .utf8)) ?? ""
                throw TestSetupError(description: "dbusmock exited with \(status): \(log)")
            }
            usleep(20_000)
        }
        throw TestSetupError(description: "dbusmock did not claim org.freedesktop.login1 within 10 s")
    }

    private static func readLine(from fd: Int32, within limit: Duration, log: String) throws -> String {
        let deadline = ContinuousClock.now + limit
        var bytes: [UInt8] = []
        while !bytes.contains(UInt8(ascii: "\n")) {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw TestSetupError(description: "no bus address within \(limit)") }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(left.components.seconds * 1000 + 1))
            if ready < 0 && errno == EINTR { continue }
            var chunk = [UInt8](repeating: 0, count: 256)
            let count = ready > 0 ? read(fd, &chunk, chunk.count) : 0
            if ready > 0 && count <= 0 {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                throw TestSetupError(description: "dbus-daemon closed its address pipe: \(text)")
            }
            bytes += chunk.prefix(max(count, 0))
        }
        return String(decoding: bytes.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
    }
}

/// A child started with posix_spawn with an empty signal mask and default signal dispositions (a Swift
/// Testing process blocks signals, and Foundation's Process passes that mask on), stdin from /dev/null, the
/// descriptors asked for (others are close-on-exec) and a fixed environment plus `environment`. Killed with
/// SIGKILL and reaped at the latest on deinit.
private final class ChildProcess {
    let pid: pid_t
    private var status: Int32?

    init(
        _ executable: String, _ arguments: [String], output: String, errors: String? = nil,
        environment: [String: String] = [:], passing descriptors: [(from: Int32, to: Int32)] = []
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        if let errors {
            posix_spawn_file_actions_addopen(&actions, 2, errors, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        for descriptor in descriptors { posix_spawn_file_actions_adddup2(&actions, descriptor.from, descriptor.to) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGCHLD, SIGUSR1, SIGUSR2] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        // A fixed environment: nothing of the developer's (DBUS_*, PYTHONPATH) leaks in, and environ is not
        // read while SystemdTests changes it on another thread.
        var environmentEntries = ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"]
        for (key, value) in environment { environmentEntries[key] = value }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environmentEntries.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw TestSetupError(description: "posix_spawn \(executable): \(result)") }
        self.pid = pid
    }

    deinit { killAndReap() }

    /// The wait status if the child has exited (waitpid WNOHANG), else nil.
    func exitStatus() -> Int32? {
        if status == nil {
            var raw: Int32 = 0
            if waitpid(pid, &raw, WNOHANG) == pid { status = raw }
        }
        return status
    }

    /// Polls until the child exits and returns its exit code (or 128 + signal); kills it after `limit`.
    func waitForExit(within limit: Duration) throws -> Int32 {
        let deadline = ContinuousClock.now + limit
        while exitStatus() == nil {
            if ContinuousClock.now >= deadline {
                killAndReap()
                throw TestSetupError(description: "child \(pid) still running after \(limit)")
            }
            usleep(2_000)
        }
        let raw = status ?? 0
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import.
        return raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
    }

    func killAndReap() {
        guard status == nil else { return }
        kill(pid, SIGKILL)
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
        status = raw
    }
}

// MARK: - Files written for each test

/// dbus-daemon's configuration: a session-type bus that lets every connection own any name and talk to
/// anyone; the listening address comes from the command line.
private let busConfiguration = #"""
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <!-- Replaced by the address option on the command line. -->
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""#

/// Drives python-dbusmock's logind template.
private let mockHelperScript = #"""
#!/usr/bin/python3
"""Drives python-dbusmock's logind template for the CurfewLinux tests.

usage: logind_mock.py BUS_ADDRESS COMMANDS_JSON

COMMANDS_JSON is a list of commands, each a list [name, arg...]; the script runs them in order and prints
a JSON list with one result per command. Commands:
  ["fix_signatures"]                   give KillUser and KillSession logind's real signatures (ui, ssi);
                                       the template declares "us" and "sss"
  ["add_session", id, seat, uid, user, active]   the template's AddSession (emits nothing)
  ["new_session", id, seat, uid, user, active]   AddSession, then Manager.SessionNew as logind does
  ["remove_session", id]               RemoveObject, then Manager.SessionRemoved
  ["set_session_property", id, name, value]      org.freedesktop.DBus.Properties.Set on the session; the
                                       mock emits PropertiesChanged (bools and strings)
  ["prepare_for_sleep", start]         Manager.PrepareForSleep(start) from the mock
  ["spoof_prepare_for_sleep", start, destination_or_null]
                                       the same signal from this script's own connection, broadcast or
                                       unicast to a unique name
  ["method_calls", member]             the argument lists of logged Manager calls to member
  ["clear_calls"]
"""
import json
import sys

import dbus

BUS = 'org.freedesktop.login1'
MANAGER_PATH = '/org/freedesktop/login1'
MANAGER = 'org.freedesktop.login1.Manager'
MOCK = 'org.freedesktop.DBus.Mock'


def plain(value):
    """dbus-python values as JSON-ready Python values."""
    if isinstance(value, dbus.Boolean):
        return bool(value)
    if isinstance(value, (dbus.String, dbus.ObjectPath, dbus.Signature)):
        return str(value)
    if isinstance(value, (list, tuple, dbus.Array, dbus.Struct)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def session_path(session_id):
    return dbus.ObjectPath('/org/freedesktop/login1/session/' + session_id)


def run(bus, command):
    name, args = command[0], command[1:]
    manager = bus.get_object(BUS, MANAGER_PATH)
    mock = dbus.Interface(manager, MOCK)
    if name == 'fix_signatures':
        mock.AddMethod(MANAGER, 'KillUser', 'ui', '', '')
        mock.AddMethod(MANAGER, 'KillSession', 'ssi', '', '')
        return None
    if name in ('add_session', 'new_session'):
        session_id, seat, uid, user, active = args
        path = mock.AddSession(session_id, seat, dbus.UInt32(uid), user, bool(active))
        if name == 'new_session':
            mock.EmitSignal(MANAGER, 'SessionNew', 'so', [session_id, dbus.ObjectPath(path)])
        return str(path)
    if name == 'remove_session':
        (session_id,) = args
        path = session_path(session_id)
        mock.RemoveObject(path)
        mock.EmitSignal(MANAGER, 'SessionRemoved', 'so', [session_id, path])
        return str(path)
    if name == 'set_session_property':
        session_id, prop, value = args
        value = dbus.Boolean(value) if isinstance(value, bool) else dbus.String(value)
        session = bus.get_object(BUS, session_path(session_id))
        session.Set('org.freedesktop.login1.Session', prop, value, dbus_interface=dbus.PROPERTIES_IFACE)
        return None
    if name == 'prepare_for_sleep':
        (start,) = args
        mock.EmitSignal(MANAGER, 'PrepareForSleep', 'b', [dbus.Boolean(start)])
        return None
    if name == 'spoof_prepare_for_sleep':
        start, destination = args
        signal = dbus.lowlevel.SignalMessage(MANAGER_PATH, MANAGER, 'PrepareForSleep')
        signal.append(dbus.Boolean(start), signature='b')
        if destination:
            signal.set_destination(destination)
        bus.send_message(signal)
        bus.flush()
        return None
    if name == 'method_calls':
        (member,) = args
        return [plain(call_args) for _, call_args in mock.GetMethodCalls(member)]
    if name == 'clear_calls':
        mock.ClearCalls()
        return None
    raise SystemExit(f'unknown command {name}')


def main():
    address, commands = sys.argv[1], json.loads(sys.argv[2])
    bus = dbus.bus.BusConnection(address)
    results = [run(bus, command) for command in commands]
    bus.flush()
    print(json.dumps(results))


if __name__ == '__main__':
    main()
"""#
