import SystemPackage
import CurfewPOSIX
import Glibc
import CLinux

/// Messages on a user's terminals, as wall(1) writes them.
public enum TerminalMessages {
    /// Writes `text` to every terminal owned by `uid`: the character devices `devRoot/pts/N` and
    /// `devRoot/ttyN` whose owner (st_uid) is `uid`, which is how login, getty, sshd, su and terminal
    /// emulators hand a terminal to its user. Returns the paths the whole message was written to.
    ///
    /// The message is a bell, a `Curfew:` banner line and the text, with CRLF line ends and control
    /// characters shown as `?` (a message cannot carry escape sequences to the terminal). Each
    /// terminal is opened O_WRONLY|O_NOCTTY|O_NONBLOCK (open(2), write(2)): a terminal whose output is
    /// stopped (^S) or full gets what fits, and the caller is never blocked.
    public static func write(_ text: String, toTerminalsOf uid: UInt32, devRoot: String = "/dev") -> [String] {
        let message = format(text)
        var written: [String] = []
        for path in terminals(in: devRoot) where owner(of: path) == uid {
            if write(message, to: path, uid: uid) { written.append(path) }
        }
        return written
    }

    /// The bytes written: bell, then one line: the `Curfew:` banner and the text (its line breaks
    /// become spaces), ended by CRLF.
    static func format(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = [0x07] + Array("\r\nCurfew: ".utf8)
        let lines = text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).map { $0.trimmingSpaces }.filter { !$0.isEmpty }
        for byte in lines.joined(separator: " ").utf8 where byte != UInt8(ascii: "\r") {
            bytes.append(byte < 0x20 || byte == 0x7F ? UInt8(ascii: "?") : byte)
        }
        return bytes + [UInt8(ascii: "\r"), UInt8(ascii: "\n")]
    }

    /// `devRoot/pts/<digits>` and `devRoot/tty<digits>` (virtual consoles), sorted.
    static func terminals(in devRoot: String) -> [String] {
        func names(in directory: String, prefix: String) -> [String] {
            guard var stream = try? DirectoryStream(path: directory) else { return [] }
            var found: [String] = []
            while let entry = stream.next() {
                let name = entry.name
                guard name.hasPrefix(prefix) else { continue }
                let number = name.dropFirst(prefix.count)
                if !number.isEmpty && number.allSatisfy({ $0.isASCII && $0.isNumber }) {
                    found.append(name)
                }
            }
            return found.sorted { $0.count != $1.count ? $0.count < $1.count : $0 < $1 }
        }
        return names(in: "\(devRoot)/pts", prefix: "").map { "\(devRoot)/pts/\($0)" }
            + names(in: devRoot, prefix: "tty").map { "\(devRoot)/\($0)" }
    }

    /// stat(2): the owner of a character device; nil for anything else.
    static func owner(of path: String) -> UInt32? {
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFCHR else { return nil }
        return status.st_uid
    }

    /// open(2) without blocking or becoming our controlling terminal, fstat(2) that what was opened is
    /// still `uid`'s terminal (it may have been handed on since `owner`), write(2) once per chunk.
    private static func write(_ message: [UInt8], to path: String, uid: UInt32) -> Bool {
        guard
            let opened = try? LinuxError.check(
                "open \(path)", { open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW) })
        else { return false }
        let terminal = FileDescriptor(rawValue: opened)
        defer { try? terminal.close() }
        let fd = terminal.rawValue
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFCHR, status.st_uid == uid, isatty(fd) == 1
        else { return false }
        var offset = 0
        while offset < message.count {
            let count = message.withUnsafeBytes { bytes in
                try? LinuxError.check("write \(path)") { Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset) }
            }
            guard let count, count > 0 else { return false }
            offset += count
        }
        return true
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmingSpaces: String {
        var slice = self
        while slice.first == " " || slice.first == "\t" { slice.removeFirst() }
        while slice.last == " " || slice.last == "\t" { slice.removeLast() }
        return String(slice)
    }
}
