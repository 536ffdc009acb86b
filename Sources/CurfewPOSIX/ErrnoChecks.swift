#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif
import SystemPackage

// The one place that interprets a C call's return code. swift-system keeps its own `valueOrErrno` and
// `Errno.current` internal; these are the same rules, public: libc calls fail with -1 and set errno,
// `posix_spawn` and `pthread_*` return the error number, libsystemd returns the error number negated.
// With `retryOnInterrupt` (the default) a call interrupted by a signal (EINTR) is made again.

extension Errno {
    /// The errno the calling thread's last failed libc call set.
    public static var last: Errno { Errno(rawValue: errno) }

    /// Calls `body` (a libc call that returns -1 and sets errno on failure) and returns its result, or
    /// throws the errno it set. EINTR calls `body` again when `retryOnInterrupt`.
    @discardableResult
    @inlinable
    public static func check<Result: FixedWidthInteger>(
        retryOnInterrupt: Bool = true, _ body: () -> Result
    ) throws(Errno) -> Result {
        try valueOrErrno(retryOnInterrupt: retryOnInterrupt, body).get()
    }

    /// For a call that returns its error number instead of setting errno (`posix_spawn`, `pthread_*`):
    /// 0 is success, anything else is thrown.
    @inlinable
    public static func checkErrorNumber(retryOnInterrupt: Bool = true, _ body: () -> Int32) throws(Errno) {
        while true {
            let code = body()
            if code == 0 { return }
            if retryOnInterrupt && code == Errno.interrupted.rawValue { continue }
            throw Errno(rawValue: code)
        }
    }

    /// For a libsystemd call (sd-bus, sd-journal, sd-daemon, sd-login), which returns a negative errno on
    /// failure: the one place such a result becomes an `Errno`. Non-negative results pass through.
    @discardableResult
    @inlinable
    public static func checkNegated(retryOnInterrupt: Bool = true, _ body: () -> Int32) throws(Errno) -> Int32 {
        while true {
            let result = body()
            if result >= 0 { return result }
            if retryOnInterrupt && result == -Errno.interrupted.rawValue { continue }
            throw Errno(rawValue: -result)
        }
    }
}

/// `body`'s result, or the errno it set when it returned -1; EINTR calls it again when
/// `retryOnInterrupt`. For callers that branch on the errno (EAGAIN, ENOENT) instead of throwing it.
@inlinable
public func valueOrErrno<Result: FixedWidthInteger>(
    retryOnInterrupt: Bool = true, _ body: () -> Result
) -> Swift.Result<Result, Errno> {
    while true {
        let result = body()
        if result != -1 { return .success(result) }
        let code = Errno.last
        if retryOnInterrupt && code == .interrupted { continue }
        return .failure(code)
    }
}

extension Errno {
    /// EINTR, EAGAIN or EWOULDBLOCK: nothing went wrong, the call may be made again (after a poll).
    public var isTemporary: Bool { self == .interrupted || self == .resourceTemporarilyUnavailable || self == .wouldBlock }
}

extension Result where Failure == Errno {
    /// A failure whose errno is temporary (`Errno.isTemporary`); false for a success.
    public var isTemporaryFailure: Bool {
        if case .failure(let error) = self { return error.isTemporary }
        return false
    }
}
