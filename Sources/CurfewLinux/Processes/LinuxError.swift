import Glibc
import CLinux

/// A system call of the machine layer (processes, the host: sockets, inotify, eventfd) failed: which
/// call (and on what), and errno.
public struct LinuxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The C function and its object, e.g. `open /proc/42/stat` or `bind NETLINK_CONNECTOR`.
    public var operation: String
    /// A positive errno value.
    public var errno: Int32

    public init(operation: String, errno: Int32) {
        self.operation = operation
        self.errno = errno
    }

    public var description: String { "\(operation): \(String(cString: strerror(errno))) (errno \(errno))" }

    /// The one place that interprets a system call's result: calls `body` again while it fails with
    /// EINTR, throws for -1 with the errno it set, and passes other values through. `operation` is
    /// only evaluated on failure, so hot paths can describe the call without paying for the string.
    @discardableResult
    public static func check<Result: SignedInteger>(
        _ operation: @autoclosure () -> String, _ body: () -> Result
    ) throws(LinuxError) -> Result {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = Glibc.errno
            if code == EINTR { continue }
            throw LinuxError(operation: operation(), errno: code)
        }
    }

    /// For functions that return an error number instead of setting errno (`posix_spawn`,
    /// `pthread_*`): 0 is success, EINTR is retried, anything else is thrown.
    public static func checkErrorNumber(_ operation: @autoclosure () -> String, _ body: () -> Int32) throws(LinuxError) {
        while true {
            let code = body()
            if code == 0 { return }
            if code == EINTR { continue }
            throw LinuxError(operation: operation(), errno: code)
        }
    }
}
