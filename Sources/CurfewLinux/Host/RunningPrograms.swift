import CLinux
import Foundation
import Glibc

/// Processes of one program, found by the name the kernel keeps for them (`/proc/PID/comm`), with
/// their real uid and arguments: enough to tell whether Syncthing runs, as whom, and with which
/// `-home`.
public enum RunningPrograms {
    public struct Program: Sendable, Equatable {
        public var pid: Int32
        public var uid: UInt32
        public var arguments: [String]
    }

    public static func named(_ name: String, procRoot: String = "/proc") -> [Program] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: procRoot) else { return [] }
        var found: [Program] = []
        for entry in entries {
            guard let pid = Int32(entry), pid > 0 else { continue }
            let directory = "\(procRoot)/\(entry)"
            guard let comm = read("\(directory)/comm"), String(decoding: comm, as: UTF8.self).trimmingCharacters(in: .newlines) == name,
                let status = read("\(directory)/status"), let uid = realUID(String(decoding: status, as: UTF8.self)),
                let cmdline = read("\(directory)/cmdline")
            else { continue }
            let arguments = cmdline.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
            found.append(Program(pid: pid, uid: uid, arguments: arguments.last == "" ? Array(arguments.dropLast()) : arguments))
        }
        return found.sorted { $0.pid < $1.pid }
    }

    /// The `Uid:` line's first field (the real uid), from `/proc/PID/status`.
    static func realUID(_ status: String) -> UInt32? {
        for line in status.split(separator: "\n") where line.hasPrefix("Uid:") {
            return line.dropFirst(4).split(whereSeparator: { $0 == "\t" || $0 == " " }).first.flatMap { UInt32($0) }
        }
        return nil
    }

    private static func read(_ path: String) -> [UInt8]? { SmallFile.read(path, limit: 1 << 16) }
}
