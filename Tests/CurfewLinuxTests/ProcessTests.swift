import CurfewCore
import CurfewPOSIX
import Foundation
import Glibc
import SystemPackage
import Testing

@testable import CurfewLinux

@Suite struct ProcessTests {
    static let sleepPath = resolvedPath("/bin/sleep")

    // MARK: The sampler on the real /proc

    @Test func sampleFindsRealChildrenAndDropsThemAfterKill() throws {
        let directory = ProcTestDirectory()
        let copy = try directory.copyExecutable("/bin/sleep", to: "games/supertuxkart-copy")
        let children = ProcChildren()
        let sleeper = try children.spawn("/bin/sleep", ["30"])
        let renamed = try children.spawn(copy, ["31"])
        let asNobody = try children.spawn("/bin/sleep", ["32"], uid: 65534, gid: 65534)

        let identities = FileIdentityCache()
        let sampler = ProcessSampler(identities: identities)
        let processes = sampler.sample()
        #expect(processes.map(\.pid) == processes.map(\.pid).sorted())
        let byPid = Dictionary(uniqueKeysWithValues: processes.map { ($0.pid, $0) })
        #expect(sampler.cached == byPid)
        #expect(byPid[getpid()]?.facts.executablePath == resolvedPath("/proc/self/exe"))

        let sleepIdentity = try #require(FileIdentityCache().identity(ofFile: "/bin/sleep"))
        #expect(sleepIdentity.hasPrefix("sha256:") && sleepIdentity.count == 7 + 64)
        let ownCgroup = CgroupInfo.parse(try String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8))

        let plain = try #require(byPid[sleeper])
        #expect(plain.uid == 0)
        #expect(plain.parentPid == getpid())
        #expect(plain.startTime == procStartTime(sleeper))
        #expect(plain.facts.executablePath == Self.sleepPath)
        #expect(plain.facts.commandLine == ["/bin/sleep", "30"])
        #expect(plain.facts.fileIdentity == sleepIdentity)
        #expect(plain.facts.systemdUnit == ownCgroup.systemdUnit)
        #expect(plain.cgroupPath == ownCgroup.path)

        let copied = try #require(byPid[renamed])
        #expect(copied.facts.executablePath == copy)
        #expect(copied.facts.commandLine == [copy, "31"])
        #expect(copied.facts.fileIdentity == sleepIdentity, "a renamed copy is the same app")
        #expect(copied.startTime == procStartTime(renamed))

        let nobody = try #require(byPid[asNobody])
        #expect(nobody.uid == 65534)
        #expect(nobody.parentPid == getpid(), "setpriv execs in place")
        #expect(nobody.facts.executablePath == Self.sleepPath)
        #expect(nobody.facts.commandLine == ["/bin/sleep", "32"])

