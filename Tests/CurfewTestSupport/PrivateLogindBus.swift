import CSystemd
import CurfewLinux
import Foundation
import Glibc

// Shared by CurfewLinuxTests and EndToEndTests: a private bus with python-dbusmock's logind, and
// children started with a clean signal mask.

// MARK: - The private bus and the mock

public struct TestSetupError: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}

/// A dbus-daemon listening in a temporary directory, and (unless told not to)
/// `python3 -m dbusmock --template logind` on it, with KillUser and KillSession given logind's signatures.
///
/// The bus configuration and the helper script are written into the directory from the strings at the end
/// of this file: files of their own under the test target would each draw SwiftPM's "unhandled file"
/// warning until Package.swift excludes them.
public final class PrivateLogindBus {
    public static let python = "/usr/bin/python3"

    public let directory: String
    public private(set) var address = ""
    private var processes: [ChildProcess] = []

    public init(startMock: Bool = true) throws {
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
    public func shutdown() {
        for process in processes.reversed() { process.killAndReap() }
        processes.removeAll()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs logind_mock.py (`mockHelperScript`) with these commands; returns one result per command.
    @discardableResult
    public func mock(_ commands: [[Any]]) throws -> [Any] {
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
    public func methodCalls(_ member: String) throws -> [[String]] {
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
                member: "NameHasOwner", arguments: [.string("org.freedesktop.login1")])
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
public final class ChildProcess {
    public let pid: pid_t
    private var status: Int32?

    public init(
        _ executable: String, _ arguments: [String], output: String, errors: String? = nil,
        environment: [String: String] = [:], passing descriptors: [(from: Int32, to: Int32)] = []
    ) throws {
        // A fixed environment: nothing of the developer's (DBUS_*, PYTHONPATH) leaks in, and environ is not
        // read while SystemdTests changes it on another thread.
        var environmentEntries = ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"]
        for (key, value) in environment { environmentEntries[key] = value }
        do {
            pid = try spawnProcess(
                executable, arguments,
                options: SpawnOptions(
                    environment: environmentEntries, output: output, errors: errors, truncate: true,
                    passing: descriptors.map { SpawnOptions.Passing(from: $0.from, to: $0.to) }))
        } catch {
            throw TestSetupError(description: "posix_spawn \(executable): \(error)")
        }
    }

    deinit { killAndReap() }

    /// The wait status if the child has exited (waitpid WNOHANG), else nil.
    public func exitStatus() -> Int32? {
        if status == nil {
            var raw: Int32 = 0
            if waitpid(pid, &raw, WNOHANG) == pid { status = raw }
        }
        return status
    }

    /// Polls until the child exits and returns its exit code (or 128 + signal); kills it after `limit`.
    public func waitForExit(within limit: Duration) throws -> Int32 {
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

    public func killAndReap() {
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
public let busConfiguration = #"""
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
