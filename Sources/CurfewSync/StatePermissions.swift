import CurfewPOSIX
import SystemPackage
#if canImport(Glibc)
    import Glibc
#endif

/// The state directory holds every child's usage, the requests, the audit log and the parent's signing
/// key: it is the owner's alone. `secure` makes it so (0700, its files 0600, its directories 0700) and
/// says what it changed; a directory that belongs to someone else is refused, never taken over.
///
/// The shared directory below it (`shared`, often a link to a synced folder) is left as it is: it
/// carries only signed, public records, and the sync tool owns its modes.
public enum StatePermissions {
    /// One change made: the path, and its mode before and after.
    public struct Change: Sendable, Equatable, CustomStringConvertible {
        public var path: String
        public var from: mode_t
        public var to: mode_t
        public var description: String { "\(path): \(octal(from)) -> \(octal(to))" }
    }

    /// The state directory belongs to another user than the one securing it.
    public struct ForeignOwner: Error, Sendable, CustomStringConvertible {
        public var path: String
        public var owner: uid_t
        public var mode: mode_t
        public var description: String {
            "the state directory \(path) must belong to uid \(geteuid()), got uid \(owner) (mode \(octal(mode)))"
        }
    }

    /// Names in the state directory left alone: the shared directory (its own rules above).
    static let skipped: Set<String> = ["shared"]

    /// Fixes the modes of `directory` and everything in it (not following symlinks), and returns the
    /// changes. Throws `ForeignOwner` when the directory is not the caller's, `FileError` when it
    /// cannot be read.
    @discardableResult
    public static func secure(_ directory: String) throws -> [Change] {
        let fd = FileDescriptor(
            rawValue: try Files.check(.open, directory) { open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) })
        defer { try? fd.close() }
        var info = stat()
        _ = try Files.check(.inspect, directory) { fstat(fd.rawValue, &info) }
        guard info.st_uid == geteuid() else {
            throw ForeignOwner(path: directory, owner: info.st_uid, mode: info.st_mode & 0o7777)
        }
        var changes: [Change] = []
        try secure(fd: fd, path: directory, info: info, depth: 0, skipping: skipped, into: &changes)
        return changes
    }

    private static func secure(
        fd: FileDescriptor, path: String, info: stat, depth: Int, skipping: Set<String>, into changes: inout [Change]
    ) throws {
        let mode = info.st_mode & 0o7777
        if mode != 0o700 {
            _ = try Files.check(.setMode, path) { fchmod(fd.rawValue, 0o700) }
            changes.append(Change(path: path, from: mode, to: 0o700))
        }
        // keys/machines is the deepest the state directory goes; a deeper tree is not Curfew's.
        guard depth < 4 else { return }
        var stream: DirectoryStream
        do { stream = try DirectoryStream(reading: fd) } catch { throw FileError(.list, path, errno: error) }
        while let entry = stream.next() {
            guard !entry.isDotOrDotDot else { continue }
            let name = entry.name
            guard !skipping.contains(name) else { continue }
            let child = "\(path)/\(name)"
            var childInfo = stat()
            switch valueOrErrno({ fstatat(fd.rawValue, name, &childInfo, AT_SYMLINK_NOFOLLOW) }) {
            case .success: break
            case .failure(.noSuchFileOrDirectory): continue  // removed meanwhile (a temporary file, SQLite's -shm)
            case .failure(let error): throw FileError(.inspect, child, errno: error)
            }
            switch childInfo.st_mode & S_IFMT {
            case S_IFDIR:
                let childFD: FileDescriptor
                switch valueOrErrno({ openat(fd.rawValue, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }) {
                case .success(let opened): childFD = FileDescriptor(rawValue: opened)
                case .failure(.noSuchFileOrDirectory): continue
                case .failure(let error): throw FileError(.open, child, errno: error)
                }
                defer { try? childFD.close() }
                try secure(fd: childFD, path: child, info: childInfo, depth: depth + 1, skipping: [], into: &changes)
            case S_IFREG:
                let childMode = childInfo.st_mode & 0o7777
                guard childMode & 0o7177 != 0 else { continue }  // 0600 or stricter (0400 keys) stays
                let fixed = childMode & 0o600
                let childFD: FileDescriptor
                switch valueOrErrno({ openat(fd.rawValue, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }) {
                case .success(let opened): childFD = FileDescriptor(rawValue: opened)
                case .failure(.noSuchFileOrDirectory): continue
                case .failure(let error): throw FileError(.open, child, errno: error)
                }
                defer { try? childFD.close() }
                _ = try Files.check(.setMode, child) { fchmod(childFD.rawValue, fixed) }
                changes.append(Change(path: child, from: childMode, to: fixed))
            default:
                continue  // symlinks (shared/ may be one) and sockets are not read through
            }
        }
    }
}

func octal(_ mode: mode_t) -> String {
    let digits = String(mode, radix: 8)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}
