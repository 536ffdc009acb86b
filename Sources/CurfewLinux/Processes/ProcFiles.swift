import SystemPackage
import Glibc
import CLinux

/// Reading and parsing the files of one `/proc/PID` directory. Everything here works on bytes the
/// caller read; nothing is trusted to be well formed.
enum ProcFiles {
    /// What `sampler` needs from `/proc/PID/stat` (proc(5): one line, `pid (comm) state ppid ...`).
    struct Stat: Equatable {
        var comm: String
        /// Field 3: `R`, `S`, `D`, `Z`, ...
        var state: UInt8
        /// Field 4.
        var parentPid: Int32
        /// Field 9, the kernel's `PF_*` task flags.
        var flags: UInt32
        /// Field 20.
        var threads: Int
        /// Field 22: clock ticks after boot at which the process started.
        var startTime: UInt64
        /// Fields 14 and 15 (utime + stime): CPU time the process used, in clock ticks.
        var cpuTicks: UInt64 = 0

        /// `PF_KTHREAD` from include/linux/sched.h: a kernel thread has no executable or command line.
        static let kernelThreadFlag: UInt32 = 0x0020_0000

        var isKernelThread: Bool { flags & Self.kernelThreadFlag != 0 }
        /// `Z` (zombie) or `X` (dead): the process has exited and only waits to be reaped.
        var hasExited: Bool { state == UInt8(ascii: "Z") || state == UInt8(ascii: "X") }
        /// Exited with no thread left. A thread-group leader that called pthread_exit is a zombie too,
        /// but its process lives on while other threads run (they are counted in `threads`).
        var isDead: Bool { hasExited && threads <= 1 }
    }

