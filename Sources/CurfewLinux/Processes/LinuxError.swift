import Glibc
import CLinux
import CurfewPOSIX
import SystemPackage

/// A system call of the machine layer (processes, the host: sockets, inotify, eventfd) failed: which
/// call (and on what), and the `Errno` it failed with.
public struct LinuxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The C function and its object, e.g. `open /proc/42/stat` or `bind NETLINK_CONNECTOR`.
    public var operation: String
    public var errno: Errno

    public init(operation: String, errno: Errno) {
        self.operation = operation
        self.errno = errno
    }

    public var description: String { "\(operation): \(errno) (errno \(errno.rawValue))" }

    /// A libc call's result through `Errno.check` (EINTR retried, -1 thrown with the errno it set),
    /// with the call named. `operation` is only evaluated on failure, so hot paths can describe the
    /// call without paying for the string.
    @discardableResult
    public static func check<Result: FixedWidthInteger>(
        _ operation: @autoclosure () -> String, retryOnInterrupt: Bool = true, _ body: () -> Result
    ) throws(LinuxError) -> Result {
        do {
            return try Errno.check(retryOnInterrupt: retryOnInterrupt, body)
        } catch {
            throw LinuxError(operation: operation(), errno: error)
        }
    }

    /// For functions that return an error number instead of setting errno (`posix_spawn`,
    /// `pthread_*`): 0 is success, EINTR is retried, anything else is thrown.
    public static func checkErrorNumber(_ operation: @autoclosure () -> String, _ body: () -> Int32) throws(LinuxError) {
        do {
            try Errno.checkErrorNumber(body)
        } catch {
            throw LinuxError(operation: operation(), errno: error)
        }
    }
}

extension LinuxError {
    /// socketpair(2) of Unix stream sockets, close-on-exec: a pipe that takes SOCK_CLOEXEC (Swift does
    /// not import pipe2), so children other threads spawn meanwhile keep no end open. `ours` is the
    /// end this process keeps, `theirs` the one it hands on; the caller closes both.
    public static func socketPair(_ operation: @autoclosure () -> String) throws(LinuxError) -> (ours: FileDescriptor, theirs: FileDescriptor) {
        var ends: [Int32] = [-1, -1]
        try check(operation()) { socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) }
        return (FileDescriptor(rawValue: ends[0]), FileDescriptor(rawValue: ends[1]))
    }
}
