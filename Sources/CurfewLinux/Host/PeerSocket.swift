#if canImport(Glibc)
    import Glibc
#endif

/// The agent's local socket: a Unix stream socket whose connections carry the caller's credentials
/// (SO_PEERCRED), so the agent decides what each caller may see by who they really are.
/// One request line in, one response line out.
public final class PeerSocketServer: Sendable {
    let fd: Int32
    public let path: String

    /// socket + bind + listen; a stale socket file at `path` is replaced; the file gets `mode`
    /// (access is checked per request from the peer's credentials, not by file permissions).
    public init(path: String, mode: mode_t = 0o666) throws(HostError) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HostError("socket", errno: errno) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else {
            close(fd)
            throw HostError("socket path \(path) is too long", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
            raw[path.utf8.count] = 0
        }
        unlink(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, chmod(path, mode) == 0, listen(fd, 64) == 0 else {
            let error = errno
            close(fd)
            throw HostError("bind/listen \(path)", errno: error)
        }
        self.fd = fd
        self.path = path
    }

    /// Waits up to `timeoutMilliseconds` for a caller; nil when none came.
    public func accept(timeoutMilliseconds: Int32) throws(HostError) -> PeerConnection? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, timeoutMilliseconds)
        if ready < 0 && errno != EINTR { throw HostError("poll", errno: errno) }
        guard ready > 0 else { return nil }
        let client = Glibc.accept(fd, nil, nil)
        guard client >= 0 else {
            if errno == EINTR || errno == EAGAIN || errno == ECONNABORTED { return nil }
            throw HostError("accept", errno: errno)
        }
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
        // struct ucred (needs _GNU_SOURCE, which Swift's Glibc does not set): pid_t pid; uid_t uid; gid_t gid.
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(client, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, length == 12 else {
            let error = errno
            Glibc.close(client)
            throw HostError("getsockopt SO_PEERCRED", errno: error)
        }
        return PeerConnection(fd: client, uid: credentials.1, gid: credentials.2, pid: credentials.0)
    }

    /// Stops listening and removes the socket file.
    public func shutdown() {
        Glibc.shutdown(fd, Int32(SHUT_RDWR))
        unlink(path)
    }

    deinit { Glibc.close(fd) }
}

/// One caller of the agent's socket, with the credentials the kernel vouches for.
public final class PeerConnection {
    let fd: Int32
    public let uid: UInt32
    public let gid: UInt32
    public let pid: Int32

    init(fd: Int32, uid: UInt32, gid: UInt32, pid: Int32) {
        self.fd = fd
        self.uid = uid
        self.gid = gid
        self.pid = pid
    }

    /// Reads one line (without the newline), at most `maxBytes`, within `timeoutMilliseconds`.
    public func readLine(maxBytes: Int = 65_536, timeoutMilliseconds: Int32 = 2_000) -> String? {
        receiveLine(fd: fd, maxBytes: maxBytes, timeoutMilliseconds: timeoutMilliseconds)
    }

    public func writeLine(_ text: String) { writeAll(fd: fd, Array((text + "\n").utf8)) }

    deinit { close(fd) }
}

/// The client side: connects to `path`, sends one line, returns the answer line.
public enum PeerSocketClient {
    public static func request(path: String, line: String, timeoutMilliseconds: Int32 = 5_000) throws(HostError) -> String {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HostError("socket", errno: errno) }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard path.utf8.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw HostError("connect \(path)", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
            raw[path.utf8.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw HostError("connect \(path)", errno: errno) }
        writeAll(fd: fd, Array((line + "\n").utf8))
        guard let answer = receiveLine(fd: fd, maxBytes: 4 << 20, timeoutMilliseconds: timeoutMilliseconds) else {
            throw HostError("no answer from \(path)", errno: ETIMEDOUT)
        }
        return answer
    }
}

private func writeAll(fd: Int32, _ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
        let count = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { return }
        offset += count
    }
}

private func receiveLine(fd: Int32, maxBytes: Int, timeoutMilliseconds: Int32) -> String? {
    var collected: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while collected.count <= maxBytes {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, timeoutMilliseconds)
        if ready < 0 && errno == EINTR { continue }
        guard ready > 0 else { return nil }
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { break }
        if let newline = chunk[0..<count].firstIndex(of: 0x0A) {
            collected.append(contentsOf: chunk[0..<newline])
            return String(decoding: collected, as: UTF8.self)
        }
        collected.append(contentsOf: chunk[0..<count])
    }
    return collected.isEmpty || collected.count > maxBytes ? nil : String(decoding: collected, as: UTF8.self)
}
