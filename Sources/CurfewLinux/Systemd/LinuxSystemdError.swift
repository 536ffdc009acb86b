import Glibc
import CLinux

/// A libsystemd call failed. libsystemd reports failure as a negative errno; `errno` holds it positive.
/// For a D-Bus method call that returned an error reply, `busErrorName` and `busErrorMessage` carry the
/// reply's error name (for example `org.freedesktop.DBus.Error.ServiceUnknown`) and text.
public struct LinuxSystemdError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The C function or D-Bus member that failed, for example `sd_bus_start` or
    /// `call org.freedesktop.login1.Manager.LockSession`.
    public var operation: String
    /// A positive errno value.
    public var errno: Int32
    public var busErrorName: String?
    public var busErrorMessage: String?

    public init(operation: String, errno: Int32, busErrorName: String? = nil, busErrorMessage: String? = nil) {
        self.operation = operation
        self.errno = errno
        self.busErrorName = busErrorName
        self.busErrorMessage = busErrorMessage
    }

    public var description: String {
        var text = "\(operation): \(String(cString: strerror(errno)))"
        if let busErrorName {
            text += " (\(busErrorName)"
            if let busErrorMessage, !busErrorMessage.isEmpty { text += ": \(busErrorMessage)" }
            text += ")"
        }
        return text
    }

    /// The one place that interprets libsystemd return codes: calls `body` again while it returns -EINTR,
    /// throws for any other negative value, and passes non-negative values through.
    @discardableResult
    static func check(_ operation: @autoclosure () -> String, _ body: () -> Int32) throws(LinuxSystemdError) -> Int32 {
        while true {
            let result = body()
            if result >= 0 { return result }
            if result == -EINTR { continue }
            throw LinuxSystemdError(operation: operation(), errno: -result)
        }
    }
}