        let started = [plain, copied, nobody].map { [$0.pid: $0.startTime] }
        for pid in [sleeper, renamed, asNobody] { children.kill(pid) }
        let after = sampler.sample()
        // A PID may already be reused by another test's child: compare (pid, start time).
        for process in after { #expect(!started.contains([process.pid: process.startTime])) }
        for process in [plain, copied, nobody] { #expect(sampler.cached[process.pid]?.startTime != process.startTime) }
    }

    @Test func severalHundredSleepingChildren() throws {
        let children = ProcChildren()
        var pids: [Int32] = []
        for index in 0..<300 { pids.append(try children.spawn("/bin/sleep", ["\(1000 + index)"])) }
        let sampler = ProcessSampler()
        let first = Dictionary(uniqueKeysWithValues: sampler.sample().map { ($0.pid, $0) })
        for (index, pid) in pids.enumerated() {
            let process = try #require(first[pid])
            #expect(process.facts.commandLine == ["/bin/sleep", "\(1000 + index)"])
            #expect(process.startTime == procStartTime(pid))
            #expect(process.parentPid == getpid())
            #expect(process.facts.executablePath == Self.sleepPath)
        }
        // Steady state: nothing of ours changed, so our processes come back as they were.
        let second = Dictionary(uniqueKeysWithValues: sampler.sample().map { ($0.pid, $0) })
        for pid in pids { #expect(second[pid] == first[pid]) }

        let killed = Array(pids.prefix(100))
        let killedStarts = Set(killed.map { "\($0)/\(first[$0]!.startTime)" })
        for pid in killed { children.kill(pid) }
        let third = sampler.sample()
        #expect(!third.contains { killedStarts.contains("\($0.pid)/\($0.startTime)") })
        let thirdPids = Set(third.map(\.pid))
        for pid in pids.dropFirst(100) { #expect(thirdPids.contains(pid)) }
    }

    @Test func execAfterFirstSightIsSeenBySecondLookAndByRefresh() throws {
        let children = ProcChildren()
        let pid = try children.spawn("/bin/sh", ["-c", "sleep 1; exec /bin/sleep 30"])
        let polling = ProcessSampler()
        polling.revalidationsPerSample = 0
        let refreshing = ProcessSampler()
        let shell = resolvedPath("/bin/sh")

        let before = try #require(polling.sample().first { $0.pid == pid })
        #expect(before.facts.executablePath == shell)
        #expect(before.facts.commandLine == ["/bin/sh", "-c", "sleep 1; exec /bin/sleep 30"])
        #expect(refreshing.refresh(pid: pid)?.facts.executablePath == shell)

        // Wait for the exec to finish: for a moment the new executable shows with an empty command line.
        #expect(pollUntil(seconds: 5) { ProcessSampler().refresh(pid: pid)?.facts.commandLine == ["/bin/sleep", "30"] })
        #expect(refreshing.cached[pid]?.facts.executablePath == shell, "nothing changes until asked")
        let refreshed = try #require(refreshing.refresh(pid: pid))
        #expect(refreshed.facts.executablePath == Self.sleepPath)
        #expect(refreshed.facts.commandLine == ["/bin/sleep", "30"])
        #expect(refreshed.startTime == before.startTime)

        // The polling sampler parses a process it saw for the first time once more in the next sample.
        let after = try #require(polling.sample().first { $0.pid == pid })
        #expect(after.facts.executablePath == Self.sleepPath)
        #expect(after.facts.commandLine == ["/bin/sleep", "30"])

        refreshing.forget(pid: pid)
        #expect(refreshing.cached[pid] == nil)
        #expect(refreshing.sample().contains { $0.pid == pid }, "a forgotten live process comes back")

        children.kill(pid)
        #expect(refreshing.refresh(pid: pid) == nil || refreshing.cached[pid]?.startTime != before.startTime)
    }

    @Test(.enabled(if: writableCgroup2Mount != nil, "needs root and a writable cgroup v2 mount"))
    func cgroupScopeOfARealProcess() throws {
        let mount = try #require(writableCgroup2Mount)
        let unit = "app-flatpak-org.curfew.Test\\x2dGame-\(getpid()).scope"
        let cgroup = mount + "/" + unit
        #expect(mkdir(cgroup, 0o755) == 0 || errno == EEXIST)
        defer {
            _ = pollUntil(seconds: 2) { rmdir(cgroup) == 0 || errno == ENOENT }
        }
        let children = ProcChildren()
        let pid = try children.spawn("/bin/sleep", ["30"])
        try "\(pid)".write(toFile: cgroup + "/cgroup.procs", atomically: false, encoding: .utf8)

        let process = try #require(ProcessSampler().refresh(pid: pid))
        #expect(process.cgroupPath == "/" + unit)
        #expect(process.facts.systemdUnit == unit)
        #expect(process.facts.flatpakId == "org.curfew.Test-Game")
        #expect(process.facts.snapName == nil)
        children.kill(pid)
    }

    // MARK: The sampler on a fake /proc

    @Test func fakeProcRootReuseZombiesKernelThreadsAndRemoval() throws {
        let root = ProcTestDirectory()
        let game = try root.copyExecutable("/bin/sleep", to: "bin/supertuxkart")
        try root.write("loadavg", "0.00 0.00 0.00 1/3 300\n")
        try root.write("sys/kernel/pid_max", "32768\n")
        try root.symlink("self", to: "100")
        try root.writeProcess(
            FakeProcess(pid: 100, startTime: 5000, comm: "sleep", commandLine: ["/bin/sleep", "30"], executable: "/bin/sleep"))
        try root.writeProcess(
            FakeProcess(
                pid: 200, parentPid: 100, uid: 1001, startTime: 5100, comm: "firefox", commandLine: ["/app/bin/firefox"],
                cgroup: "0::/user.slice/user-1001.slice/user@1001.service/app.slice/app-flatpak-org.mozilla.firefox-12345.scope\n",
                executable: "/bin/sleep"))
        try root.writeProcess(
            FakeProcess(pid: 2, parentPid: 0, uid: 0, startTime: 1, comm: "kthreadd", flags: 0x0020_8040, commandLine: []))
        try root.writeProcess(
            FakeProcess(pid: 300, parentPid: 100, startTime: 5200, comm: "gone", state: "Z", commandLine: []))
        try root.writeProcess(
            FakeProcess(pid: 301, startTime: 5300, comm: "leader", state: "Z", threads: 3, commandLine: []))
        try root.write("400/stat", "400 (broken")  // malformed: skipped, not fatal
        try root.write("0400/stat", FakeProcess(pid: 400, startTime: 1, comm: "x", commandLine: []).statLine)

        let identities = FileIdentityCache()
        let sampler = ProcessSampler(procRoot: root.path, identities: identities)
        let first = sampler.sample()
        #expect(first.map(\.pid) == [100, 200, 301], "kernel threads, zombies and malformed entries are left out")
        let sleeper = try #require(sampler.cached[100])
        #expect(sleeper.uid == 1000, "the real uid, the first of four")
        #expect(sleeper.parentPid == 1)
        #expect(sleeper.startTime == 5000)
        #expect(sleeper.facts.executablePath == "/bin/sleep")
        #expect(sleeper.facts.commandLine == ["/bin/sleep", "30"])
        #expect(sleeper.facts.systemdUnit == "session-3.scope")
        #expect(sleeper.facts.fileIdentity == identities.identity(ofFile: "/bin/sleep"))
        let firefox = try #require(sampler.cached[200])
        #expect(firefox.uid == 1001)
        #expect(firefox.facts.flatpakId == "org.mozilla.firefox")
        #expect(firefox.facts.systemdUnit == "app-flatpak-org.mozilla.firefox-12345.scope")
        #expect(sampler.cached[301]?.facts.executablePath == nil, "a leader that exited while threads run")

        // The PID is reused: a new directory (new inode) with another start time.
        try root.replaceProcess(
            FakeProcess(
                pid: 100, startTime: 9000, comm: "supertuxkart", commandLine: [game, "--fullscreen"], executable: game))
        let second = sampler.sample()
        #expect(second.map(\.pid) == [100, 200, 301])
        let reused = try #require(sampler.cached[100])
        #expect(reused.startTime == 9000)
        #expect(reused.facts.commandLine == [game, "--fullscreen"])
        #expect(reused.facts.executablePath == game)
        #expect(reused.facts.fileIdentity == sleeper.facts.fileIdentity, "a copy of the same binary")
        #expect(sampler.cached[200] == firefox)

        try root.removeProcess(200)
        #expect(sampler.sample().map(\.pid) == [100, 301])
        #expect(sampler.cached[200] == nil)
    }

    @Test func knownProcessesCostNoReadsUntilRevalidated() throws {
        let root = ProcTestDirectory()
        var process = FakeProcess(pid: 42, startTime: 100, comm: "sh", commandLine: ["/bin/sh", "launcher.sh"], executable: "/bin/sh")
        try root.writeProcess(process)
        let sampler = ProcessSampler(procRoot: root.path)
        sampler.revalidationsPerSample = 0
        #expect(sampler.sample().first?.facts.commandLine == ["/bin/sh", "launcher.sh"])
        #expect(sampler.sample().first?.facts.commandLine == ["/bin/sh", "launcher.sh"])  // the second look

        // An exec in place: same directory, new command name, command line and executable.
        process.comm = "supertuxkart"
        process.commandLine = ["/usr/games/supertuxkart"]
        try root.write("42/stat", process.statLine)
        try root.write("42/cmdline", process.commandLine.flatMap { Array($0.utf8) + [0] })
        #expect(sampler.sample().first?.facts.commandLine == ["/bin/sh", "launcher.sh"], "the listing alone cannot see an exec")

        sampler.revalidationsPerSample = 1
        #expect(sampler.sample().first?.facts.commandLine == ["/usr/games/supertuxkart"])

        // A changed parent (reparenting) is picked up by revalidation without a full parse.
        process.parentPid = 1234
        try root.write("42/stat", process.statLine)
        #expect(sampler.sample().first?.parentPid == 1234)
    }

    @Test func applyingConnectorEvents() throws {
        let root = ProcTestDirectory()
        try root.writeProcess(FakeProcess(pid: 10, startTime: 1, comm: "a", commandLine: ["a"]))
        try root.writeProcess(FakeProcess(pid: 11, startTime: 2, comm: "b", commandLine: ["b"]))
        let sampler = ProcessSampler(procRoot: root.path)
        #expect(sampler.apply([]).isEmpty, "no events, no listing")
        #expect(sampler.apply([.fork(parent: 1, child: 10), .exec(pid: 10)]).map(\.pid) == [10])
        // Forked and gone within one batch: never parsed.
        #expect(sampler.apply([.fork(parent: 10, child: 11), .exit(pid: 11)]).map(\.pid) == [10])
        // An exec changes what 10 runs.
        try root.write("10/cmdline", Array("c\0--flag\0".utf8))
        #expect(sampler.apply([.exec(pid: 10)]).first?.facts.commandLine == ["c", "--flag"])
        #expect(sampler.apply([.exit(pid: 10)]).isEmpty)
        // Lost events: list again.
        #expect(sampler.apply([.overrun]).map(\.pid) == [10, 11])
        // A fork for a PID that is already gone.
        #expect(sampler.apply([.fork(parent: 1, child: 99)]).map(\.pid) == [10, 11])
    }

    @Test func resultStaysOrderedAndEqualToTheCacheThroughSmallAndLargeChanges() throws {
        let root = ProcTestDirectory()
        func fake(_ pid: Int32) -> FakeProcess {
            FakeProcess(pid: pid, startTime: UInt64(pid), comm: "p\(pid)", commandLine: ["p\(pid)"])
        }
        for pid in stride(from: Int32(10), to: 60, by: 1) { try root.writeProcess(fake(pid)) }
        let sampler = ProcessSampler(procRoot: root.path)
        func check(_ result: [TrackedProcess], _ pids: [Int32], sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(result.map(\.pid) == pids, sourceLocation: sourceLocation)
            #expect(result == sampler.cached.values.sorted { $0.pid < $1.pid }, sourceLocation: sourceLocation)
        }
        check(sampler.sample(), Array(Int32(10)..<60))
        // A few edits: removed at the ends and in the middle, added in between and past the end.
        for pid: Int32 in [10, 33, 59] { try root.removeProcess(pid) }
        for pid: Int32 in [5, 70] { try root.writeProcess(fake(pid)) }
        var expected: [Int32] = [5] + Array(11..<33) + Array(34..<59) + [70]
        check(sampler.sample(), expected)
        _ = sampler.refresh(pid: 33)  // gone: nothing changes
        sampler.forget(pid: 20)
        check(sampler.apply([]), expected.filter { $0 != 20 })
        check(sampler.sample(), expected)
        // Many at once (rebuilt rather than edited).
        for pid in stride(from: Int32(100), to: 160, by: 1) { try root.writeProcess(fake(pid)) }
        expected += Array(Int32(100)..<160)
        check(sampler.apply((Int32(100)..<160).map { .fork(parent: 1, child: $0) }), expected)
        check(sampler.apply((Int32(100)..<160).map { .exit(pid: $0) }), Array(expected.dropLast(60)))
    }

    // MARK: File identity

    @Test func fileIdentityIsSha256OfSizeAndHeadAndTail() throws {
        let directory = ProcTestDirectory()
        let small = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let large = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: ($0 &* 31) ^ ($0 >> 12)) }
        try directory.write("small", small)
        try directory.write("large", large)
        func littleEndian(_ count: Int) -> [UInt8] { withUnsafeBytes(of: UInt64(count).littleEndian) { Array($0) } }
        try directory.write("small.input", littleEndian(small.count) + small)
        try directory.write(
            "large.input", littleEndian(large.count) + Array(large.prefix(1 << 20)) + Array(large.suffix(1 << 20)))
        #expect(try runShell("cd \(directory.path) && sha256sum < small.input > small.sum && sha256sum < large.input > large.sum"))
        let expectedSmall = "sha256:" + (try directory.read("small.sum").prefix(64))
        let expectedLarge = "sha256:" + (try directory.read("large.sum").prefix(64))

        let cache = FileIdentityCache()
        #expect(cache.identity(ofFile: directory.path + "/small") == expectedSmall)
        #expect(cache.identity(ofFile: directory.path + "/large") == expectedLarge)
        #expect(cache.hashCount == 2)
        #expect(cache.identity(ofFile: directory.path + "/small") == expectedSmall)
        #expect(cache.hashCount == 2, "a known file is not read again")

        try directory.write("renamed-copy", small)
        #expect(cache.identity(ofFile: directory.path + "/renamed-copy") == expectedSmall)
        var changed = small
        changed[500] ^= 0xff
        try directory.write("changed", changed)
        #expect(cache.identity(ofFile: directory.path + "/changed") != expectedSmall)
        // Rewritten in place: same inode, new content and times.
        try directory.write("small", changed)
        #expect(cache.identity(ofFile: directory.path + "/small") == cache.identity(ofFile: directory.path + "/changed"))

        #expect(cache.identity(ofFile: directory.path) == nil, "a directory has no identity")
        #expect(cache.identity(ofFile: directory.path + "/missing") == nil)
        #expect(cache.identity(ofExecutableOf: getpid()) == cache.identity(ofFile: "/proc/self/exe"))
        #expect(cache.identity(ofExecutableOf: Int32.max) == nil)
    }

    @Test func fileIdentityOfADeletedRunningBinary() throws {
        let directory = ProcTestDirectory()
        let copy = try directory.copyExecutable("/bin/sleep", to: "doomed")
        let children = ProcChildren()
        let pid = try children.spawn(copy, ["30"])
        unlink(copy)
        let process = try #require(ProcessSampler().refresh(pid: pid))
        #expect(process.facts.executablePath == copy + " (deleted)")
        #expect(process.facts.fileIdentity == FileIdentityCache().identity(ofFile: "/bin/sleep"))
    }

    // MARK: Spawning

    @Test func spawnedChildrenHaveAnEmptySignalMaskAndDieOfSigterm() throws {
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }

        let pid = try spawnProcess("/bin/sleep", ["30"])
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        #expect(status.contains("SigBlk:\t0000000000000000"))
        kill(pid, SIGTERM)
        let waitStatus = try #require(reap(pid))
        #expect(waitStatus & 0x7f == SIGTERM, "killed by SIGTERM")
        #expect(reap(pid) == nil, "already reaped")
    }

