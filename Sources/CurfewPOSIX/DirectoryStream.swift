#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif
import SystemPackage

/// The entries of one directory, read with readdir(3): the one reader of `dirent` names. Closed
/// (closedir(3)) when it goes out of the scope that opened it.
public struct DirectoryStream: ~Copyable {
    private let stream: OpaquePointer

    /// opendir(3) of `path`; throws the errno it set.
    public init(path: String) throws(Errno) {
        guard let stream = opendir(path) else { throw Errno.last }
        self.stream = stream
    }

    /// fdopendir(3) of a duplicate of the open directory `directory` (borrowed: it stays open, and
    /// its offset is not this stream's); throws the errno dup(2) or fdopendir set.
    public init(reading directory: FileDescriptor) throws(Errno) {
        let duplicate = try Errno.check { dup(directory.rawValue) }
        guard let stream = fdopendir(duplicate) else {
            let error = Errno.last
            close(duplicate)
            throw error
        }
        self.stream = stream
    }

    deinit { closedir(stream) }

    /// The next entry (`.` and `..` included), or nil at the end; valid until the next call.
    public mutating func next() -> DirectoryEntry? {
        readdir(stream).map(DirectoryEntry.init)
    }
}

/// One entry as readdir(3) returned it: valid until the stream reads the next one.
public struct DirectoryEntry {
    private let entry: UnsafeMutablePointer<dirent>

    init(_ entry: UnsafeMutablePointer<dirent>) { self.entry = entry }

    /// The name's bytes, NUL-terminated, in place (no copy: `/proc` is listed at every sample).
    public var nameBytes: UnsafePointer<UInt8> {
        UnsafeRawPointer(entry).advanced(by: MemoryLayout<dirent>.offset(of: \dirent.d_name)!).assumingMemoryBound(to: UInt8.self)
    }

    /// The name, decoded as UTF-8 (invalid bytes become U+FFFD).
    public var name: String { String(cString: nameBytes) }

    /// Whether it is `.` or `..`.
    public var isDotOrDotDot: Bool {
        let name = nameBytes
        return name[0] == UInt8(ascii: ".") && (name[1] == 0 || (name[1] == UInt8(ascii: ".") && name[2] == 0))
    }

    /// The inode number (`d_ino`).
    public var inode: UInt64 { UInt64(entry.pointee.d_ino) }
}
