import SystemPackage
import CurfewPOSIX
import CLinux
import Glibc

/// A whole small file read into memory (procfs files, a configuration or test file): the one reader
/// the machine layer's parsers of such files share.
enum SmallFile {
    /// At most `limit` bytes of `path`, read until end of file with EINTR retried; what was read
    /// before a failing read. Nil, with errno set, when the file cannot be opened.
    static func read(_ path: String, limit: Int) -> [UInt8]? {
        let opened = open(path, O_RDONLY | O_CLOEXEC)
        guard opened >= 0 else { return nil }
        let file = FileDescriptor(rawValue: opened)
        defer { try? file.close() }
        let fd = file.rawValue
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: min(max(limit, 1), 65_536))
        while bytes.count < limit {
            let wanted = min(chunk.count, limit - bytes.count)
            guard case .success(let count) = valueOrErrno({ chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, wanted) } }),
                count > 0
            else { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return bytes
    }
}
