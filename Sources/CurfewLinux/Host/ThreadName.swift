import SystemPackage
import Glibc

/// The kernel's name of the calling thread (what `top -H`, `ps -L` and /proc/PID/task/TID/comm show).
/// Foundation's `Thread.name` is Foundation's own; pthread_setname_np is a GNU extension Swift's Glibc
/// module does not declare, and writing the thread's comm file is what it does.
public enum ThreadName {
    /// Names the calling thread: the first 15 bytes of `name` (the kernel's TASK_COMM_LEN less the NUL).
    /// Whether it took.
    @discardableResult
    public static func set(_ name: String) -> Bool {
        let bytes = Array(name.utf8.prefix(15))
        let opened = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard opened >= 0 else { return false }
        let comm = FileDescriptor(rawValue: opened)
        defer { try? comm.close() }
        return bytes.withUnsafeBytes { write(comm.rawValue, $0.baseAddress, $0.count) } == bytes.count
    }
}
