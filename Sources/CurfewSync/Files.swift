#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import CurfewPOSIX
import SystemPackage
import CurfewCore

/// A failed file operation: what was attempted (a code), on which path, and the `Errno`.
public struct FileError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was attempted on the path.
    public enum Operation: Sendable, Equatable {
        case create, createDirectory, open, openDirectoryNotFollowingSymlink, inspect, list, read
        /// The path is a FIFO, device, directory or symlink where a regular file was expected.
        case readNonRegularFile
        /// The file is over the size the reader accepts (`readRegularFile`'s `maxBytes`).
        case readOversizedFile
        case write, setMode, sync, close, rename, link, remove
        /// Signing documents to be written into the directory at the path failed.
        case signConfirmations

        /// The words for people: "cannot <words> <path>: <errno>".
        public var words: String {
            switch self {
            case .create: "create"
            case .createDirectory: "create directory"
            case .open: "open"
            case .openDirectoryNotFollowingSymlink: "open directory (not a symlink)"
            case .inspect: "inspect"
            case .list: "list"
            case .read: "read"
            case .readNonRegularFile: "read non-regular file"
            case .readOversizedFile: "read oversized file"
            case .write: "write"
            case .setMode: "set mode of"
            case .sync: "sync"
            case .close: "close"
            case .rename: "rename"
            case .link: "link"
            case .remove: "remove"
            case .signConfirmations: "sign confirmations in"
            }
        }
    }

    public var operation: Operation
    public var path: String
    public var errno: Errno

    public init(_ operation: Operation, _ path: String, errno: Errno) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    public var description: String { "cannot \(operation.words) \(path): \(errno)" }

    public var isPermissionDenied: Bool { errno == .permissionDenied || errno == .notPermitted }
    public var isMissing: Bool { errno == .noSuchFileOrDirectory || errno == .notDirectory }
    /// A file over the size the reader accepts (`readRegularFile`'s `maxBytes`).
    public var isOversized: Bool { operation == .readOversizedFile }

    /// A failure that says nothing about the file itself and may pass by the next try: out of
    /// descriptors or memory, an I/O error, a network file system that timed out or lost the handle.
    public var isTransient: Bool {
        let passing: [Errno] = [
            .tooManyOpenFiles, .tooManyOpenFilesInSystem, .noMemory, .ioError, .resourceTemporarilyUnavailable,
            .interrupted, .staleNFSFileHandle, .timedOut, .noLocks, .resourceBusy,
        ]
        return passing.contains(errno)
    }
}

/// Small wrappers over POSIX calls, each checking its return code through `Errno.check` (EINTR retried).
public enum Files {
    static func check<T: FixedWidthInteger>(_ operation: FileError.Operation, _ path: String, _ body: () -> T) throws(FileError) -> T {
        do {
            return try Errno.check(body)
        } catch {
            throw FileError(operation, path, errno: error)
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
        if case .failure(let error) = valueOrErrno({ mkdir(path, mode) }), error != .fileExists {
            throw FileError(.createDirectory, path, errno: error)
        }
    }

    public static func parentDirectory(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }

    /// swift-system's throwing calls with the operation named: their `Errno` becomes a `FileError`.
    static func attempt<T>(_ operation: FileError.Operation, _ path: String, _ body: () throws -> T) throws(FileError) -> T {
        do {
            return try body()
        } catch let error as FileError {
            throw error
        } catch {
            throw FileError(operation, path, errno: error as? Errno ?? .ioError)
        }
    }

    /// Reads a whole regular file, refusing symlinks, FIFOs, devices and files over `maxBytes`
    /// without blocking on them.
    public static func readRegularFile(_ path: String, maxBytes: Int) throws(FileError) -> [UInt8] {
        let file = try attempt(.open, path) {
            try FileDescriptor.open(FilePath(path), .readOnly, options: [.noFollow, .nonBlocking, .closeOnExec])
        }
        return try attempt(.close, path) {
            try file.closeAfter { () throws -> [UInt8] in
                var info = stat()
                _ = try check(.inspect, path) { fstat(file.rawValue, &info) }
                guard (info.st_mode & S_IFMT) == S_IFREG else { throw FileError(.readNonRegularFile, path, errno: .invalidArgument) }
                guard Int(info.st_size) <= maxBytes else { throw FileError(.readOversizedFile, path, errno: .fileTooLarge) }
                var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
                var total = 0
                while true {
                    let count = try attempt(.read, path) {
                        try bytes.withUnsafeMutableBytes { buffer in try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[total...])) }
                    }
                    if count == 0 { break }
                    total += count
                    if total == bytes.count {
                        guard total <= maxBytes else { throw FileError(.readOversizedFile, path, errno: .fileTooLarge) }
                        bytes.append(contentsOf: repeatElement(0, count: 4096))
                    }
                }
                return Array(bytes[0..<total])
            }
        }
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
        let file = try attempt(.create, temporary) {
            try FileDescriptor.open(
                FilePath(temporary), .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec],
                permissions: FilePermissions(rawValue: mode))
        }
        do throws(FileError) {
            // Written, synced and closed; a failure before the close still closes it.
            try attempt(.close, temporary) {
                try file.closeAfter {
                    _ = try check(.setMode, temporary) { fchmod(file.rawValue, mode) }
                    _ = try attempt(.write, temporary) { try file.writeAll(bytes) }
                    _ = try check(.sync, temporary) { fsync(file.rawValue) }
                }
            }
            if replace {
                _ = try check(.rename, target) { rename(temporary, target) }
            } else {
                // link() fails if the target exists, so two writers never replace each other.
                if case .failure(let error) = valueOrErrno({ link(temporary, target) }), error != .fileExists {
                    throw FileError(.link, target, errno: error)
                }
                unlink(temporary)
            }
        } catch {
            unlink(temporary)
            throw error
        }
        syncDirectory(directory)
        return true
    }

    /// fsync of a directory, so a name just made or removed in it survives a crash (best effort: a
    /// directory that cannot be opened is left as it is).
    static func syncDirectory(_ directory: String) {
        guard let handle = try? FileDescriptor.open(FilePath(directory), .readOnly, options: [.directory, .closeOnExec]) else { return }
        _ = try? handle.closeAfter { fsync(handle.rawValue) }
    }

    /// Removes a file (unlink), then syncs its directory so the removal survives a crash.
    public static func remove(_ path: String) throws(FileError) {
        _ = try check(.remove, path) { unlink(path) }
        syncDirectory(parentDirectory(of: path))
    }

    /// The names in a directory, without `.` and `..`.
    public static func list(_ path: String) throws(FileError) -> [String] {
        var stream: DirectoryStream
        do { stream = try DirectoryStream(path: path) } catch { throw FileError(.list, path, errno: error) }
        var names: [String] = []
        while let entry = stream.next() {
            if !entry.isDotOrDotDot { names.append(entry.name) }
        }
        return names
    }

    /// `lstat` as a `FileIdentity`, plus whether it is a regular file.
    public static func identity(_ path: String) throws(FileError) -> (FileIdentity, isRegular: Bool) {
        var info = stat()
        _ = try check(.inspect, path) { lstat(path, &info) }
        let identity = FileIdentity(
            device: Int64(info.st_dev), inode: Int64(info.st_ino), size: Int64(info.st_size),
            mtimeNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
            ctimeNanoseconds: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
        return (identity, (info.st_mode & S_IFMT) == S_IFREG)
    }
}
