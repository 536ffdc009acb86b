import SystemPackage
import CLinux
import Glibc

/// One process, not just a PID: PIDs are reused, (pid, start time) is not.
public struct ProcessRef: Sendable, Hashable, CustomStringConvertible {
    public var pid: Int32
    /// Field 22 of `/proc/PID/stat`, clock ticks after boot (as `TrackedProcess.startTime`).
    public var startTime: UInt64

    public init(pid: Int32, startTime: UInt64) {
        self.pid = pid
        self.startTime = startTime
    }

    public init(_ process: TrackedProcess) {
        self.init(pid: process.pid, startTime: process.startTime)
    }

    public var description: String { "\(pid)@\(startTime)" }
}

/// A pidfd: a descriptor that names one process for as long as it is open, so a signal sent through
/// it reaches that process or nothing, never a later process that got the same PID.
///
/// Immutable, so it may be shared; closes its descriptor in deinit.
public final class ProcessHandle: Sendable {
    public let ref: ProcessRef
    /// The pidfd, open until the handle is released.
    public let descriptor: FileDescriptor

    private init(ref: ProcessRef, descriptor: FileDescriptor) {
        self.ref = ref
        self.descriptor = descriptor
    }

    deinit { try? descriptor.close() }

    /// pidfd_open(2) on `ref.pid`, then reads the start time of `procRoot/PID/stat` again: if it is not
    /// `ref.startTime` the PID was reused before the descriptor was taken, and this throws ESRCH. (Once
    /// the descriptor is open it cannot come to name another process, and a process that got the PID
    /// before the open has a later start time, so the check after the open is the one that counts.)
    ///
    /// Throws ESRCH when the process is gone (or reused), EPERM/EACCES/ENOENT as the kernel or /proc say.
    /// A zombie (exited, not yet reaped) can still be opened; `hasExited` is then true at once.
    public static func open(_ ref: ProcessRef, procRoot: String = "/proc") throws(LinuxError) -> ProcessHandle {
        guard ref.pid > 0 else { throw LinuxError(operation: "pidfd_open \(ref.pid)", errno: .noSuchProcess) }
        let descriptor = try LinuxError.check("pidfd_open \(ref.pid)") { pidfd_open(ref.pid, 0) }
        let handle = ProcessHandle(ref: ref, descriptor: FileDescriptor(rawValue: descriptor))
        let path = "\(procRoot)/\(ref.pid)/stat"
        guard let startTime = try readStartTime(path) else {
            throw LinuxError(operation: "read \(path): no start time", errno: .noSuchProcess)
        }
        guard startTime == ref.startTime else {
            throw LinuxError(
                operation: "pidfd_open \(ref.pid): started at \(startTime), not \(ref.startTime) (PID reused)",
                errno: .noSuchProcess)
        }
        return handle
    }

    /// pidfd_send_signal(2). True when the kernel accepted the signal (a zombie accepts and ignores
    /// it); false when the process has been reaped (ESRCH), which is not an error: what was to be
    /// stopped is gone, and the descriptor never names a later process with the same PID. Other
    /// errors (EPERM) are thrown.
    @discardableResult
    public func signal(_ signal: Int32) throws(LinuxError) -> Bool {
        do {
            try LinuxError.check("pidfd_send_signal \(ref) \(signal)") {
                pidfd_send_signal(descriptor.rawValue, signal, nil, 0)
            }
            return true
        } catch where error.errno == .noSuchProcess {
            return false
        }
    }

    /// poll(2) with timeout 0: a pidfd becomes readable when its process has exited (the whole thread
    /// group), whether or not it has been reaped yet.
    public var hasExited: Bool {
        var poller = pollfd(fd: descriptor.rawValue, events: Int16(POLLIN), revents: 0)
        guard let ready = try? LinuxError.check("poll pidfd \(ref)", { poll(&poller, 1, 0) }) else { return false }
        return ready > 0 && poller.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0
    }

    /// Field 22 of a stat file; nil when it does not exist (the process is gone) or does not parse.
    static func readStartTime(_ path: String) throws(LinuxError) -> UInt64? {
        let fd: FileDescriptor
        do {
            fd = FileDescriptor(rawValue: try LinuxError.check("open \(path)") { Glibc.open(path, O_RDONLY | O_CLOEXEC) })
        } catch where error.errno == .noSuchFileOrDirectory || error.errno == .noSuchProcess {
            return nil
        }
        defer { try? fd.close() }
        // One line of at most a few hundred bytes (the command name is at most 64 bytes).
        var buffer = [UInt8](repeating: 0, count: 2048)
        var total = 0
        while total < buffer.count {
            let count: Int
            do {
                count = try LinuxError.check("read \(path)") {
                    buffer.withUnsafeMutableBytes { bytes in read(fd.rawValue, bytes.baseAddress! + total, bytes.count - total) }
                }
            } catch where error.errno == .noSuchProcess {
                return nil
            }
            if count == 0 { break }
            total += count
        }
        return buffer.withUnsafeBytes { bytes in
            ProcFiles.parseStat(UnsafeRawBufferPointer(rebasing: bytes[0..<total]))?.startTime
        }
    }
}
