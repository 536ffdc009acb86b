import CurfewPOSIX
import Foundation
import Glibc
import Synchronization
import SystemPackage
import Testing

@testable import CurfewLinux

/// Waiting for a file to arrive in a directory (pairing), and the POSIX plumbing under it.
struct DirectoryWatchTests {
    static func scratchDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "curfew-watch-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func milliseconds(since start: Date) -> Int64 { Int64(Date().timeIntervalSince(start) * 1000) }

    /// A file written by another thread is found as soon as it arrives, long before the deadline and
    /// without a periodic look (the re-check interval is longer than the whole wait).
    @Test func aFileThatArrivesIsFoundAtOnce() throws {
        let directory = try Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let writer = try POSIXThread.start {
            usleep(300_000)
            _ = FileManager.default.createFile(atPath: directory + "/answer", contents: Data("yes".utf8))
        }
        let start = Date()
        var looks = 0
        let found = DirectoryWatch.lookUntilFound(
            in: directory, recheckMilliseconds: 60_000, remainingMilliseconds: { 10_000 - Self.milliseconds(since: start) }
        ) { () -> String? in
            looks += 1
            return try? String(contentsOfFile: directory + "/answer", encoding: .utf8)
        }
        writer.join()
        #expect(found == "yes")
        #expect(Self.milliseconds(since: start) < 5_000)
        // The first look, then one per change (the file's creation and its write).
        #expect(looks <= 4)
    }

    /// Until the directory exists its parent is watched; a directory that appears with the file in
    /// it (as a sync tool renames it into place) is found too.
    @Test func aDirectoryThatDoesNotExistYetIsWaitedFor() throws {
        let parent = try Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let directory = parent + "/pairing"
        let writer = try POSIXThread.start {
            usleep(300_000)
            try? FileManager.default.createDirectory(atPath: parent + "/.incoming", withIntermediateDirectories: false)
            _ = FileManager.default.createFile(atPath: parent + "/.incoming/offer", contents: Data("offer".utf8))
            rename(parent + "/.incoming", directory)
        }
        let start = Date()
        let found = DirectoryWatch.lookUntilFound(
            in: directory, recheckMilliseconds: 60_000, remainingMilliseconds: { 10_000 - Self.milliseconds(since: start) }
        ) { try? String(contentsOfFile: directory + "/offer", encoding: .utf8) }
        writer.join()
        #expect(found == "offer")
        #expect(Self.milliseconds(since: start) < 5_000)
    }

    /// Several directories in one watch: a file that arrives in one that did not exist yet (waited
    /// for in its parent, which is watched anyway) is found at once, without a periodic look.
    @Test func aFileInAnyOfSeveralDirectoriesIsFound() throws {
        let parent = try Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: parent) }
        try FileManager.default.createDirectory(atPath: parent + "/pc-a", withIntermediateDirectories: false)
        let directories = [parent, parent + "/pc-a", parent + "/pc-b"]
        #expect(DirectoryWatch.watchedPaths(for: directories) == [parent, parent + "/pc-a"])
        let writer = try POSIXThread.start {
            usleep(300_000)
            try? FileManager.default.createDirectory(atPath: parent + "/pc-b", withIntermediateDirectories: false)
            usleep(100_000)
            _ = FileManager.default.createFile(atPath: parent + "/pc-b/answer", contents: Data("b".utf8))
        }
        let start = Date()
        let found = DirectoryWatch.lookUntilFound(
            in: directories, recheckMilliseconds: 60_000, remainingMilliseconds: { 10_000 - Self.milliseconds(since: start) }
        ) { try? String(contentsOfFile: parent + "/pc-b/answer", encoding: .utf8) }
        writer.join()
        #expect(found == "b")
        #expect(Self.milliseconds(since: start) < 5_000)
    }

    /// Nothing arrives: nil once the time is up, not before.
    @Test func nothingArrivingEndsAtTheDeadline() throws {
        let directory = try Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let start = Date()
        let found = DirectoryWatch.lookUntilFound(
            in: directory, remainingMilliseconds: { 400 - Self.milliseconds(since: start) }
        ) { () -> String? in nil }
        #expect(found == nil)
        #expect(Self.milliseconds(since: start) >= 400)
        #expect(Self.milliseconds(since: start) < 3_000)
    }

    /// A directory on a network or FUSE filesystem is one inotify can be blind to; a local one is not.
    @Test(arguments: [("nfs4", true), ("cifs", true), ("fuse.sshfs", true), ("ext4", false), ("tmpfs", false)])
    func networkFilesystemsAreTold(type: String, blind: Bool) throws {
        let directory = try Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var status = stat()
        #expect(stat(directory, &status) == 0)
        let device = UInt64(status.st_dev)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
        let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
        let mountInfo = directory + "/mountinfo"
        let text = """
            22 1 0:999 / /elsewhere rw - nfs4 server:/export rw
            23 1 \(major):\(minor) / /mnt rw,relatime shared:1 - \(type) source rw
            """
        _ = FileManager.default.createFile(atPath: mountInfo, contents: Data(text.utf8))
        #expect(DirectoryWatch.mayMissChanges(in: directory, mountInfo: mountInfo) == blind)
    }

    @Test func parentDirectories() {
        #expect(DirectoryWatch.parentDirectory(of: "/a/b/pairing") == "/a/b")
        #expect(DirectoryWatch.parentDirectory(of: "/a/b/pairing/") == "/a/b")
        #expect(DirectoryWatch.parentDirectory(of: "/pairing") == "/")
        #expect(DirectoryWatch.parentDirectory(of: "pairing") == ".")
    }

    /// readdir's names, `.` and `..` told apart, and the stream closed when it goes.
    @Test func directoryStreamListsNames() throws {
        let directory = try Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for name in ["a", "..b", ".c", "é"] { _ = FileManager.default.createFile(atPath: "\(directory)/\(name)", contents: nil) }
        var names: [String] = []
        var dots = 0
        var stream = try DirectoryStream(path: directory)
        while let entry = stream.next() {
            if entry.isDotOrDotDot { dots += 1 } else { names.append(entry.name) }
        }
        #expect(names.sorted() == ["..b", ".c", "a", "é"])
        #expect(dots == 2)
        #expect(throws: Errno.noSuchFileOrDirectory) { _ = try DirectoryStream(path: directory + "/missing") }
        let opened = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        #expect(opened >= 0)
        let descriptor = FileDescriptor(rawValue: opened)
        defer { try? descriptor.close() }
        var duplicate = try DirectoryStream(reading: descriptor)
        var count = 0
        while duplicate.next() != nil { count += 1 }
        #expect(count == 6)
    }

    /// Each thread runs its closure once; join waits for it.
    @Test func threadsRunAndAreJoined() throws {
        final class Counter: Sendable { let value = Mutex(0) }
        let counter = Counter()
        let threads = try (0..<4).map { _ in try POSIXThread.start { counter.value.withLock { $0 += 1 } } }
        for thread in threads { thread.join() }
        #expect(counter.value.withLock { $0 } == 4)
    }
}
