import Glibc
import CLinux
import CurfewPOSIX
import SystemPackage

/// A libsystemd call failed, with the `Errno` it returned (libsystemd returns it negated; see
/// `Errno.checkNegated`). For a D-Bus method call that returned an error reply, `busErrorName` and
/// `busErrorMessage` carry the reply's error name (for example `org.freedesktop.DBus.Error.ServiceUnknown`)
/// and text.
public struct LinuxSystemdError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The C function or D-Bus member that failed, for example `sd_bus_start` or
    /// `call org.freedesktop.login1.Manager.LockSession`.
    public var operation: String
    public var errno: Errno
    public var busErrorName: String?
    public var busErrorMessage: String?

    public init(operation: String, errno: Errno, busErrorName: String? = nil, busErrorMessage: String? = nil) {
        self.operation = operation
        self.errno = errno
        self.busErrorName = busErrorName
        self.busErrorMessage = busErrorMessage
    }

    public var description: String {
        var text = "\(operation): \(errno)"
        if let busErrorName {
            text += " (\(busErrorName)"
            if let busErrorMessage, !busErrorMessage.isEmpty { text += ": \(busErrorMessage)" }
            text += ")"
        }
        return text
    }

    /// A libsystemd call's result through `Errno.checkNegated` (-EINTR retried, any other negative
    /// value thrown), with the call named; non-negative values pass through.
    @discardableResult
    static func check(_ operation: @autoclosure () -> String, _ body: () -> Int32) throws(LinuxSystemdError) -> Int32 {
        do {
            return try Errno.checkNegated(body)
        } catch {
            throw LinuxSystemdError(operation: operation(), errno: error)
        }
    }
}
