import SystemPackage
import CurfewPOSIX
#if canImport(Glibc)
    import Glibc
    import CLinux
#endif

/// inotify on one directory: tells that something in it was created, renamed into it, written or
/// removed. Callers rescan the directory; the events themselves carry nothing they rely on, so a
/// queue overflow costs nothing.
public final class DirectoryWatch: Sendable {
    let fd: Int32
    public let path: String

    /// inotify_init1 + inotify_add_watch.
    public init(path: String) throws(LinuxError) {
        let fd = try LinuxError.check("inotify_init1") { inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK)) }
        let mask = UInt32(IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_ATTRIB)
        do {
            try LinuxError.check("inotify_add_watch \(path)") { inotify_add_watch(fd, path, mask) }
        } catch {
            close(fd)
            throw error
        }
        self.fd = fd
        self.path = path
    }

    /// Waits up to `timeoutMilliseconds` (negative: no limit) for changes, or until one of
    /// `descriptors` is readable (a stop); true if there were changes (all pending events are
    /// consumed).
    public func waitForChange(timeoutMilliseconds: Int32, orUntilReadable descriptors: [Int32] = []) -> Bool {
        var pollers = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        pollers += descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        // An interrupted wait is a wait without a change: the caller's loop waits again.
        guard case .success(let ready) = valueOrErrno(retryOnInterrupt: false, { poll(&pollers, nfds_t(pollers.count), timeoutMilliseconds) }),
            ready > 0, pollers[0].revents != 0
        else { return false }
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var changed = false
        while true {
            // Until the queue is empty (EAGAIN: the descriptor is non-blocking) or the read fails.
            guard case .success(let count) = valueOrErrno({ buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) } }),
                count > 0
            else { break }
            changed = true
        }
        return changed
    }

    deinit { close(fd) }
}