    /// Through setpriv the call returns once the program itself runs (the wrapper's exec is waited
    /// for on inotify, not by polling), well within its 2 s limit.
    @Test(.enabled(if: geteuid() == 0, "running as another user needs root"))
    func spawnAsAnotherUserReturnsOnceTheProgramRuns() throws {
        let start = Date()
        let pid = try spawnProcess("/bin/sleep", ["30"], uid: 65534, gid: 65534)
        let elapsed = Date().timeIntervalSince(start)
        defer { killAndReap(pid) }
        let sleep = try #require(realpath("/bin/sleep", nil))
        defer { free(sleep) }
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe") == String(cString: sleep))
        #expect(elapsed < 1.5, "\(elapsed) s")
    }

    /// A bounded wait for a child's exit: false (and not reaped) while it runs, true once it exited
    /// and was reaped, at once rather than at the end of the wait.
    @Test func reapWithinATimeWaitsOnlyForTheExit() throws {
        let pid = try spawnProcess("/bin/sleep", ["30"])
        defer { killAndReap(pid) }
        let start = Date()
        #expect(!reap(pid, withinMilliseconds: 200))
        #expect(Date().timeIntervalSince(start) >= 0.2)
        kill(pid, SIGTERM)
        let killed = Date()
        #expect(reap(pid, withinMilliseconds: 10_000))
        #expect(Date().timeIntervalSince(killed) < 5)
        #expect(reap(pid) == nil, "already reaped")
    }

