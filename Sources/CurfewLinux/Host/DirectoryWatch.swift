import SystemPackage
import CurfewPOSIX
#if canImport(Glibc)
    import Glibc
    import CLinux
#endif

/// inotify on one directory (or several, in one instance): tells that something in it was created,
/// renamed into it, written or removed. Callers rescan the directory; the events themselves carry
/// nothing they rely on, so a queue overflow costs nothing.
public final class DirectoryWatch: Sendable {
    /// The inotify instance, open for as long as the watch.
    let fd: FileDescriptor
    /// What is watched, in the order given.
    public let paths: [String]
    /// The first (for a watch of one directory, the only) path watched.
    public var path: String { paths[0] }

    /// A directory's changes: an entry created, renamed in or out, written, removed, or its metadata.
    static let directoryEvents = UInt32(IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_ATTRIB)

    /// inotify_init1 + inotify_add_watch.
    public convenience init(path: String) throws(LinuxError) { try self.init(paths: [path]) }

    /// One inotify instance watching every one of `paths` (at least one); throws if any cannot be watched.
    public convenience init(paths: [String]) throws(LinuxError) { try self.init(paths: paths, events: Self.directoryEvents) }

    /// inotify_init1 + one inotify_add_watch per path for `events` (paths may be files too).
    init(paths: [String], events: UInt32) throws(LinuxError) {
        precondition(!paths.isEmpty, "a DirectoryWatch watches at least one path")
        let fd = FileDescriptor(rawValue: try LinuxError.check("inotify_init1") { inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK)) })
        do {
            for path in paths {
                try LinuxError.check("inotify_add_watch \(path)") { inotify_add_watch(fd.rawValue, path, events) }
            }
        } catch {
            try? fd.close()
            throw error
        }
        self.fd = fd
        self.paths = paths
    }

    /// Waits up to `timeoutMilliseconds` (negative: no limit) for changes, or until one of
    /// `descriptors` (borrowed; nil ones are left out) is readable (a stop); true if there were
    /// changes (all pending events are consumed).
    public func waitForChange(timeoutMilliseconds: Int32, orUntilReadable descriptors: [FileDescriptor?] = []) -> Bool {
        var pollers = [pollfd(fd: fd.rawValue, events: Int16(POLLIN), revents: 0)]
        pollers += descriptors.map { pollfd(fd: $0?.rawValue ?? -1, events: Int16(POLLIN), revents: 0) }
        // An interrupted wait is a wait without a change: the caller's loop waits again.
        guard case .success(let ready) = valueOrErrno(retryOnInterrupt: false, { poll(&pollers, nfds_t(pollers.count), timeoutMilliseconds) }),
            ready > 0, pollers[0].revents != 0
        else { return false }
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var changed = false
        while true {
            // Until the queue is empty (EAGAIN: the descriptor is non-blocking) or the read fails.
            guard case .success(let count) = valueOrErrno({ buffer.withUnsafeMutableBytes { read(fd.rawValue, $0.baseAddress, $0.count) } }),
                count > 0
            else { break }
            changed = true
        }
        return changed
    }

    deinit { try? fd.close() }
}

extension DirectoryWatch {
    /// Filesystems whose files other computers change without this kernel knowing, so inotify never
    /// hears of it: network filesystems, and FUSE (`fuse.sshfs`, ...), whose server may be anywhere.
    static let blindTypes: Set<String> = [
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "9p", "afs", "coda", "ncpfs", "glusterfs", "lustre", "gfs2",
        "ocfs2", "davfs", "fuse", "fuseblk",
    ]

    /// Whether inotify on `path` may miss changes: it lies on a network or FUSE filesystem (by its
    /// device in `mountInfo`); false when that cannot be told.
    public static func mayMissChanges(in path: String, mountInfo: String = "/proc/self/mountinfo") -> Bool {
        var status = stat()
        guard stat(path, &status) == 0, let text = ExecGuard.readSmallFile(mountInfo) else { return false }
        // The kernel's encoding of a device number (glibc's gnu_dev_major and gnu_dev_minor).
        let device = UInt64(status.st_dev)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
        let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
        let mounted = ExecGuard.parseMountInfo(text).filter { $0.device == "\(major):\(minor)" }
        return mounted.contains { blindTypes.contains($0.type) || $0.type.hasPrefix("fuse.") }
    }

    /// Calls `look` until it finds something or no time is left (`remainingMilliseconds`, asked after
    /// each look), and in between sleeps until something in `directory` changes. While `directory`
    /// does not exist its parent is watched (where it will appear). Where inotify can be blind (a
    /// network filesystem, or no watch could be had) it looks again every `recheckMilliseconds` too.
    public static func lookUntilFound<Found>(
        in directory: String, recheckMilliseconds: Int64 = 1_000, remainingMilliseconds: () -> Int64, _ look: () -> Found?
    ) -> Found? {
        lookUntilFound(in: [directory], recheckMilliseconds: recheckMilliseconds, remainingMilliseconds: remainingMilliseconds, look)
    }

    /// `lookUntilFound(in:)` for several directories (what `look` reads may arrive in any of them),
    /// all watched by one inotify instance; each that does not exist yet is waited for in its parent.
    public static func lookUntilFound<Found>(
        in directories: [String], recheckMilliseconds: Int64 = 1_000, remainingMilliseconds: () -> Int64, _ look: () -> Found?
    ) -> Found? {
        var watch: DirectoryWatch?
        var blind = true
        while true {
            // Made before the look, so that nothing that arrives after it goes unnoticed; made anew
            // when a directory waited for in its parent has appeared.
            let wanted = watchedPaths(for: directories)
            if !wanted.isEmpty, watch?.paths != wanted {
                if let made = try? DirectoryWatch(paths: wanted) {
                    watch = made
                    blind = wanted.contains { mayMissChanges(in: $0) }
                } else {
                    // The old watch (if any) still tells of some changes; the rest is looked for again.
                    blind = true
                }
            }
            if let found = look() { return found }
            let left = remainingMilliseconds()
            guard left > 0 else { return nil }
            let wait = blind ? min(left, recheckMilliseconds) : left
            if let watch {
                _ = watch.waitForChange(timeoutMilliseconds: Int32(clamping: wait))
            } else {
                _ = Readiness.wait([], timeoutMilliseconds: wait)
            }
        }
    }

    /// What to watch for `directories`: each one that is a directory, else its parent; without
    /// duplicates, in the order first met.
    static func watchedPaths(for directories: [String]) -> [String] {
        var paths: [String] = []
        for directory in directories {
            var status = stat()
            let isDirectory = stat(directory, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
            let path = isDirectory ? directory : parentDirectory(of: directory)
            if !paths.contains(path) { paths.append(path) }
        }
        return paths
    }

    /// `path` without its last component (`/` for a top-level name, `.` for a bare name).
    static func parentDirectory(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }
}
