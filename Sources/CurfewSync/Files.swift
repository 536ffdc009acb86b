#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import CurfewCore

/// A failed file operation: what was attempted, on which path, and errno.
public struct FileError: Error, Equatable, Sendable, CustomStringConvertible {
    public var operation: String
    public var path: String
    public var errno: Int32

    public init(_ operation: String, _ path: String, errno: Int32) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    public var description: String { "cannot \(operation) \(path): \(String(cString: strerror(errno)))" }

    public var isPermissionDenied: Bool { errno == EACCES || errno == EPERM }
    public var isMissing: Bool { errno == ENOENT || errno == ENOTDIR }
    /// A file over the size the reader accepts (`readRegularFile`'s `maxBytes`).
    public var isOversized: Bool { errno == EFBIG }

    /// A failure that says nothing about the file itself and may pass by the next try: out of
    /// descriptors or memory, an I/O error, a network file system that timed out or lost the handle.
    public var isTransient: Bool {
        [EMFILE, ENFILE, ENOMEM, EIO, EAGAIN, EINTR, ESTALE, ETIMEDOUT, ENOLCK, EBUSY].contains(errno)
    }
}

/// Small wrappers over POSIX calls, each checking its return code in one place and retrying EINTR.
public enum Files {
    static func check<T: BinaryInteger>(_ operation: String, _ path: String, _ body: () -> T) throws(FileError) -> T {
        while true {
            let result = body()
            if result >= 0 { return result }
            if errno == EINTR { continue }
            throw FileError(operation, path, errno: errno)
        }
    }

    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    public static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// `mkdir -p` with `mode` for the directories it creates.
    public static func makeDirectories(_ path: String, mode: mode_t) throws(FileError) {
        if isDirectory(path) { return }
        let parent = parentDirectory(of: path)
        if parent != path && !parent.isEmpty { try makeDirectories(parent, mode: mode) }
        if mkdir(path, mode) != 0 && errno != EEXIST { throw FileError("create directory", path, errno: errno) }
    }

    public static func parentDirectory(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }

    /// Reads a whole regular file, refusing symlinks, FIFOs, devices and files over `maxBytes`
    /// without blocking on them.
    public static func readRegularFile(_ path: String, maxBytes: Int) throws(FileError) -> [UInt8] {
        let fd = try check("open", path) { open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        defer { close(fd) }
        var info = stat()
        _ = try check("inspect", path) { fstat(fd, &info) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw FileError("read non-regular file", path, errno: EINVAL) }
        guard Int(info.st_size) <= maxBytes else { throw FileError("read oversized file", path, errno: EFBIG) }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var total = 0
        while true {
            let count = try check("read", path) {
                bytes.withUnsafeMutableBytes { buffer in read(fd, buffer.baseAddress! + total, buffer.count - total) }
            }
            if count == 0 { break }
            total += count
            if total == bytes.count {
                guard total <= maxBytes else { throw FileError("read oversized file", path, errno: EFBIG) }
                bytes.append(contentsOf: repeatElement(0, count: 4096))
            }
        }
        return Array(bytes[0..<total])
    }

    /// Writes `bytes` to `directory/name` atomically: a temporary name in the same directory
    /// (a dot file, which readers skip), fsync, rename, fsync of the directory. With
    /// `replace: false` an existing file is left alone and `false` returned.
    @discardableResult
    public static func writeAtomically(
        _ bytes: [UInt8], directory: String, name: String, mode: mode_t, replace: Bool = true
    ) throws(FileError) -> Bool {
        let target = "\(directory)/\(name)"
        if !replace && exists(target) { return false }
        let temporary = "\(directory)/.tmp-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = try check("create", temporary) { open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode) }
        var closed = false
        defer {
            if !closed { close(fd) }
        }
        do throws(FileError) {
            _ = try check("set mode of", temporary) { fchmod(fd, mode) }
            var written = 0
            while written < bytes.count {
                let count = try check("write", temporary) {
                    bytes.withUnsafeBytes { buffer in write(fd, buffer.baseAddress! + written, buffer.count - written) }
                }
                written += count
            }
            _ = try check("sync", temporary) { fsync(fd) }
            closed = true
            _ = try check("close", temporary) { close(fd) }
            if replace {
                _ = try check("rename", target) { rename(temporary, target) }
            } else {
                // link() fails if the target exists, so two writers never replace each other.
                if link(temporary, target) != 0 && errno != EEXIST { throw FileError("link", target, errno: errno) }
                unlink(temporary)
            }
        } catch {
            unlink(temporary)
            throw error
        }
        let dirfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirfd >= 0 {
            fsync(dirfd)
            close(dirfd)
        }
        return true
    }

    /// Removes a file (unlink), then syncs its directory so the removal survives a crash.
    public static func remove(_ path: String) throws(FileError) {
        _ = try check("remove", path) { unlink(path) }
        let directory = open(parentDirectory(of: path), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            fsync(directory)
            close(directory)
        }
    }

    /// The names in a directory, without `.` and `..`.
    public static func list(_ path: String) throws(FileError) -> [String] {
        guard let dir = opendir(path) else { throw FileError("list", path, errno: errno) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// `lstat` as a `FileIdentity`, plus whether it is a regular file.
    public static func identity(_ path: String) throws(FileError) -> (FileIdentity, isRegular: Bool) {
        var info = stat()
        _ = try check("inspect", path) { lstat(path, &info) }
        let identity = FileIdentity(
            device: Int64(info.st_dev), inode: Int64(info.st_ino), size: Int64(info.st_size),
            mtimeNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
            ctimeNanoseconds: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
        return (identity, (info.st_mode & S_IFMT) == S_IFREG)
    }
}
