import CLinux
import CurfewCore
import CurfewTestSupport
import Foundation
import Glibc
import SystemPackage
import Testing

@testable import CurfewLinux

@Suite struct EnforcementPrimitivesTests {
    // MARK: ProcessStopper on real processes

    @Test func stopperEndsALauncherAndItsChildrenWithSigtermAndLeavesABystander() throws {
        let children = ProcChildren()
        let launcher = try children.spawn("/bin/sh", ["-c", "/bin/sleep 1001 & /bin/sleep 1002 & wait"])
        let bystander = try children.spawn("/bin/sleep", ["1003"])
        let sampler = ProcessSampler()
        var processes: [Int32: TrackedProcess] = [:]
        #expect(
            pollUntil(seconds: 5) {
                processes = Dictionary(uniqueKeysWithValues: sampler.sample().map { ($0.pid, $0) })
                return processes.values.filter { $0.parentPid == launcher && $0.facts.commandLine.first == "/bin/sleep" }
                    .count == 2
            })
        let root = ProcessRef(try #require(processes[launcher]))
        let tree = ProcessTree.withDescendants(of: [root], in: processes)
        #expect(tree.count == 3)
        #expect(tree.first == root, "roots first")
        #expect(Set(tree.dropFirst().map { processes[$0.pid]?.facts.commandLine ?? [] }) == [
            ["/bin/sleep", "1001"], ["/bin/sleep", "1002"],
        ])
        let bystanderRef = ProcessRef(try #require(processes[bystander]))
        #expect(processes[bystander]?.uid == processes[launcher]?.uid, "the same uid")
        #expect(!tree.contains(bystanderRef))

        // The test's own pidfds, to see the orphaned sleeps die (whoever reaps them).
        let watchers = try tree.map { ref throws(LinuxError) in try ProcessHandle.open(ref) }
        let stopper = ProcessStopper(graceMilliseconds: 2_000)
        #expect(stopper.stop(tree, nowMonotonic: 10_000) == tree)
        #expect(stopper.pending == 3)
        #expect(tree.allSatisfy(stopper.isStopping))
        #expect(stopper.stop(tree, nowMonotonic: 10_001).isEmpty, "already stopping")

        #expect(pollUntil(seconds: 5) { watchers.allSatisfy(\.hasExited) })
        let status = try #require(reap(launcher))
        #expect(status & 0x7F == SIGTERM, "the launcher died of SIGTERM")
        #expect(stopper.poll(nowMonotonic: 10_500).isEmpty)
        #expect(stopper.pending == 0)
        #expect(!tree.contains(where: stopper.isStopping))
        #expect(stopper.poll(nowMonotonic: 20_000).isEmpty, "nothing left to SIGKILL")

        #expect(kill(bystander, 0) == 0)
        var bystanderStatus: Int32 = 0
        #expect(waitpid(bystander, &bystanderStatus, WNOHANG) == 0, "the bystander still runs")
        #expect(procStartTime(bystander) == bystanderRef.startTime)
    }

    @Test func stopperSendsSigkillOnlyAfterTheGraceToAProcessIgnoringSigterm() throws {
        let directory = ProcTestDirectory()
        let children = ProcChildren()
        let ready = directory.path + "/ready"
        let pid = try children.spawn(
            "/bin/sh", ["-c", "trap '' TERM; echo ready > \(ready); while :; do /bin/sleep 0.05; done"])
        #expect(pollUntil(seconds: 5) { access(ready, F_OK) == 0 })
        let ref = ProcessRef(pid: pid, startTime: try #require(procStartTime(pid)))
        let watcher = try ProcessHandle.open(ref)

        let stopper = ProcessStopper(graceMilliseconds: 2_000)
        #expect(stopper.stop([ref], nowMonotonic: 50_000) == [ref])
        usleep(300_000)
        #expect(!watcher.hasExited, "SIGTERM is ignored")
        #expect(stopper.poll(nowMonotonic: 51_999).isEmpty, "not before the grace")
        usleep(100_000)
        #expect(!watcher.hasExited)
        #expect(stopper.isStopping(ref))

        #expect(stopper.poll(nowMonotonic: 52_000) == [ref])
        let status = try #require(reap(pid))
        #expect(status & 0x7F == SIGKILL)
        #expect(watcher.hasExited)
        #expect(stopper.poll(nowMonotonic: 52_001).isEmpty)
        #expect(stopper.pending == 0)
    }

    /// Gives a new process the PID of one that was reaped (through ns_last_pid) and checks that neither
    /// a stop by the old ref nor a pidfd taken on the old process reaches it.
    @Test func aReusedPidIsNeverSignalled() throws {
        let children = ProcChildren()
        let old = try spawnProcess("/bin/sleep", ["1004"])
        let oldRef = ProcessRef(pid: old, startTime: try #require(procStartTime(old)))
        let oldHandle = try ProcessHandle.open(oldRef)
        // Start times are in clock ticks (10 ms): let a few pass, or the new process could share it.
        usleep(50_000)
        killAndReap(old)
        #expect(oldHandle.hasExited)
        #expect(try oldHandle.signal(SIGKILL) == false, "ESRCH is reported as not delivered")

        var reused: Int32?
        for _ in 0..<200 {
            guard let file = fopen("/proc/sys/kernel/ns_last_pid", "w") else { break }
            fputs("\(old - 1)", file)
            guard fclose(file) == 0 else { break }
            let pid = try children.spawn("/bin/sleep", ["1005"])
            if pid == old {
                reused = pid
                break
            }
            children.kill(pid)
        }
        guard let reused else {
            // ns_last_pid is not writable here, or other forks always won: the pidfd check above ran.
            print("aReusedPidIsNeverSignalled: could not make PID \(old) be reused; checked the stale pidfd only")
            return
        }
        let newStart = try #require(procStartTime(reused))
        #expect(newStart != oldRef.startTime)

        let stopper = ProcessStopper(graceMilliseconds: 0)
        #expect(stopper.stop([oldRef], nowMonotonic: 0).isEmpty)
        #expect(stopper.pending == 0)
        #expect(stopper.poll(nowMonotonic: 1_000).isEmpty)
        #expect(throws: LinuxError.self) { try ProcessHandle.open(oldRef) }
        do {
            _ = try ProcessHandle.open(oldRef)
        } catch {
            #expect(error.errno == .noSuchProcess)
        }
        #expect(try oldHandle.signal(SIGKILL) == false, "the old pidfd does not reach the new process")
        #expect(oldHandle.hasExited)

        usleep(100_000)
        var status: Int32 = 0
        #expect(waitpid(reused, &status, WNOHANG) == 0, "the new process with the old PID still runs")
        let newHandle = try ProcessHandle.open(ProcessRef(pid: reused, startTime: newStart))
        #expect(!newHandle.hasExited)
        #expect(try newHandle.signal(0))
    }

    @Test func handleOfAGoneProcessCannotBeOpened() throws {
        let pid = try spawnProcess("/bin/true", [])
        let start = procStartTime(pid) ?? 0
        reap(pid)
        #expect(throws: LinuxError.self) { try ProcessHandle.open(ProcessRef(pid: pid, startTime: start)) }
        #expect(throws: LinuxError.self) { try ProcessHandle.open(ProcessRef(pid: 0, startTime: 0)) }
        // Our own PID with a wrong start time: the check after pidfd_open refuses it.
        let own = try #require(procStartTime(getpid()))
        #expect(throws: LinuxError.self) { try ProcessHandle.open(ProcessRef(pid: getpid(), startTime: own + 1)) }
        #expect(try ProcessHandle.open(ProcessRef(pid: getpid(), startTime: own)).hasExited == false)
    }

    // MARK: ProcessTree on a sample

    @Test func treeIsRootsFirstAndSkipsStaleParents() {
        func process(_ pid: Int32, parent: Int32, start: UInt64) -> TrackedProcess {
            TrackedProcess(pid: pid, parentPid: parent, uid: 1000, startTime: start, facts: ProcessFacts())
        }
        let sample = Dictionary(
            uniqueKeysWithValues: [
                process(1, parent: 0, start: 1), process(10, parent: 1, start: 100), process(11, parent: 10, start: 110),
                process(12, parent: 10, start: 111), process(13, parent: 11, start: 120),
                // Claims 10 as parent but started before it: a stale parent PID.
                process(14, parent: 10, start: 50), process(20, parent: 1, start: 200), process(21, parent: 20, start: 210),
            ].map { ($0.pid, $0) })
        let root = ProcessRef(pid: 10, startTime: 100)
        #expect(
            ProcessTree.withDescendants(of: [root], in: sample).map(\.pid) == [10, 11, 12, 13])
        #expect(
            ProcessTree.withDescendants(of: [ProcessRef(pid: 20, startTime: 200), root, root], in: sample).map(\.pid)
                == [20, 10, 21, 11, 12, 13])
        // PID 10 is another process now: the root alone, none of the other process's children.
        #expect(ProcessTree.withDescendants(of: [ProcessRef(pid: 10, startTime: 99)], in: sample).map(\.pid) == [10])
        #expect(ProcessTree.withDescendants(of: [ProcessRef(pid: 99, startTime: 1)], in: sample).map(\.pid) == [99])
    }

    // MARK: Terminals

    @Test func terminalMessageReachesOnlyTheUsersTerminals() throws {
        let mine = try PseudoTerminal(owner: 4242)
        let theirs = try PseudoTerminal(owner: 4243)
        let written = TerminalMessages.write("Bedtime in 5 minutes.\nSave your work.\u{1B}[2J", toTerminalsOf: 4242)
        #expect(written == [mine.slavePath])
        let expected = "\u{07}\r\nCurfew: Bedtime in 5 minutes. Save your work.?[2J\r\n"
        #expect(mine.readAvailable(within: 2_000) == expected)
        #expect(theirs.readAvailable(within: 200) == "")
        #expect(TerminalMessages.write("nobody", toTerminalsOf: 4244).isEmpty)
    }

    @Test func terminalMessageIgnoresFilesAndLinksThatAreNotTerminals() throws {
        let terminal = try PseudoTerminal(owner: 4245)
        let directory = ProcTestDirectory()
        try directory.write("pts/0", "not a terminal")
        #expect(chown(directory.path + "/pts/0", 4245, 4245) == 0)
        try directory.symlink("pts/1", to: terminal.slavePath)
        try directory.symlink("tty3", to: terminal.slavePath)
        #expect(TerminalMessages.write("hello", toTerminalsOf: 4245, devRoot: directory.path).isEmpty)
        #expect(try directory.read("pts/0") == "not a terminal")
        #expect(terminal.readAvailable(within: 100) == "")
    }

    // MARK: Desktop notifications

    @Test func notificationReachesTheUsersNotificationServer() throws {
        let bus = try UserSessionBus(startNotificationServer: true)
        let started = ContinuousClock.now
        let result = DesktopNotifier.send(
            summary: "-5 minutes left", body: "Save your work, \"now\".", urgency: 2, uid: bus.account.uid,
            gid: bus.account.gid, busAddress: bus.address)
        if case .failure(let error) = result { Issue.record("send failed: \(error)") }
        #expect(ContinuousClock.now - started < .seconds(3))
        let calls = try bus.notifyCalls()
        #expect(calls.contains("\"Curfew\" u 0 s \"\" s \"-5 minutes left\" s \"Save your work, \\\"now\\\".\""), "\(calls)")
        #expect(calls.contains("a{sv} 1 \"urgency\" y 2 i -1"), "\(calls)")
    }

    @Test func notificationWithoutAServerFailsQuickly() throws {
        let bus = try UserSessionBus(startNotificationServer: false)
        let started = ContinuousClock.now
        let result = DesktopNotifier.send(
            summary: "s", body: "b", urgency: 1, uid: bus.account.uid, gid: bus.account.gid, busAddress: bus.address,
            timeoutMilliseconds: 3_000)
        #expect(ContinuousClock.now - started < .seconds(3))
        guard case .failure(let error) = result else {
            Issue.record("no notification server, yet success")
            return
        }
        #expect(error.errno == .ioError)
        #expect(error.operation.contains("org.freedesktop.Notifications"), "\(error)")
    }

    @Test func notificationToABusThatNeverAnswersTimesOut() throws {
        let account = try NotifyTestAccount.ensure()
        let directory = try UserSessionBus.makeDirectory(for: account)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A socket that takes connections (the backlog) but never answers the authentication.
        let socketPath = directory + "/silent"
        let listener = try listeningSocket(at: socketPath)
        defer { close(listener) }
        #expect(chmod(socketPath, 0o777) == 0)
        let started = ContinuousClock.now
        let result = DesktopNotifier.send(
            summary: "s", body: "b", urgency: 0, uid: account.uid, gid: account.gid,
            busAddress: "unix:path=\(socketPath)", timeoutMilliseconds: 700)
        let elapsed = ContinuousClock.now - started
        #expect(elapsed < .seconds(3), "\(elapsed)")
        guard case .failure(let error) = result else {
            Issue.record("a silent bus, yet success")
            return
        }
        #expect(error.errno == .timedOut, "\(error)")
    }

    @Test func sessionBusAddressNeedsTheSocket() throws {
        let directory = ProcTestDirectory()
        try FileManager.default.createDirectory(atPath: directory.path + "/4242", withIntermediateDirectories: true)
        let listener = try listeningSocket(at: directory.path + "/4242/bus")
        defer { close(listener) }
        try directory.write("4243/bus", "a file")
        #expect(
            DesktopNotifier.sessionBusAddress(uid: 4242, runtimeRoot: directory.path)
                == "unix:path=\(directory.path)/4242/bus")
        #expect(DesktopNotifier.sessionBusAddress(uid: 4243, runtimeRoot: directory.path) == nil)
        #expect(DesktopNotifier.sessionBusAddress(uid: 4244, runtimeRoot: directory.path) == nil)
        #expect(DesktopNotifier.escapeAddressValue("/run/user/1000/bus") == "/run/user/1000/bus")
        #expect(DesktopNotifier.escapeAddressValue("/tmp/a b,c=d") == "/tmp/a%20b%2cc%3dd")
    }
}