    @Test func spawnReportsErrors() {
        #expect(throws: LinuxError(operation: "posix_spawn /nonexistent/program", errno: .noSuchFileOrDirectory)) {
            try spawnProcess("/nonexistent/program", [])
        }
    }

    // MARK: The process connector

    @Test(.enabled(if: geteuid() == 0, "the process connector needs CAP_NET_ADMIN"))
    func connectorReportsForkExecAndExitOfAChild() throws {
        let connector = try ProcessConnector.open()
        defer { connector.close() }
        let other = try ProcessConnector.open()  // several listeners can coexist
        defer { other.close() }
        let pid = try spawnProcess("/bin/true", [])
        defer { reap(pid) }

        var events: [ProcessEvent] = []
        let deadline = Date().addingTimeInterval(1)
        func has(_ event: ProcessEvent) -> Bool { events.contains(event) }
        while Date() < deadline && !(has(.fork(parent: getpid(), child: pid)) && has(.exec(pid: pid)) && has(.exit(pid: pid))) {
            events += try connector.next(timeoutMilliseconds: 100)
        }
        let fork = try #require(events.firstIndex(of: .fork(parent: getpid(), child: pid)))
        let exec = try #require(events.firstIndex(of: .exec(pid: pid)))
        let exit = try #require(events.firstIndex(of: .exit(pid: pid)))
        #expect(fork < exec && exec < exit)
        #expect(try other.next(timeoutMilliseconds: 100).isEmpty == false)
    }

    /// While the filter is on, a child's fork, exec and exit never reach the socket; a uid change
    /// does; off again, everything does.
    @Test(.enabled(if: geteuid() == 0, "the process connector needs CAP_NET_ADMIN; setpriv changes uid"))
    func theUIDFilterPassesOnlyUIDChanges() throws {
        let connector = try ProcessConnector.open()
        defer { connector.close() }
        try connector.passOnlyUIDChanges(true)
        // Whatever was queued before the filter.
        while try !connector.next(timeoutMilliseconds: 0).isEmpty {}

        let quiet = try spawnProcess("/bin/true", [])
        reap(quiet)
        var events: [ProcessEvent] = []
        let until = Date().addingTimeInterval(0.3)
        while Date() < until { events += try connector.next(timeoutMilliseconds: 50) }
        #expect(!events.contains(.fork(parent: getpid(), child: quiet)), "\(events)")
        #expect(!events.contains(.exec(pid: quiet)), "\(events)")
        #expect(!events.contains(.exit(pid: quiet)), "\(events)")
        #expect(!events.contains { if case .fork = $0 { true } else if case .exec = $0 { true } else { false } }, "\(events)")

        // nobody's uid (65534): setpriv changes it before it execs true.
        let changing = try spawnProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--", "/bin/true"])
        reap(changing)
        events = []
        let deadline = Date().addingTimeInterval(1)
        while Date() < deadline && !events.contains(.uidChange(pid: changing)) {
            events += try connector.next(timeoutMilliseconds: 100)
        }
        #expect(events.contains(.uidChange(pid: changing)), "\(events)")
        #expect(!events.contains(.exec(pid: changing)), "\(events)")

        try connector.passOnlyUIDChanges(false)
        try connector.passOnlyUIDChanges(false)  // no filter to remove: nothing to do
        let loud = try spawnProcess("/bin/true", [])
        reap(loud)
        events = []
        let loudDeadline = Date().addingTimeInterval(1)
        while Date() < loudDeadline && !events.contains(.exit(pid: loud)) {
            events += try connector.next(timeoutMilliseconds: 100)
        }
        #expect(events.contains(.fork(parent: getpid(), child: loud)) && events.contains(.exit(pid: loud)), "\(events)")
    }

    /// A signal makes its descriptor readable until drained; a wait on it ends at once.
    @Test func anEventSignalWakesAWait() {
        let signal = EventSignal()
        #expect(signal.descriptor != nil)
        #expect(!signal.isSignalled)
        #expect(Readiness.wait([signal.descriptor], timeoutMilliseconds: 20) == [false])
        signal.signal()
        signal.signal()
        #expect(signal.isSignalled)
        let started = Date()
        #expect(Readiness.wait([signal.descriptor], timeoutMilliseconds: 5_000) == [true])
        #expect(Date().timeIntervalSince(started) < 1)
        #expect(signal.drain())
        #expect(!signal.isSignalled)
        #expect(!signal.drain())
    }

    @Test(.enabled(if: geteuid() == 0, "the process connector needs CAP_NET_ADMIN"))
    func closingWakesABlockedNextAndLaterCallsThrow() throws {
        let connector = try ProcessConnector.open()
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            // Events may arrive meanwhile; keep waiting until close makes next return or throw.
            while (try? connector.next(timeoutMilliseconds: 5_000)) != nil {}
            finished.signal()
        }
        thread.start()
        usleep(100_000)
        let closedAt = Date()
        connector.close()
        #expect(finished.wait(timeout: .now() + 2) == .success)
        #expect(Date().timeIntervalSince(closedAt) < 1)
        #expect(throws: ProcessConnector.closedError) { try connector.next(timeoutMilliseconds: 0) }
        connector.close()
    }

    // MARK: Netlink messages

    /// A datagram as the kernel sends it: nlmsghdr, cn_msg, proc_event with `data` at offset 16.
    static func datagram(
        what: UInt32, data: [Int32], index: UInt32 = 1, connectorLength: Int? = nil, netlinkLength: Int? = nil,
        type: UInt16 = 3
    ) -> [UInt8] {
        var event = [UInt8](repeating: 0, count: 16)
        withUnsafeBytes(of: what) { event.replaceSubrange(0..<4, with: $0) }
        for value in data { withUnsafeBytes(of: value) { event += $0 } }
        var message = [UInt8]()
        for value in [index, 1, 7, 0] as [UInt32] { withUnsafeBytes(of: value) { message += $0 } }
        withUnsafeBytes(of: UInt16(connectorLength ?? event.count)) { message += $0 }
        message += [0, 0]
        message += event
        var header = [UInt8]()
        withUnsafeBytes(of: UInt32(netlinkLength ?? (16 + message.count))) { header += $0 }
        withUnsafeBytes(of: type) { header += $0 }
        header += [0, 0]
        for value in [7, 0] as [UInt32] { withUnsafeBytes(of: value) { header += $0 } }
        return header + message
    }

    static func parse(_ bytes: [UInt8]) -> [ProcessEvent] {
        var events: [ProcessEvent] = []
        bytes.withUnsafeBytes { ConnectorLayout.parse($0, into: &events) }
        return events
    }

    @Test func parsingConnectorMessages() {
        let fork = Self.datagram(what: 1, data: [10, 10, 11, 11])
        #expect(Self.parse(fork) == [.fork(parent: 10, child: 11)])
        #expect(Self.parse(Self.datagram(what: 1, data: [10, 10, 12, 11])).isEmpty, "a new thread")
        #expect(Self.parse(Self.datagram(what: 2, data: [11, 11])) == [.exec(pid: 11)])
        #expect(Self.parse(Self.datagram(what: 2, data: [13, 11])) == [.exec(pid: 11)])
        #expect(Self.parse(Self.datagram(what: 4, data: [11, 11, 1000, 1000])) == [.uidChange(pid: 11)])
        #expect(Self.parse(Self.datagram(what: 0x8000_0000, data: [11, 11, 0, 17, 10, 10])) == [.exit(pid: 11)])
        #expect(Self.parse(Self.datagram(what: 0x8000_0000, data: [12, 11, 0, 17, 10, 10])).isEmpty, "a thread ended")
        #expect(Self.parse(Self.datagram(what: 0x200, data: [11, 11, 0, 0, 0, 0])).isEmpty, "comm changes are not needed")
        #expect(Self.parse(Self.datagram(what: 0, data: [0])).isEmpty, "acknowledgements are not events")
        #expect(Self.parse(Self.datagram(what: 0, data: [], type: 4)) == [.overrun])
        #expect(Self.parse(fork + Self.datagram(what: 2, data: [11, 11])) == [.fork(parent: 10, child: 11), .exec(pid: 11)])

        // Lengths are never trusted.
        #expect(Self.parse(Self.datagram(what: 1, data: [10, 10, 11])).isEmpty, "proc_event too short for a fork")
        #expect(Self.parse(Self.datagram(what: 1, data: [10, 10, 11, 11], connectorLength: 200)).isEmpty)
        #expect(Self.parse(Self.datagram(what: 1, data: [10, 10, 11, 11], netlinkLength: 400)).isEmpty)
        #expect(Self.parse(Self.datagram(what: 1, data: [10, 10, 11, 11], netlinkLength: 8)).isEmpty)
        #expect(Self.parse(Self.datagram(what: 1, data: [10, 10, 11, 11], index: 2)).isEmpty, "another connector")
        #expect(Self.parse(Array(fork.prefix(40))).isEmpty)
        #expect(Self.parse([]).isEmpty)
        var generator = SystemRandomNumberGenerator()
        for length in 0..<2000 {
            var bytes = (0..<(length % 120)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if bytes.count >= 4 { bytes.replaceSubrange(0..<4, with: withUnsafeBytes(of: UInt32(bytes.count)) { Array($0) }) }
            _ = Self.parse(bytes)  // must not crash
        }

        var acknowledgements: [ConnectorLayout.Acknowledgement] = []
        Self.datagram(what: 0, data: [1]).withUnsafeBytes { bytes in
            var events: [ProcessEvent] = []
            ConnectorLayout.parse(bytes, into: &events) { acknowledgements.append($0) }
        }
        #expect(acknowledgements == [ConnectorLayout.Acknowledgement(sequence: 7, ack: 0, error: 1)])
    }

    @Test func subscribeMessageLayout() {
        let message = ConnectorLayout.controlMessage(
            operation: ConnectorLayout.listen, sequence: 0x0102_0304, ack: 0x0A0B_0C0D, port: 77)
        let expected: [UInt8] =
            [40, 0, 0, 0, 3, 0, 0, 0, 4, 3, 2, 1, 77, 0, 0, 0]  // nlmsghdr: len, NLMSG_DONE, flags, seq, pid
            + [1, 0, 0, 0, 1, 0, 0, 0, 4, 3, 2, 1, 0x0D, 0x0C, 0x0B, 0x0A, 4, 0, 0, 0]  // cn_msg: idx, val, seq, ack, len, flags
            + [1, 0, 0, 0]  // PROC_CN_MCAST_LISTEN
        #expect(message == expected)
    }

    // MARK: Parsing /proc files

    struct CgroupCase: Sendable, CustomTestStringConvertible {
        let contents: String
        let expected: CgroupInfo
        var testDescription: String { contents.split(separator: "\n").last.map(String.init) ?? "(empty)" }
    }

    static let cgroupCases: [CgroupCase] = [
        CgroupCase(
            contents: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.mozilla.firefox-12345.scope\n",
            expected: CgroupInfo(
                path: "/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.mozilla.firefox-12345.scope",
                systemdUnit: "app-flatpak-org.mozilla.firefox-12345.scope", flatpakId: "org.mozilla.firefox")),
        CgroupCase(
            contents: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-com.valvesoftware.Steam-4242.scope/steam\n",
            expected: CgroupInfo(
                path: "/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-com.valvesoftware.Steam-4242.scope/steam",
                systemdUnit: "app-flatpak-com.valvesoftware.Steam-4242.scope", flatpakId: "com.valvesoftware.Steam")),
        CgroupCase(
            contents: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.example.Some\\x2dApp-77.scope\n",
            expected: CgroupInfo(
                path: "/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.example.Some\\x2dApp-77.scope",
                systemdUnit: "app-flatpak-org.example.Some\\x2dApp-77.scope", flatpakId: "org.example.Some-App")),
        CgroupCase(
            contents: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/snap.firefox.firefox-2b3c4d5e-6f70-4182-93a4-b5c6d7e8f901.scope\n",
            expected: CgroupInfo(
                path: "/user.slice/user-1000.slice/user@1000.service/app.slice/snap.firefox.firefox-2b3c4d5e-6f70-4182-93a4-b5c6d7e8f901.scope",
                systemdUnit: "snap.firefox.firefox-2b3c4d5e-6f70-4182-93a4-b5c6d7e8f901.scope", snapName: "firefox")),
        CgroupCase(
            contents: "0::/user.slice/user-1000.slice/session-2.scope/snap.steam.steam.2c7a0b7e.scope\n",
            expected: CgroupInfo(
                path: "/user.slice/user-1000.slice/session-2.scope/snap.steam.steam.2c7a0b7e.scope",
                systemdUnit: "snap.steam.steam.2c7a0b7e.scope", snapName: "steam")),
        CgroupCase(
            contents: "0::/system.slice/snap.lxd_beta.daemon.service\n",
            expected: CgroupInfo(
                path: "/system.slice/snap.lxd_beta.daemon.service", systemdUnit: "snap.lxd_beta.daemon.service",
                snapName: "lxd")),
        CgroupCase(
            contents: "0::/system.slice/ssh.service\n",
            expected: CgroupInfo(path: "/system.slice/ssh.service", systemdUnit: "ssh.service")),
        CgroupCase(
            contents: "0::/user.slice/user-1000.slice/session-3.scope\n",
            expected: CgroupInfo(path: "/user.slice/user-1000.slice/session-3.scope", systemdUnit: "session-3.scope")),
        CgroupCase(
            contents: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-steam-1234.scope\n",
            expected: CgroupInfo(
                path: "/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-steam-1234.scope",
                systemdUnit: "app-gnome-steam-1234.scope")),
        CgroupCase(
            contents: "0::/user.slice/user-1000.slice/user@1000.service/init.scope\n",
            expected: CgroupInfo(
                path: "/user.slice/user-1000.slice/user@1000.service/init.scope", systemdUnit: "init.scope")),
        CgroupCase(
            contents: "0::/user.slice/user-1000.slice/user@1000.service/app.slice\n",
            expected: CgroupInfo(
                path: "/user.slice/user-1000.slice/user@1000.service/app.slice", systemdUnit: "user@1000.service")),
        // cgroup v1 (legacy): the name=systemd hierarchy.
        CgroupCase(
            contents: """
                12:pids:/user.slice/user-1000.slice/session-3.scope
                11:cpu,cpuacct:/user.slice
                4:memory:/user.slice/user-1000.slice/session-3.scope
                1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-steam-1234.scope

                """,
            expected: CgroupInfo(
                path: "/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-steam-1234.scope",
                systemdUnit: "app-gnome-steam-1234.scope")),
        // Hybrid: both; the unified line wins unless it is only the root.
        CgroupCase(
            contents: "1:name=systemd:/system.slice/cron.service\n0::/system.slice/cron.service\n",
            expected: CgroupInfo(path: "/system.slice/cron.service", systemdUnit: "cron.service")),
        CgroupCase(
            contents: "9:name=systemd:/user.slice/user-1000.slice/session-5.scope\n4:memory:/x\n0::/\n",
            expected: CgroupInfo(path: "/user.slice/user-1000.slice/session-5.scope", systemdUnit: "session-5.scope")),
        CgroupCase(contents: "0::/\n", expected: CgroupInfo(path: "/")),
        CgroupCase(contents: "", expected: CgroupInfo(path: "")),
        CgroupCase(contents: "garbage without colons\n", expected: CgroupInfo(path: "")),
        // Not what they look like.
        CgroupCase(
            contents: "0::/app.slice/app-flatpak-.scope\n",
            expected: CgroupInfo(path: "/app.slice/app-flatpak-.scope", systemdUnit: "app-flatpak-.scope")),
        CgroupCase(
            contents: "0::/app.slice/app-flatpak-org.x.Y-notanumber.scope\n",
            expected: CgroupInfo(
                path: "/app.slice/app-flatpak-org.x.Y-notanumber.scope", systemdUnit: "app-flatpak-org.x.Y-notanumber.scope")),
        CgroupCase(
            contents: "0::/system.slice/snap.scope\n",
            expected: CgroupInfo(path: "/system.slice/snap.scope", systemdUnit: "snap.scope")),
        CgroupCase(
            contents: "0::/odd:path/x.service\n",
            expected: CgroupInfo(path: "/odd:path/x.service", systemdUnit: "x.service")),
    ]

    @Test(arguments: cgroupCases) func parsingCgroups(_ test: CgroupCase) {
        #expect(CgroupInfo.parse(test.contents) == test.expected)
    }

    @Test func parsingStatStatusCommandLineAndLoadAverage() {
        func stat(_ text: String) -> ProcFiles.Stat? {
            Array(text.utf8).withUnsafeBytes { ProcFiles.parseStat($0) }
        }
        var fake = FakeProcess(pid: 7, parentPid: 3, startTime: 123_456_789, comm: "evil) 1 2 (x", commandLine: [])
        let parsed = stat(fake.statLine)
        #expect(parsed == ProcFiles.Stat(
            comm: "evil) 1 2 (x", state: UInt8(ascii: "S"), parentPid: 3, flags: 0x0040_0100, threads: 1,
            startTime: 123_456_789, cpuTicks: 3 + 1))
        fake.comm = "with space"
        fake.state = "Z"
        #expect(stat(fake.statLine)?.isDead == true)
        #expect(stat("7 (x) S 3") == nil, "truncated")
        #expect(stat("7 x S 3 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5") == nil, "no command name")
        #expect(stat("7 (x) S -3 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0") == nil, "negative parent")
        #expect(stat("7 (x) S 3 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99999999999999999999 0") == nil, "overflow")
        #expect(stat("") == nil)

        let status = FakeProcess(pid: 7, uid: 1000, startTime: 1, comm: "x", commandLine: []).status
        #expect(Array(status.utf8).withUnsafeBytes { ProcFiles.parseRealUID(status: $0) } == 1000)
        #expect(Array("Name:\tx\nUid:\n".utf8).withUnsafeBytes { ProcFiles.parseRealUID(status: $0) } == nil)
        #expect(Array("Name:\tUid:\t5\n".utf8).withUnsafeBytes { ProcFiles.parseRealUID(status: $0) } == nil)

        func commandLine(_ bytes: [UInt8]) -> [String] { bytes.withUnsafeBytes { ProcFiles.parseCommandLine($0) } }
        #expect(commandLine(Array("java\0-jar\0/home/kid/minecraft.jar\0".utf8)) == ["java", "-jar", "/home/kid/minecraft.jar"])
        #expect(commandLine(Array("a\0\0b\0".utf8)) == ["a", "", "b"])
        #expect(commandLine(Array("retitled process name".utf8)) == ["retitled process name"])
        #expect(commandLine([]) == [])

        func loadAverage(_ text: String) -> ProcFiles.TaskStamp? {
            Array(text.utf8).withUnsafeBytes { ProcFiles.parseLoadAverage($0) }
        }
        #expect(loadAverage("0.08 0.03 0.01 2/151 32011\n") == ProcFiles.TaskStamp(tasks: 151, lastPid: 32011))
        #expect(loadAverage("0.08 0.03 0.01 2 32011\n") == nil)
        #expect(loadAverage("") == nil)

        func pid(_ name: String) -> Int32? {
            Array(name.utf8CString).withUnsafeBytes { ProcFiles.parsePid($0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        }
        #expect(pid("1") == 1)
        #expect(pid("2147483647") == Int32.max)
        #expect(pid("2147483648") == nil)
        #expect(pid("0") == nil)
        #expect(pid("012") == nil)
        #expect(pid("self") == nil)
        #expect(pid("12a") == nil)
        #expect(pid("") == nil)
    }

    @Test func linuxErrorsCarryTheCallAndErrno() {
        #expect(throws: LinuxError(operation: "open /nonexistent", errno: .noSuchFileOrDirectory)) {
            try LinuxError.check("open /nonexistent") { open("/nonexistent", O_RDONLY) }
        }
        #expect(LinuxError(operation: "open /x", errno: .noSuchFileOrDirectory).description == "open /x: No such file or directory (errno 2)")
        #expect(throws: LinuxError(operation: "posix_spawnattr", errno: .invalidArgument)) {
            try LinuxError.checkErrorNumber("posix_spawnattr") { EINVAL }
        }
        var calls = 0
        let result = try? LinuxError.check("retried") { () -> Int32 in
            calls += 1
            if calls < 3 {
                errno = EINTR
                return -1
            }
            return 5
        }
        #expect(result == 5 && calls == 3, "EINTR is retried")
    }

    @Test func libsystemdsNegativeErrnoBecomesAnErrnoAndInterruptsAreRetriedUnlessAskedNotTo() {
        #expect(throws: LinuxSystemdError(operation: "sd_bus_start", errno: .noSuchFileOrDirectory)) {
            try LinuxSystemdError.check("sd_bus_start") { -ENOENT }
        }
        #expect(LinuxSystemdError(operation: "sd_bus_start", errno: .noSuchFileOrDirectory).description == "sd_bus_start: No such file or directory")
        var calls = 0
        let negated = try? Errno.checkNegated { () -> Int32 in
            calls += 1
            return calls < 2 ? -EINTR : 7
        }
        #expect(negated == 7 && calls == 2, "-EINTR is retried")
        calls = 0
        #expect(throws: Errno.interrupted) {
            try Errno.check(retryOnInterrupt: false) { () -> Int32 in
                calls += 1
                errno = EINTR
                return -1
            }
        }
        #expect(calls == 1, "not retried with retryOnInterrupt: false")
        let wouldBlock = valueOrErrno { () -> Int32 in
            errno = EAGAIN
            return -1
        }
        #expect(wouldBlock.isTemporaryFailure && !valueOrErrno({ Int32(0) }).isTemporaryFailure)
    }
}
