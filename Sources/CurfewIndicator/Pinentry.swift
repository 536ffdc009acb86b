import CLinux
import CurfewCore
import CurfewLinux
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The desktop's PIN dialog: Debian's `pinentry` programs (GnuPG's), spoken to over the Assuan
/// protocol on their standard input and output, one line each way: `SETTITLE`, `SETDESC`,
/// `SETPROMPT`, `SETERROR`, `GETPIN` (answered by `D <pin>` then `OK`), `MESSAGE`, `BYE`.
final class Pinentry {
    enum Failure: Error, Equatable {
        /// None of `candidates` is on PATH.
        case notInstalled
        /// The person closed the dialog, pressed Cancel, or let it time out.
        case cancelled
        /// The program could not be started, or broke the protocol, or took longer than `deadline`.
        case broken(String)
    }

    /// Looked for on PATH in this order: the GNOME dialog, the GTK one, whatever `pinentry` is.
    static let candidates = ["pinentry-gnome3", "pinentry-gtk2", "pinentry"]
    /// A program to use instead (a path, or a name on PATH); tests point it at a stand-in.
    static let overrideVariable = "CURFEW_PINENTRY"
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

    /// The program to run: `$CURFEW_PINENTRY`, else the first of `candidates` on PATH.
    static func program() -> String? {
        if let chosen = getenv(overrideVariable).map({ String(cString: $0) }), !chosen.isEmpty {
            return chosen.contains("/") ? chosen : onPath(chosen)
        }
        for name in candidates { if let path = onPath(name) { return path } }
        return nil
    }

    static func onPath(_ name: String) -> String? {
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") where directory.hasPrefix("/") {
            let candidate = "\(directory)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
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
