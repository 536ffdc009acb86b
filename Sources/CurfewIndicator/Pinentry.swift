import CLinux
import CurfewCore
import CurfewLinux
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The desktop's PIN dialog: Debian's `pinentry` programs (GnuPG's), spoken to over the Assuan
/// protocol on their standard input and output, one line each way: `SETTITLE`, `SETDESC`,
/// `SETPROMPT`, `SETERROR`, `GETPIN` (answered by `D <pin>` then `OK`), `MESSAGE`, `BYE`. Which program:
/// the one the package's configuration names, root's alone (`program(configuration:)`), never one
/// from the child's environment or PATH.
final class Pinentry {
    enum Failure: Error, Equatable {
        /// The configured program, or else every one of `candidates`, is missing.
        case notInstalled
        /// The person closed the dialog, pressed Cancel, or let it time out.
        case cancelled
        /// The program could not be started, or broke the protocol, or took longer than `deadline`.
        case broken(String)
    }

    /// Used in this order when the configuration names none: the GNOME dialog, the GTK one, whatever
    /// `pinentry` Debian's alternatives chose. Absolute paths: never looked for on the child's PATH.
    static let candidates = ["/usr/bin/pinentry-gnome3", "/usr/bin/pinentry-gtk2", "/usr/bin/pinentry"]
    /// The package's configuration, where a parent may name the dialog: `CURFEW_PINENTRY=/usr/bin/...`.
    /// The child's environment is never read for it: a dialog the child chose would catch the PIN.
    static let systemConfiguration = "/etc/default/curfew"
    static let configurationKey = "CURFEW_PINENTRY"
    /// How long the dialog waits for a person (pinentry's own `SETTIMEOUT`), and how long the indicator
    /// waits for the answer to one command before it gives up on the program.
    static let dialogTimeoutSeconds = 120
    static let deadlineMilliseconds: Int64 = 150_000
    /// The longest line read (Assuan's own limit is 1000 bytes).
    static let maxLineBytes = 4096

    let pid: Int32
    private let toProgram: Int32
    private let fromProgram: Int32
    private var pending: [UInt8] = []
    private var deadline: Int64 = 0
    private var closed = false

    /// The program to run: the absolute path `CURFEW_PINENTRY=` names in `configuration`, else the first
    /// of `candidates` that exists; only a file root owns and only root may change, in directories only
    /// root may change (`trusted`). A configuration file that is not root's in that way is not read
    /// at all. `.notInstalled` when there is none, `.broken` (with the reason) when it is not root's.
    static func program(configuration: String = systemConfiguration) -> Result<String, Failure> {
        if let named = configured(in: configuration) {
            guard named.hasPrefix("/") else {
                return .failure(.broken("\(configurationKey) in \(configuration) must be an absolute path, got \(named)"))
            }
            guard access(named, X_OK) == 0 else { return .failure(.notInstalled) }
            if let reason = untrusted(named) { return .failure(.broken("the PIN dialog \(named) \(reason)")) }
            return .success(named)
        }
        for path in candidates where access(path, X_OK) == 0 {
            if let reason = untrusted(path) { return .failure(.broken("the PIN dialog \(path) \(reason)")) }
            return .success(path)
        }
        return .failure(.notInstalled)
    }

    /// The value of `CURFEW_PINENTRY=` in `path` (shell-style `KEY=value` lines, `#` comments, optional
    /// quotes), or nil when the file is missing, not root's (`untrusted`) or names none.
    static func configured(in path: String) -> String? {
        guard untrusted(path) == nil else { return nil }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 65_536 {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += buffer[0..<count]
        }
        var value: String?
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            guard trimmed.hasPrefix(configurationKey + "=") else { continue }
            var text = trimmed.dropFirst(configurationKey.count + 1).reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }
                .reversed().map { $0 }
            if text.count >= 2, let first = text.first, first == "\"" || first == "'", text.last == first {
                text = Array(text.dropFirst().dropLast())
            }
            // The last assignment wins, as in the shell.
            value = String(text)
        }
        return value.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Why `path` could be changed by someone other than root, or nil when it cannot: the file (after
    /// symbolic links) and every directory above it are owned by root and writable by no one else
    /// (a directory with the sticky bit, like /tmp, may be: no one else can replace root's entries).
    static func untrusted(_ path: String) -> String? {
        guard let real = realpath(path, nil) else { return "cannot be found" }
        defer { free(real) }
        var current = String(cString: real)
        var info = stat()
        guard stat(current, &info) == 0 else { return "cannot be found" }
        guard info.st_mode & S_IFMT == S_IFREG else { return "is not a regular file" }
        guard info.st_uid == 0, info.st_mode & 0o022 == 0 else { return "is not root's alone (\(current))" }
        while current != "/" {
            current = current.lastIndex(of: "/").map { $0 == current.startIndex ? "/" : String(current[..<$0]) } ?? "/"
            guard stat(current, &info) == 0 else { return "cannot be found" }
            let sticky = info.st_mode & S_ISVTX != 0
            guard info.st_uid == 0, sticky || info.st_mode & 0o022 == 0 else { return "is in a directory that is not root's alone (\(current))" }
        }
        return nil
    }

    /// Starts `program` and reads its greeting. Its standard input and output are one end of a socket
    /// pair (`LinuxError.socketPair`: close-on-exec), so nothing else the indicator starts keeps the
    /// conversation open.
    init(program: String) throws(Failure) {
        let ends: (ours: FileDescriptor, theirs: FileDescriptor)
        do { ends = try LinuxError.socketPair("socketpair") } catch { throw .broken("socketpair: \(error.errno)") }
        let started: Int32
        do {
            started = try spawnProcess(
                program, [],
                options: SpawnOptions(input: ends.theirs.rawValue, passing: [SpawnOptions.Passing(from: ends.theirs.rawValue, to: 1)]))
        } catch {
            try? ends.ours.close()
            try? ends.theirs.close()
            throw .broken("cannot start \(program): \(error)")
        }
        try? ends.theirs.close()
        pid = started
        toProgram = ends.ours.rawValue
        fromProgram = ends.ours.rawValue
        // A pinentry that dies early must not take the indicator with it (SIGPIPE on write).
        signal(SIGPIPE, SIG_IGN)
        _ = try response()
    }

    deinit { finish() }

    /// Sends one command with its parameter escaped; returns the data (`D` lines, decoded) it answered.
    @discardableResult
    func command(_ verb: String, _ parameter: String? = nil) throws(Failure) -> [UInt8] {
        try send(parameter.map { "\(verb) \(Self.escape($0))" } ?? verb)
        return try response()
    }

    /// `GETPIN`: the PIN typed, or `.cancelled`.
    func getPIN() throws(Failure) -> [UInt8] {
        try send("GETPIN")
        return try response(cancelling: true)
    }

    /// `BYE`, then the program is waited for (and killed if it lingers).
    func finish() {
        guard !closed else { return }
        closed = true
        try? send("BYE")
        // Its answer to BYE is not needed; closing is the end of the conversation.
        close(toProgram)
        // Up to a second for it to go (its pidfd turns readable when it exits), then it is killed.
        if !reap(pid, withinMilliseconds: 1_000) { killAndReap(pid) }
    }

    private func send(_ line: String) throws(Failure) {
        let bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { write(toProgram, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw .broken("the PIN dialog went away") }
            offset += count
        }
    }

    /// Reads lines up to `OK` (returning the data) or `ERR` (a failure; `.cancelled` for GETPIN).
    private func response(cancelling: Bool = false) throws(Failure) -> [UInt8] {
        deadline = ClockReading.now().monotonic + Self.deadlineMilliseconds
        var data: [UInt8] = []
        while true {
            let line = try readLine()
            if line.starts(with: Array("OK".utf8)) && (line.count == 2 || line[2] == 0x20) { return data }
            if line.starts(with: Array("ERR".utf8)) {
                if cancelling { throw .cancelled }
                throw .broken("the PIN dialog said: \(String(decoding: line.prefix(200), as: UTF8.self))")
            }
            if line.starts(with: Array("D ".utf8)) {
                data += Self.unescape(line.dropFirst(2))
            } else if line.starts(with: Array("INQUIRE".utf8)) {
                // Nothing here answers inquiries: say so, and the program goes on without.
                try send("CAN")
            }
            // `S` status lines and `#` comments carry nothing the indicator needs.
        }
    }

    private func readLine() throws(Failure) -> [UInt8] {
        while true {
            if let newline = pending.firstIndex(of: 0x0A) {
                let line = Array(pending[..<newline])
                pending.removeSubrange(...newline)
                return line
            }
            guard pending.count < Self.maxLineBytes else { throw .broken("the PIN dialog sent a line too long") }
            let left = deadline - ClockReading.now().monotonic
            guard left > 0 else { throw .broken("the PIN dialog took too long") }
            var poller = pollfd(fd: fromProgram, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(clamping: left))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 1024)
            let count = buffer.withUnsafeMutableBytes { read(fromProgram, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw .broken("the PIN dialog closed") }
            pending += buffer[0..<count]
        }
    }

    /// Assuan's escaping of a parameter: `%`, CR and LF as `%25`, `%0D`, `%0A` (pinentry turns `%0A`
    /// back into a line break in the dialog); every other byte as it is.
    static func escape(_ text: String) -> String {
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "%": escaped += "%25"
            case "\r": escaped += "%0D"
            case "\n": escaped += "%0A"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// `%XX` back into bytes (data lines escape `%`, CR, LF and may escape more).
    static func unescape(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var result: [UInt8] = []
        var iterator = Array(bytes).makeIterator()
        func hex(_ digit: UInt8) -> UInt8? {
            switch digit {
            case 0x30...0x39: digit - 0x30
            case 0x41...0x46: digit - 0x41 + 10
            case 0x61...0x66: digit - 0x61 + 10
            default: nil
            }
        }
        while let byte = iterator.next() {
            guard byte == 0x25 else {
                result.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hex), let low = iterator.next().flatMap(hex) else { break }
            result.append(high << 4 | low)
        }
        return result
    }
}
