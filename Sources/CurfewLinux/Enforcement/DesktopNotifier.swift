import CurfewPOSIX
import SystemPackage
import CLinux
import Glibc

/// Desktop notifications in a user's graphical session (org.freedesktop.Notifications.Notify).
///
/// The agent runs as root, and a session bus (dbus-daemon or dbus-broker) accepts only its owner's
/// uid, so the call is made by systemd's `busctl` running as that user, with a minimal environment
/// (nothing of root's DBUS_* variables) and no supplementary groups.
public enum DesktopNotifier {
    static let busctlCandidates = ["/usr/bin/busctl", "/bin/busctl"]

    /// Calls `Notify("Curfew", 0, "", summary, body, [], {"urgency": byte urgency}, -1)` on `busAddress`
    /// as `uid`/`gid` (`spawnProcess`, i.e. `setpriv --clear-groups`, then `busctl call`), waiting at
    /// most `timeoutMilliseconds` for it (then SIGKILL and reap).
    ///
    /// `urgency`: 0 low, 1 normal, 2 critical (larger values are sent as 2). Errors: ENOENT when busctl
    /// is missing; the spawn's own errors; ETIMEDOUT when busctl did not finish in time; EIO when it
    /// failed (no notification server, no bus, refused), with busctl's message in `operation`.
    public static func send(
        summary: String, body: String, urgency: UInt8, uid: UInt32, gid: UInt32, busAddress: String,
        timeoutMilliseconds: Int = 3_000
    ) -> Result<Void, LinuxError> {
        guard let busctl = busctlCandidates.first(where: { access($0, X_OK) == 0 }) else {
            return .failure(LinuxError(operation: "busctl (systemd) not found", errno: .noSuchFileOrDirectory))
        }
        // busctl's own limit is a second later than ours, so the answer to "no reply in time" is always
        // ours (ETIMEDOUT), whichever stage (connect, authentication, call) hangs.
        let arguments = [
            "--address=\(busAddress)", "--timeout=\(max(timeoutMilliseconds, 0) + 1_000)ms", "--",
            "call", "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
            "org.freedesktop.Notifications", "Notify", "susssasa{sv}i",
            "Curfew", "0", "", summary, body, "0", "1", "urgency", "y", "\(min(urgency, 2))", "-1",
        ]
        let operation = "busctl Notify on \(busAddress) as uid \(uid)"
        do throws(LinuxError) {
            let result = try run(
                busctl, arguments, uid: uid, gid: gid, timeoutMilliseconds: timeoutMilliseconds, operation: operation)
            guard result.status != 0 else { return .success(()) }
            let message = result.errors.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            return .failure(LinuxError(operation: "\(operation): \(describe(result.status)): \(message)", errno: .ioError))
        } catch {
            return .failure(error)
        }
    }

    /// `unix:path=RUNTIME_ROOT/UID/bus` when that socket exists (stat(2)), the address systemd's
    /// user manager gives a session bus; nil otherwise (no session, or a bus elsewhere).
    public static func sessionBusAddress(uid: UInt32, runtimeRoot: String = "/run/user") -> String? {
        let path = "\(runtimeRoot)/\(uid)/bus"
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK else { return nil }
        return "unix:path=" + escapeAddressValue(path)
    }

    /// D-Bus address values: bytes outside `[-0-9A-Za-z_/.\*]` are written `%XX`.
    static func escapeAddressValue(_ value: String) -> String {
        var escaped = ""
        for byte in value.utf8 {
            let character = Character(Unicode.Scalar(byte))
            if character.isASCII && (character.isLetter || character.isNumber || "-_/.\\*".contains(character)) {
                escaped.append(character)
            } else {
                escaped += "%" + String(byte >> 4, radix: 16) + String(byte & 0xF, radix: 16)
            }
        }
        return escaped
    }

    private static func describe(_ status: Int32) -> String {
        status & 0x7F == 0 ? "exited with status \((status >> 8) & 0xFF)" : "killed by signal \(status & 0x7F)"
    }

    /// Runs `path` as `uid`/`gid` with standard output to /dev/null and standard error collected
    /// (up to 4 KiB); waits on a pidfd (pidfd_open(2), poll(2)) until it exits or the time is up.
    private static func run(
        _ path: String, _ arguments: [String], uid: UInt32, gid: UInt32, timeoutMilliseconds: Int, operation: String
    ) throws(LinuxError) -> (status: Int32, errors: String) {
        let deadline = ClockReading.read(CLOCK_MONOTONIC) + Int64(timeoutMilliseconds)
        // A socket pair rather than a pipe: socketpair takes SOCK_CLOEXEC (Swift does not import pipe2),
        // so children spawned meanwhile by other threads do not keep the write end open.
        let errorsPair = try LinuxError.socketPair("socketpair for \(operation)")
        defer { try? errorsPair.ours.close() }
        let pid: Int32
        do {
            defer { try? errorsPair.theirs.close() }
            let options = SpawnOptions(
                environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"], output: "/dev/null",
                passing: [SpawnOptions.Passing(from: errorsPair.theirs.rawValue, to: 2)])
            pid = try spawnProcess(path, arguments, uid: uid, gid: gid, options: options)
        }
        // Our unreaped child: its PID cannot be reused until we reap it, so kill(pid) is safe here.
        let opened = pidfd_open(pid, 0)
        let pidfd = opened >= 0 ? FileDescriptor(rawValue: opened) : nil
        defer { try? pidfd?.close() }
        _ = fcntl(errorsPair.ours.rawValue, F_SETFL, O_NONBLOCK)
        var errors: [UInt8] = []
        var readable = true
        while true {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                errorsPair.ours.drainAvailable(into: &errors, keeping: 4096, chunk: 1024)
                return (status, String(decoding: errors, as: UTF8.self))
            }
            let left = deadline - ClockReading.read(CLOCK_MONOTONIC)
            if left <= 0 {
                killAndReap(pid)
                throw LinuxError(operation: "\(operation): no answer within \(timeoutMilliseconds) ms", errno: .timedOut)
            }
            // Without a pidfd (it cannot fail for our own child, but still), wake up every 10 ms.
            var pollers = [
                pollfd(fd: pidfd?.rawValue ?? -1, events: Int16(POLLIN), revents: 0),
                pollfd(fd: readable ? errorsPair.ours.rawValue : -1, events: Int16(POLLIN), revents: 0),
            ]
            let slice = pidfd != nil ? left : min(left, 10)
            _ = poll(&pollers, 2, Int32(min(slice, Int64(Int32.max))))
            if pollers[1].revents != 0 { readable = errorsPair.ours.drainAvailable(into: &errors, keeping: 4096, chunk: 1024) }
        }
    }
}
