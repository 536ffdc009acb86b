import Foundation
import Glibc
import SystemPackage
import Testing

@testable import CurfewLinux

/// A scratch directory under /tmp, removed with everything in it when released.
final class ProcTestDirectory {
    let path: String

    init() {
        var template = Array("/tmp/curfew-process-tests.XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func url(_ relative: String) -> URL { URL(fileURLWithPath: path + "/" + relative) }

    func write(_ relative: String, _ bytes: [UInt8]) throws {
        let url = url(relative)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(bytes).write(to: url)
    }

    func write(_ relative: String, _ text: String) throws { try write(relative, Array(text.utf8)) }

    func read(_ relative: String) throws -> String { try String(contentsOf: url(relative), encoding: .utf8) }

    func symlink(_ relative: String, to target: String) throws {
        try FileManager.default.createSymbolicLink(atPath: path + "/" + relative, withDestinationPath: target)
    }

    /// Copies `source` to `relative` (directories created) and makes it executable; returns the new path.
    /// Written through an O_CLOEXEC descriptor: a child spawned meanwhile by another test must not
    /// keep it open for writing, or exec of the copy fails with ETXTBSY.
    @discardableResult
    func copyExecutable(_ source: String, to relative: String) throws -> String {
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: source)))
        let target = path + "/" + relative
        try FileManager.default.createDirectory(
            at: url(relative).deletingLastPathComponent(), withIntermediateDirectories: true)
        let fd = try LinuxError.check("open \(target)") { open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o755) }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw LinuxError(operation: "write \(target)", errno: Errno(rawValue: errno)) }
        return target
    }
}

/// Children started by one test; whatever is left is SIGKILLed and reaped when this is released.
final class ProcChildren {
    private(set) var pids: [Int32] = []

    deinit { for pid in pids { killAndReap(pid) } }

    /// Retries ETXTBSY for a while: another test's child may briefly hold a just-written binary open
    /// between its fork and exec.
    func spawn(_ path: String, _ arguments: [String], uid: UInt32? = nil, gid: UInt32? = nil) throws -> Int32 {
        var attempts = 0
        while true {
            do {
                let pid = try spawnProcess(path, arguments, uid: uid, gid: gid)
                pids.append(pid)
                return pid
            } catch {
                guard error.errno == .textFileBusy, attempts < 100 else { throw error }
                attempts += 1
                usleep(10_000)
            }
        }
    }

    /// SIGKILL and reap now.
    func kill(_ pid: Int32) {
        killAndReap(pid)
        pids.removeAll { $0 == pid }
    }
}

/// Polls `condition` every 5 ms until it holds or `seconds` pass; returns whether it held.
func pollUntil(seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(5_000)
    }
    return condition()
}

/// Field 22 of /proc/PID/stat, read here independently of the sampler.
func procStartTime(_ pid: Int32) -> UInt64? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = text.lastIndex(of: ")")
    else { return nil }
    let fields = text[text.index(after: close)...].split(separator: " ")
    return fields.count > 19 ? UInt64(fields[19]) : nil
}

func procExecutable(_ pid: Int32) -> String? {
    try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")
}

func resolvedPath(_ path: String) -> String {
    guard let resolved = realpath(path, nil) else { return path }
    defer { free(resolved) }
    return String(cString: resolved)
}

/// One process of a fake `/proc` tree.
struct FakeProcess {
    var pid: Int32
    var parentPid: Int32 = 1
    var uid: UInt32 = 1000
    var startTime: UInt64
    var comm: String
    var state = "S"
    var flags: UInt32 = 0x0040_0100
    var threads = 1
    var commandLine: [String]
    var cgroup = "0::/user.slice/user-1000.slice/session-3.scope\n"
    var executable: String?

    var statLine: String {
        // pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime
        // cutime cstime priority nice num_threads itrealvalue starttime vsize rss ...
        "\(pid) (\(comm)) \(state) \(parentPid) \(pid) \(pid) 0 -1 \(flags) 120 0 0 0 3 1 0 0 20 0 \(threads) 0 "
            + "\(startTime) 5488640 256 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
    }

    var status: String {
        "Name:\t\(comm)\nUmask:\t0022\nState:\t\(state) (sleeping)\nTgid:\t\(pid)\nNgid:\t0\nPid:\t\(pid)\n"
            + "PPid:\t\(parentPid)\nTracerPid:\t0\nUid:\t\(uid)\t\(uid + 1)\t\(uid + 2)\t\(uid + 3)\n"
            + "Gid:\t\(uid)\t\(uid)\t\(uid)\t\(uid)\nThreads:\t\(threads)\n"
    }
}

extension ProcTestDirectory {
    /// Writes `process` as `<pid>/` with stat, status, cmdline, cgroup and an exe symlink.
    func writeProcess(_ process: FakeProcess, directoryName: String? = nil) throws {
        let directory = directoryName ?? "\(process.pid)"
        try write("\(directory)/stat", process.statLine)
        try write("\(directory)/status", process.status)
        try write("\(directory)/cmdline", process.commandLine.flatMap { Array($0.utf8) + [0] })
        try write("\(directory)/cgroup", process.cgroup)
        if let executable = process.executable { try symlink("\(directory)/exe", to: executable) }
    }

    /// Replaces `<pid>/` by a new directory (a new inode, as procfs gives a new process).
    func replaceProcess(_ process: FakeProcess) throws {
        let staging = ".staging-\(process.pid)"
        try writeProcess(process, directoryName: staging)
        try FileManager.default.moveItem(atPath: path + "/\(process.pid)", toPath: path + "/.old-\(process.pid)")
        try FileManager.default.moveItem(atPath: path + "/" + staging, toPath: path + "/\(process.pid)")
        try FileManager.default.removeItem(atPath: path + "/.old-\(process.pid)")
    }

    func removeProcess(_ pid: Int32) throws {
        try FileManager.default.removeItem(atPath: path + "/\(pid)")
    }
}

/// Runs `command` with /bin/sh and waits; true if it exited with status 0.
func runShell(_ command: String) throws -> Bool {
    let pid = try spawnProcess("/bin/sh", ["-c", command])
    guard let status = reap(pid) else { return false }
    return status == 0
}

/// The writable cgroup v2 mount, if any (e.g. /sys/fs/cgroup or /sys/fs/cgroup/unified).
let writableCgroup2Mount: String? = {
    guard geteuid() == 0, let mounts = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else {
        return nil
    }
    for line in mounts.split(separator: "\n") {
        let halves = line.components(separatedBy: " - ")
        guard halves.count == 2, halves[1].hasPrefix("cgroup2 ") else { continue }
        let fields = halves[0].split(separator: " ")
        guard fields.count > 4 else { continue }
        let mountPoint = String(fields[4])
        if access(mountPoint + "/cgroup.procs", W_OK) == 0 { return mountPoint }
    }
    return nil
}()
