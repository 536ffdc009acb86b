import CurfewPOSIX
import SystemPackage
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Writing under the shared directory without following symlinks below it. Agents run as root, and
/// whoever can write to the shared folder (a child, say) could otherwise replace `records/`,
/// `confirmations/<id>/`, `machines/` or `usage/<id>/<user>/` with a symlink and point root's writes
/// at any directory of the computer.
extension SharedDirectory {
    /// `components` below the shared directory, each made where missing (mode 0755) and opened with
    /// `O_NOFOLLOW`: a symlink at any level fails with ELOOP (or ENOTDIR) instead of being followed.
    /// The caller closes the descriptor.
    public func openDirectory(_ components: [String]) throws(FileError) -> FileDescriptor {
        var fd = FileDescriptor(rawValue: try Files.check(.open, path) { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) })
        var current = path
        for component in components {
            current += "/\(component)"
            if case .failure(let error) = valueOrErrno({ mkdirat(fd.rawValue, component, 0o755) }), error != .fileExists {
                try? fd.close()
                throw FileError(.createDirectory, current, errno: error)
            }
            let next = valueOrErrno { openat(fd.rawValue, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            try? fd.close()
            switch next {
            case .success(let opened): fd = FileDescriptor(rawValue: opened)
            case .failure(let error): throw FileError(.openDirectoryNotFollowingSymlink, current, errno: error)
            }
        }
        return fd
    }

    /// Writes `name` in the directory `components` below the shared directory (see `openDirectory`)
    /// through a temporary dot name and a rename, with fsync of the file and the directory. With
    /// `replace: false` an existing file is left alone and `false` returned.
    @discardableResult
    public func write(_ bytes: [UInt8], into components: [String], name: String, replace: Bool = true) throws(FileError) -> Bool {
        let dirfd = try openDirectory(components)
        defer { try? dirfd.close() }
        let directory = ([path] + components).joined(separator: "/")
        var info = stat()
        if !replace && fstatat(dirfd.rawValue, name, &info, AT_SYMLINK_NOFOLLOW) == 0 { return false }
        try Files.writeAtomically(bytes, directory: directory, descriptor: dirfd, name: name, mode: 0o644, sync: true)
        fsync(dirfd.rawValue)
        return true
    }
}

extension Files {
    /// Temporary dot name, write, rename, all relative to the open (borrowed) `descriptor` of `directory` (named
    /// in errors), never following a symlink at the temporary name. `sync: false` leaves out the
    /// file's fsync (a caller writing a batch syncs the directory once at the end).
    public static func writeAtomically(
        _ bytes: [UInt8], directory: String, descriptor directoryDescriptor: FileDescriptor, name: String, mode: mode_t, sync: Bool
    ) throws(FileError) {
        let target = "\(directory)/\(name)"
        let temporaryName = ".tmp-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let temporary = "\(directory)/\(temporaryName)"
        let dirfd = directoryDescriptor.rawValue
        let file = FileDescriptor(
            rawValue: try check(.create, temporary) {
                openat(dirfd, temporaryName, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
            })
        let fd = file.rawValue
        // Closed below with its result checked (a write error can surface only at close); here otherwise.
        var isOpen = true
        defer { if isOpen { try? file.close() } }
        do throws(FileError) {
            _ = try check(.setMode, temporary) { fchmod(fd, mode) }
            var done = 0
            while done < bytes.count {
                let offset = done
                let count = try check(.write, temporary) {
                    bytes.withUnsafeBytes { buffer in Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset) }
                }
                done += count
            }
            if sync { _ = try check(.sync, temporary) { fsync(fd) } }
            isOpen = false
            _ = try check(.close, temporary) { close(fd) }
            _ = try check(.rename, target) { renameat(dirfd, temporaryName, dirfd, name) }
        } catch {
            unlinkat(dirfd, temporaryName, 0)
            throw error
        }
    }
}
