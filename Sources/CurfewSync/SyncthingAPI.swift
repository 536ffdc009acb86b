#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif
import CurfewPOSIX
import SystemPackage
import CurfewCore
import Foundation

/// Syncthing's REST API (`/rest/...`, an `X-API-Key` header) over plain HTTP/1.1 on the GUI address
/// of its config.xml. The GUI listens on the loopback by default and Curfew talks to nothing else: an
/// address that is not a loopback or unspecified address, or a GUI with TLS, is refused.
public struct SyncthingAPI: Sendable {
    public let host: String
    public let port: UInt16
    public let apiKey: String
    /// Seconds one request may take.
    public var timeout: Int = 10

    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    public struct Response: Sendable {
        public var status: Int
        public var body: [UInt8]
        public var json: JSONValue? { try? JSONValue.parse(body) }
    }

    public init(config: SyncthingConfig) throws(Failure) {
        guard !config.guiTLS else {
            throw Failure(description: "Syncthing's GUI uses TLS (gui tls=\"true\"); curfew talks to it over plain HTTP on this computer only")
        }
        let address = config.guiAddress
        var hostPart: Substring
        var portPart: Substring
        if address.hasPrefix("["), let close = address.firstIndex(of: "]") {
            hostPart = address[address.index(after: address.startIndex)..<close]
            portPart = address[close...].dropFirst(2)
        } else if let colon = address.lastIndex(of: ":") {
            hostPart = address[..<colon]
            portPart = address[address.index(after: colon)...]
        } else {
            throw Failure(description: "Syncthing's GUI address must be host:port, got \(quoted(address))")
        }
        if hostPart.isEmpty || hostPart == "0.0.0.0" || hostPart == "localhost" { hostPart = "127.0.0.1" }
        if hostPart == "::" { hostPart = "::1" }
        guard let port = UInt16(portPart), port > 0 else {
            throw Failure(description: "Syncthing's GUI address must end in a port, got \(quoted(address))")
        }
        guard hostPart.hasPrefix("127.") || hostPart == "::1" else {
            throw Failure(description: "Syncthing's GUI must listen on this computer's loopback, got \(quoted(address))")
        }
        host = String(hostPart)
        self.port = port
        apiKey = config.apiKey
    }

    /// One request; the response's status and body. Throws when Syncthing cannot be reached.
    public func request(_ method: String, _ path: String, body: JSONValue? = nil) throws(Failure) -> Response {
        let fd = try connect()
        defer { try? fd.close() }
        let payload = body?.canonicalBytes ?? []
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nX-API-Key: \(apiKey)\r\nConnection: close\r\n"
        head += "Accept: application/json\r\nContent-Length: \(payload.count)\r\n"
        if body != nil { head += "Content-Type: application/json\r\n" }
        let bytes = Array((head + "\r\n").utf8) + payload
        var sent = 0
        while sent < bytes.count {
            let result = valueOrErrno { bytes.withUnsafeBytes { send(fd.rawValue, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) } }
            guard case .success(let count) = result, count > 0 else {
                let error = if case .failure(let error) = result { error } else { Errno.last }
                throw Failure(description: "cannot send to Syncthing at \(host):\(port): \(error)")
            }
            sent += count
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while received.count < 64 << 20 {
            let count: Int
            switch valueOrErrno({ buffer.withUnsafeMutableBytes { recv(fd.rawValue, $0.baseAddress, $0.count, 0) } }) {
            case .success(let received): count = received
            case .failure(let error): throw Failure(description: "no answer from Syncthing at \(host):\(port): \(error)")
            }
            if count == 0 { break }
            received.append(contentsOf: buffer[0..<count])
        }
        return try Self.parseResponse(received)
    }

    /// A request that must succeed (2xx): its JSON body, if any.
    @discardableResult
    public func call(_ method: String, _ path: String, body: JSONValue? = nil) throws(Failure) -> JSONValue? {
        let response = try request(method, path, body: body)
        guard (200..<300).contains(response.status) else {
            let text = String(decoding: response.body.prefix(200), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw Failure(description: "Syncthing answered \(method) \(path) with HTTP \(response.status): \(text)")
        }
        return response.json
    }

    static func parseResponse(_ bytes: [UInt8]) throws(Failure) -> Response {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = bytes.indices.first(where: { bytes[$0...].starts(with: separator) }) else {
            throw Failure(description: "Syncthing's answer is not HTTP")
        }
        let head = String(decoding: bytes[..<end], as: UTF8.self).split(separator: "\r\n")
        let statusParts = head.first?.split(separator: " ") ?? []
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]) else {
            throw Failure(description: "Syncthing's answer is not HTTP")
        }
        var body = Array(bytes[(end + 4)...])
        let chunked = head.dropFirst().contains { $0.lowercased().hasPrefix("transfer-encoding:") && $0.lowercased().contains("chunked") }
        if chunked { body = try dechunk(body) }
        return Response(status: status, body: body)
    }

    static func dechunk(_ bytes: [UInt8]) throws(Failure) -> [UInt8] {
        var result: [UInt8] = []
        var index = 0
        while index < bytes.count {
            guard let lineEnd = bytes[index...].indices.first(where: { bytes[$0...].starts(with: [13, 10]) }) else { break }
            let sizeText = String(decoding: bytes[index..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                throw Failure(description: "Syncthing's answer has a malformed chunk")
            }
            if size == 0 { break }
            let start = lineEnd + 2
            guard start + size <= bytes.count else { throw Failure(description: "Syncthing's answer was cut short") }
            result.append(contentsOf: bytes[start..<(start + size)])
            index = start + size + 2
        }
        return result
    }

    /// A socket connected to Syncthing's REST API, with `timeout` on every send and receive; the caller closes it.
    private func connect() throws(Failure) -> FileDescriptor {
        let isIPv6 = host.contains(":")
        let fd: FileDescriptor
        switch valueOrErrno({ socket(isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }) {
        case .success(let opened): fd = FileDescriptor(rawValue: opened)
        case .failure(let error): throw Failure(description: "cannot make a socket: \(error)")
        }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd.rawValue, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd.rawValue, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var result: Result<Int32, Errno>
        if isIPv6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            inet_pton(AF_INET6, host, &address.sin6_addr)
            result = valueOrErrno(retryOnInterrupt: false) {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd.rawValue, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
                }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            inet_pton(AF_INET, host, &address.sin_addr)
            result = valueOrErrno(retryOnInterrupt: false) {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd.rawValue, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
            }
        }
        if case .failure(let error) = result {
            try? fd.close()
            throw Failure(description: "cannot reach Syncthing's REST API at \(host):\(port): \(error)")
        }
        return fd
    }
}
