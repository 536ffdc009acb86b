import CurfewCore
import Glibc
import CLinux
import Testing

@testable import CurfewLinux

/// The exec guard's parts that need no fanotify: mountinfo, `/proc/PID/status` without allocation,
/// and the guard's setup where the kernel allows it.
@Suite struct ExecGuardTests {
    @Test func mountInfoIsParsedAndUnescaped() {
        let text = """
            22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
            25 22 0:22 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw
            26 22 0:23 / /proc rw - proc proc rw
            40 22 8:2 / /media/my\\040stick rw master:7 - vfat /dev/sdb1 rw
            """
        let mounts = ExecGuard.parseMountInfo(text)
        #expect(mounts.map(\.point) == ["/", "/dev/shm", "/proc", "/media/my stick"])
        #expect(mounts.map(\.type) == ["ext4", "tmpfs", "proc", "vfat"])
        #expect(mounts.map(\.device) == ["8:1", "0:22", "0:23", "8:2"])
        #expect(ExecGuard.unmarkedTypes.contains("proc") && !ExecGuard.unmarkedTypes.contains("tmpfs"))
    }

    @Test func theRealUIDIsReadFromStatus() {
        let procDirectory = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(procDirectory) }
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: 1024)
        let name = UnsafeMutablePointer<CChar>.allocate(capacity: 64)
        defer {
            buffer.deallocate()
            name.deallocate()
        }
        #expect(ExecGuard.realUID(of: getpid(), procDirectory: procDirectory, status: buffer, name: name) == getuid())
        #expect(ExecGuard.realUID(of: 1, procDirectory: procDirectory, status: buffer, name: name) == 0)
        #expect(ExecGuard.realUID(of: Int32.max, procDirectory: procDirectory, status: buffer, name: name) == nil)
        ExecGuard.writeDecimal(1_234_567, prefix: "/proc/self/fd/", into: name)
        #expect(String(cString: name) == "/proc/self/fd/1234567")
        ExecGuard.writeDecimal(0, prefix: "", suffix: "/status", into: name)
        #expect(String(cString: name) == "0/status")
    }

    @Test(.enabled(if: getuid() == 0, "fanotify needs CAP_SYS_ADMIN"))
    func theGuardMarksAndUnmarksTheFilesystems() throws {
        let execGuard: ExecGuard
        do {
            execGuard = try ExecGuard(identities: FileIdentityCache())
        } catch {
            // Without kernel support the agent runs without it; nothing more to check here.
            #expect(error.errno == .notPermitted || error.errno == .noFunction || error.errno == .invalidArgument, "\(error)")
            return
        }
        let (marked, failed) = execGuard.markMounts()
        // Nothing answers events in this test: the marks go at once.
        execGuard.removeMarks()
        #expect(marked.contains("/"), "\(marked) \(failed)")
        #expect(!marked.contains("/proc"))
    }
}
