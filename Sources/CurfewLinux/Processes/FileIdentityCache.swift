import CurfewCore
import SystemPackage
import Crypto
import Glibc
import CLinux
import Synchronization

/// The identity of an executable's content, so that a renamed or copied binary is still the same app
/// (docs/design.md, "Apps").
///
/// The identity is `sha256:<hex>` of the file size as 8 bytes little-endian followed by the whole
/// content when the file is at most 2 MiB, otherwise by its first 1 MiB and its last 1 MiB. Reading
/// at most 2 MiB keeps hashing a 500 MB game binary as quick as a small one; two files that differ
/// only in the middle of a large binary would share an identity, which matching can live with.
///
/// Identities are cached by (device, inode, size, mtime, ctime), so each binary is read once for as
/// long as it is unchanged. A process's executable is read through `/proc/PID/exe`, which works for a
/// binary that was deleted or replaced after it started and for one in another mount namespace
/// (flatpak, snap).
///
/// Thread-safe: the cache sits behind a `Mutex`; hashing happens outside it, so at worst two
/// threads hash the same new file at once.
public final class FileIdentityCache: Sendable {
    /// What is known of one executable file.
    public struct Identity: Sendable, Equatable {
        /// `sha256:<hex>` as described above.
        public var contentHash: String
        /// `build-id:<hex>`, the ELF GNU build-id; nil for scripts and binaries built without one.
        public var buildID: String?
        /// The file's owner: a file root owns was put there by the system, not by a child.
        public var owner: UInt32
        /// The inode, to tell the file's own mappings in `/proc/PID/maps`.
        public var inode: UInt64

        public var all: [String] { [contentHash, buildID].compactMap { $0 } }
    }

    struct Key: Hashable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: Int64
        var modifiedNanoseconds: Int64
        var changed: Int64
        var changedNanoseconds: Int64

        init(_ status: stat) {
            device = UInt64(status.st_dev)
            inode = UInt64(status.st_ino)
            size = Int64(status.st_size)
            modified = Int64(status.st_mtim.tv_sec)
            modifiedNanoseconds = Int64(status.st_mtim.tv_nsec)
            changed = Int64(status.st_ctim.tv_sec)
            changedNanoseconds = Int64(status.st_ctim.tv_nsec)
        }
    }

    struct State {
        var identities: [Key: Identity] = [:]
        /// Files hashed so far (tests check that a binary is read once).
        var hashes = 0
    }

    /// At most this many files are remembered; past it the cache starts over (a build tree that
    /// keeps producing new binaries must not grow it without bound).
    public let capacity: Int
    private let state = Mutex(State())

    static let blockSize = 1 << 20

    public init(capacity: Int = 4096) {
        self.capacity = max(1, capacity)
    }

    /// The identity of the executable `pid` runs (`<procRoot>/<pid>/exe`); nil if the process is gone,
    /// has no executable (a kernel thread, a zombie) or it cannot be read.
    public func identity(ofExecutableOf pid: Int32, procRoot: String = "/proc") -> String? {
        guard let opened = try? LinuxError.check("open", { open("\(procRoot)/\(pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC) })
        else { return nil }
        let directory = FileDescriptor(rawValue: opened)
        defer { try? directory.close() }
        return identity(of: "exe", in: directory.rawValue)
    }

    /// The identity of the file at `path` (symbolic links followed); nil if it cannot be read or is not
    /// a regular file.
    public func identity(ofFile path: String) -> String? {
        identity(of: path, in: AT_FDCWD)
    }

    /// Content hash, build-id and owner of the file at `path`.
    public func identities(ofFile path: String) -> Identity? {
        identities(of: path, in: AT_FDCWD)
    }

    /// The identity of the file `status` describes (fstat(2) of an open descriptor) if it was read
    /// before: no reading and no wait for a disk, which is all the exec guard may do before it answers.
    public func cachedIdentity(of status: stat) -> Identity? {
        guard status.st_mode & S_IFMT == S_IFREG else { return nil }
        return state.withLock { $0.identities[Key(status)] }
    }

    /// How many files have been hashed (cache misses).
    public var hashCount: Int { state.withLock { $0.hashes } }

    /// How many identities are cached.
    public var count: Int { state.withLock { $0.identities.count } }

    /// `name` relative to `directory` (fstatat/openat). A hit costs one fstatat and no open.
    func identity(of name: String, in directory: Int32) -> String? {
        identities(of: name, in: directory)?.contentHash
    }

    /// `name` relative to `directory` (fstatat/openat), hash and build-id. A hit costs one fstatat and no open.
    func identities(of name: String, in directory: Int32) -> Identity? {
        var status = stat()
        guard (try? LinuxError.check("fstatat", { fstatat(directory, name, &status, 0) })) != nil,
            status.st_mode & S_IFMT == S_IFREG
        else { return nil }
        if let known = state.withLock({ $0.identities[Key(status)] }) { return known }

        guard let opened = try? LinuxError.check("openat", { openat(directory, name, O_RDONLY | O_CLOEXEC) }) else { return nil }
        let fd = FileDescriptor(rawValue: opened)
        defer { try? fd.close() }
        // The file may have been replaced between fstatat and openat: key by what was opened.
        guard (try? LinuxError.check("fstat", { fstat(fd.rawValue, &status) })) != nil, status.st_mode & S_IFMT == S_IFREG
        else { return nil }
        return identities(of: fd, status: status)
    }

    /// Content hash, build-id and owner of the open file `fd` (borrowed; read with pread): what the
    /// exec guard hands to its identifier thread, so that the file's next exec finds it known.
    public func identities(ofOpen fd: FileDescriptor) -> Identity? {
        var status = stat()
        guard fstat(fd.rawValue, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return nil }
        return identities(of: fd, status: status)
    }

    /// The identity of `fd`, whose fstat(2) is `status`: from the cache, else read and cached.
    private func identities(of fd: FileDescriptor, status: stat) -> Identity? {
        let key = Key(status)
        if let known = state.withLock({ $0.identities[key] }) { return known }
        guard let hash = Self.hash(fd: fd, size: Int64(status.st_size)) else { return nil }
        let identity = Identity(
            contentHash: hash, buildID: ElfBuildID.read(fd: fd.rawValue), owner: status.st_uid, inode: UInt64(status.st_ino))
        state.withLock { state in
            if state.identities.count >= capacity { state.identities.removeAll(keepingCapacity: true) }
            state.identities[key] = identity
            state.hashes += 1
        }
        return identity
    }

    /// The identity of the open file `fd` (borrowed) of `size` bytes, as defined above (pread, so the
    /// offset of `fd` is not used).
    static func hash(fd: FileDescriptor, size: Int64) -> String? {
        guard size >= 0 else { return nil }
        var hasher = SHA256()
        withUnsafeBytes(of: UInt64(size).littleEndian) { hasher.update(bufferPointer: $0) }
        let block = Int64(blockSize)
        var ranges: [(offset: Int64, length: Int64)] = [(offset: 0, length: size)]
        if size > 2 * block { ranges = [(offset: 0, length: block), (offset: size - block, length: block)] }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        for range in ranges {
            var done: Int64 = 0
            while done < range.length {
                let want = Int(min(Int64(buffer.count), range.length - done))
                guard
                    let count = try? LinuxError.check(
                        "pread", { pread(fd.rawValue, buffer.baseAddress, want, off_t(range.offset + done)) }),
                    count > 0
                else { return nil }  // an error, or the file shrank under us
                hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                done += Int64(count)
            }
        }
        return "sha256:" + hexString(hasher.finalize())
    }
}