// MARK: - Helpers

/// A pseudo-terminal pair (posix_openpt, grantpt, unlockpt, ptsname_r) whose slave is in raw mode and
/// owned by `owner` (fchown), with both ends held open as a logged-in user's shell would.
final class PseudoTerminal {
    let master: Int32
    let slave: Int32
    let slavePath: String

    init(owner: UInt32) throws {
        master = try LinuxError.check("posix_openpt") { posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC) }
        var name = [CChar](repeating: 0, count: 128)
        guard grantpt(master) == 0, unlockpt(master) == 0, ptsname_r(master, &name, name.count) == 0 else {
            close(master)
            throw LinuxError(operation: "grantpt/unlockpt/ptsname_r", errno: Errno(rawValue: errno))
        }
        let path = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        slavePath = path
        do {
            slave = try LinuxError.check("open \(path)") { open(path, O_RDWR | O_NOCTTY | O_CLOEXEC) }
        } catch {
            close(master)
            throw error
        }
        var settings = termios()
        tcgetattr(slave, &settings)
        cfmakeraw(&settings)
        tcsetattr(slave, TCSANOW, &settings)
        fchown(slave, owner, 5)
    }

    deinit {
        close(slave)
        close(master)
    }

    /// What the master can read within `milliseconds` (stops at the first quiet 100 ms after data).
    func readAvailable(within milliseconds: Int32) -> String {
        var bytes: [UInt8] = []
        var wait = milliseconds
        while true {
            var poller = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, wait) > 0 else { break }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = read(master, &chunk, chunk.count)
            guard count > 0 else { break }
            bytes += chunk.prefix(count)
            wait = 100
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A listening AF_UNIX stream socket at `path` that nobody accepts on.
func listeningSocket(at path: String) throws -> Int32 {
    let fd = try LinuxError.check("socket") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { buffer in
        for (index, byte) in path.utf8.prefix(buffer.count - 1).enumerated() { buffer[index] = byte }
    }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0, listen(fd, 16) == 0 else {
        let code = errno
        close(fd)
        throw LinuxError(operation: "bind/listen \(path)", errno: Errno(rawValue: code))
    }
    return fd
}

/// An unprivileged account for the notification tests (useradd when missing).
enum NotifyTestAccount {
    static let name = "curfewnotify"

    static func ensure() throws -> Accounts.Account {
        if let account = Accounts.account(named: name) { return account }
        let pid = try spawnProcess(
            "/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name])
        let status = reap(pid)
        // A test running in parallel may have created it meanwhile.
        guard let account = Accounts.account(named: name) else {
            throw LinuxError(operation: "useradd \(name): status \(status ?? -1)", errno: .noSuchFileOrDirectory)
        }
        return account
    }
}

/// A dbus-daemon session bus run by `curfewnotify` in a directory of its own, and optionally
/// python-dbusmock's notification_daemon template on it, also as that user.
final class UserSessionBus {
    let account: Accounts.Account
    let directory: String
    var address: String { "unix:path=\(directory)/bus" }
    private var pids: [Int32] = []

    /// A fresh directory under /tmp owned by the account, mode 0700.
    static func makeDirectory(for account: Accounts.Account) throws -> String {
        var template = Array("/tmp/curfew-notify-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else { throw LinuxError(operation: "mkdtemp", errno: Errno(rawValue: errno)) }
        let directory = String(cString: created)
        guard chown(directory, account.uid, account.gid) == 0 else {
            throw LinuxError(operation: "chown \(directory)", errno: Errno(rawValue: errno))
        }
        return directory
    }

    init(startNotificationServer: Bool) throws {
        account = try NotifyTestAccount.ensure()
        directory = try Self.makeDirectory(for: account)
        do {
            try busConfiguration.write(toFile: directory + "/bus.conf", atomically: false, encoding: .utf8)
            pids.append(
                try spawnProcess(
                    "/usr/bin/dbus-daemon",
                    ["--config-file=\(directory)/bus.conf", "--address=\(address)", "--nofork", "--nopidfile"],
                    uid: account.uid, gid: account.gid,
                    options: SpawnOptions(environment: environment, output: directory + "/dbus-daemon.log")))
            let socket = directory + "/bus"
            guard
                pollUntil(seconds: 10, {
                    var status = stat()
                    return stat(socket, &status) == 0 && status.st_mode & S_IFMT == S_IFSOCK
                })
            else { throw LinuxError(operation: "dbus-daemon did not listen: \(log("dbus-daemon.log"))", errno: .timedOut) }
            guard startNotificationServer else { return }
            pids.append(
                try spawnProcess(
                    "/usr/bin/python3", ["-m", "dbusmock", "--session", "-t", "notification_daemon"],
                    uid: account.uid, gid: account.gid,
                    options: SpawnOptions(
                        environment: environment.merging(["DBUS_SESSION_BUS_ADDRESS": address]) { $1 },
                        output: directory + "/dbusmock.log")))
            guard
                pollUntil(seconds: 15, {
                    (try? busctl(
                        "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner",
                        "s", "org.freedesktop.Notifications").contains("b true")) == true
                })
            else { throw LinuxError(operation: "dbusmock did not start: \(log("dbusmock.log"))", errno: .timedOut) }
        } catch {
            shutdown()
            throw error
        }
    }

    deinit { shutdown() }

    private var environment: [String: String] {
        ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": directory]
    }

    private func log(_ name: String) -> String {
        (try? String(contentsOfFile: directory + "/" + name, encoding: .utf8)) ?? ""
    }

    private func shutdown() {
        for pid in pids.reversed() { killAndReap(pid) }
        pids.removeAll()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// busctl on this bus as the account; its standard output (throws unless it exits with 0).
    func busctl(_ arguments: String...) throws -> String {
        let output = directory + "/busctl.out"
        let pid = try spawnProcess(
            "/usr/bin/busctl", ["--address=\(address)", "--"] + arguments, uid: account.uid, gid: account.gid,
            options: SpawnOptions(environment: environment, output: output, truncate: true))
        let status = reap(pid)
        let text = log("busctl.out")
        guard status == 0 else { throw LinuxError(operation: "busctl \(arguments): \(status ?? -1): \(text)", errno: .ioError) }
        return text
    }

    /// The mock's record of Notify calls (org.freedesktop.DBus.Mock.GetMethodCalls), as busctl prints it.
    func notifyCalls() throws -> String {
        try busctl(
            "call", "org.freedesktop.Notifications", "/org/freedesktop/Notifications", "org.freedesktop.DBus.Mock",
            "GetMethodCalls", "s", "Notify")
    }
}
