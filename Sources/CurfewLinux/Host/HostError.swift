#if canImport(Glibc)
    import Glibc
    import CLinux
#endif

/// A failed system call of the host layer: the call, and errno.
public struct HostError: Error, Sendable, Equatable, CustomStringConvertible {
    public var operation: String
    public var errno: Int32

    public init(_ operation: String, errno: Int32) {
        self.operation = operation
        self.errno = errno
    }

    public var description: String { "\(operation): \(String(cString: strerror(errno)))" }
}