    /// Parses `/proc/PID/stat`. The command name may hold spaces and parentheses, so the fields
    /// start after the *last* `)`.
    static func parseStat(_ bytes: UnsafeRawBufferPointer) -> Stat? {
        guard let open = bytes.firstIndex(of: UInt8(ascii: "(")),
            let close = bytes.lastIndex(of: UInt8(ascii: ")")), open < close
        else { return nil }
        let comm = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[(open + 1)..<close]), as: UTF8.self)
        // Fields after `) `: index 0 is field 3 (state), so field N is index N - 3.
        var index = close + 1
        var field = 0
        var state: UInt8 = 0
        var parentPid: Int64 = -1
        var flags: UInt64 = 0
        var threads: Int64 = 0
        var startTime: UInt64 = 0
        var cpuTicks: UInt64 = 0
        var found = false
        while index < bytes.count {
            // Skip exactly the separators; fields never contain spaces after the command name.
            while index < bytes.count && bytes[index] == UInt8(ascii: " ") { index += 1 }
            let start = index
            while index < bytes.count && bytes[index] != UInt8(ascii: " ") && bytes[index] != UInt8(ascii: "\n") {
                index += 1
            }
            if start == index { break }
            let token = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
            switch field {
            case 0:
                guard token.count == 1 else { return nil }
                state = token[0]
            case 1:
                guard let value = parseUnsigned(token), value <= UInt64(Int32.max) else { return nil }
                parentPid = Int64(value)
            case 6:
                guard let value = parseUnsigned(token), value <= UInt64(UInt32.max) else { return nil }
                flags = value
            case 11, 12:
                guard let value = parseUnsigned(token) else { return nil }
                cpuTicks &+= value
            case 17:
                guard let value = parseDecimal(token) else { return nil }
                threads = value
            case 19:
                guard let value = parseUnsigned(token) else { return nil }
                startTime = value
                found = true
            default: break
            }
            if found { break }
            field += 1
        }
        guard found else { return nil }
        return Stat(
            comm: comm, state: state, parentPid: Int32(parentPid), flags: UInt32(flags), threads: Int(threads),
            startTime: startTime, cpuTicks: cpuTicks)
    }

    /// The real uid: the first number of the `Uid:` line of `/proc/PID/status`.
    static func parseRealUID(status bytes: UnsafeRawBufferPointer) -> UInt32? {
        let key: [UInt8] = Array("Uid:".utf8)
        var lineStart = 0
        while lineStart < bytes.count {
            var lineEnd = lineStart
            while lineEnd < bytes.count && bytes[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
            if lineEnd - lineStart > key.count
                && key.indices.allSatisfy({ bytes[lineStart + $0] == key[$0] })
            {
                var index = lineStart + key.count
                while index < lineEnd && (bytes[index] == UInt8(ascii: "\t") || bytes[index] == UInt8(ascii: " ")) {
                    index += 1
                }
                let start = index
                while index < lineEnd && bytes[index] >= UInt8(ascii: "0") && bytes[index] <= UInt8(ascii: "9") {
                    index += 1
                }
                guard let value = parseUnsigned(UnsafeRawBufferPointer(rebasing: bytes[start..<index])),
                    value <= UInt64(UInt32.max)
                else { return nil }
                return UInt32(value)
            }
            lineStart = lineEnd + 1
        }
        return nil
    }

    /// `/proc/PID/cmdline`: arguments separated (and ended) by NUL. A process that rewrote its
    /// arguments (setproctitle) may have one argument holding spaces; that is what it shows.
    static func parseCommandLine(_ bytes: UnsafeRawBufferPointer) -> [String] {
        var arguments: [String] = []
        var start = 0
        for index in 0..<bytes.count where bytes[index] == 0 {
            arguments.append(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
            start = index + 1
        }
        if start < bytes.count {
            arguments.append(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start...]), as: UTF8.self))
        }
        return arguments
    }

    /// `/proc/loadavg`'s last two numbers: the number of tasks (threads included) and the last PID
    /// handed out in the reader's PID namespace. Both stay the same only if no task started or was
    /// reaped in between.
    struct TaskStamp: Equatable {
        var tasks: UInt64
        var lastPid: UInt64
    }

    /// Parses `0.00 0.01 0.05 1/123 4567`.
    static func parseLoadAverage(_ bytes: UnsafeRawBufferPointer) -> TaskStamp? {
        var tokens: [UnsafeRawBufferPointer] = []
        var index = 0
        while index < bytes.count && tokens.count < 5 {
            while index < bytes.count && (bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\n")) {
                index += 1
            }
            let start = index
            while index < bytes.count && bytes[index] != UInt8(ascii: " ") && bytes[index] != UInt8(ascii: "\n") {
                index += 1
            }
            if start == index { break }
            tokens.append(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
        }
        guard tokens.count == 5, let slash = tokens[3].firstIndex(of: UInt8(ascii: "/")),
            let tasks = parseUnsigned(UnsafeRawBufferPointer(rebasing: tokens[3][(slash + 1)...])),
            let lastPid = parseUnsigned(tokens[4])
        else { return nil }
        return TaskStamp(tasks: tasks, lastPid: lastPid)
    }

    /// Digits only, at most 19 of them.
    static func parseUnsigned(_ bytes: UnsafeRawBufferPointer) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= 19 else { return nil }
        var value: UInt64 = 0
        for byte in bytes {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + UInt64(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// An optional `-` and digits.
    static func parseDecimal(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        if bytes.first == UInt8(ascii: "-") {
            guard let magnitude = parseUnsigned(UnsafeRawBufferPointer(rebasing: bytes.dropFirst())) else { return nil }
            return -Int64(magnitude)
        }
        guard let value = parseUnsigned(bytes) else { return nil }
        return Int64(value)
    }

    /// A PID directory name: 1 to 10 digits, no leading zero, at most Int32.max. `name` points at a
    /// NUL-terminated `d_name`.
    static func parsePid(_ name: UnsafePointer<UInt8>) -> Int32? {
        var value: Int64 = 0
        var index = 0
        while true {
            let byte = name[index]
            if byte == 0 { break }
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"), index < 10 else { return nil }
            if index == 0 && byte == UInt8(ascii: "0") { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            index += 1
        }
        guard index > 0, value <= Int64(Int32.max) else { return nil }
        return Int32(value)
    }
}

/// A reusable read buffer and the file operations of the sampler, relative to directory descriptors
/// so that all files of one process come from the same process even if its PID is reused meanwhile
/// (a `/proc/PID` descriptor keeps pointing at the process it was opened for).
struct ProcReader: ~Copyable {
    let buffer: UnsafeMutableRawBufferPointer

    init(capacity: Int) {
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
    }

    deinit { buffer.deallocate() }

    /// Reads `name` under `directory` (or an absolute path with `AT_FDCWD`) into the buffer, up to
    /// `limit` bytes; returns the bytes read, or nil if it cannot be opened or read.
    func read(_ name: String, in directory: Int32, limit: Int? = nil) -> UnsafeRawBufferPointer? {
        let capacity = min(limit ?? buffer.count, buffer.count)
        guard let opened = try? LinuxError.check("openat \(name)", { openat(directory, name, O_RDONLY | O_CLOEXEC) })
        else { return nil }
        let file = FileDescriptor(rawValue: opened)
        defer { try? file.close() }
        let fd = file.rawValue
        var total = 0
        while total < capacity {
            guard
                let count = try? LinuxError.check(
                    "read \(name)", { Glibc.read(fd, buffer.baseAddress! + total, capacity - total) })
            else { return nil }
            if count == 0 { break }
            total += count
        }
        return UnsafeRawBufferPointer(rebasing: buffer[0..<total])
    }

    /// readlinkat(2): the target of a symbolic link such as `exe`; nil if it has none (kernel threads,
    /// zombies) or cannot be read.
    func readLink(_ name: String, in directory: Int32) -> String? {
        let capacity = min(buffer.count, Int(PATH_MAX) * 4)
        let base = buffer.baseAddress!.assumingMemoryBound(to: CChar.self)
        guard let count = try? LinuxError.check("readlinkat \(name)", { readlinkat(directory, name, base, capacity) }),
            count > 0, count < capacity
        else { return nil }
        return String(decoding: UnsafeRawBufferPointer(rebasing: buffer[0..<count]), as: UTF8.self)
    }
}
