import SystemPackage
import CurfewPOSIX
import CLinux
import CurfewCore
import Glibc
import CLinux

/// One live process as the tracker sees it.
public struct TrackedProcess: Sendable, Equatable {
    public var pid: Int32
    /// The parent when the process was last parsed (a process is reparented when its parent exits).
    public var parentPid: Int32
    /// The real uid (`Uid:` of `/proc/PID/status`).
    public var uid: UInt32
    /// Field 22 of `/proc/PID/stat`, clock ticks after boot: (pid, startTime) identifies a process,
    /// since PIDs are reused.
    public var startTime: UInt64
    /// What app matching looks at: executable, command line, unit, flatpak/snap id, file identity.
    public var facts: ProcessFacts
    /// The cgroup path (`CgroupInfo.path`), e.g. to act on a whole scope; empty if unknown.
    public var cgroupPath: String

    public init(
        pid: Int32, parentPid: Int32, uid: UInt32, startTime: UInt64, facts: ProcessFacts, cgroupPath: String = ""
    ) {
        self.pid = pid
        self.parentPid = parentPid
        self.uid = uid
        self.startTime = startTime
        self.facts = facts
        self.cgroupPath = cgroupPath
    }
}

/// Parses `/proc` into `TrackedProcess`es, parsing each process once.
///
/// Not thread-safe: one owner (it keeps a cache and a read buffer). `procRoot` is injectable for tests.
///
/// Two ways to keep it current:
/// - **Polling** (`sample()`): lists `/proc` and compares each entry with the cache. A known process
///   costs no system call at all: the inode number the listing reports for `/proc/PID` belongs to
///   that process's procfs inode, and a new process under a reused PID gets a new inode (procfs
///   allocates one per process and drops the old one when the process is reaped). Only new PIDs and
///   changed inodes are read; a changed inode with an unchanged start time is the same process whose
///   inode the kernel evicted and rebuilt. Before listing, `/proc/loadavg` is read: when neither the
///   task count nor the last PID handed out changed, no process started or was reaped, and the listing
///   is skipped. Listing cannot show an `exec` (or a uid change) in a known process, so a new process
///   is parsed once more on the next `sample()` (it may have been caught between fork and exec, or
///   in the middle of an exec, when the command line reads empty), and `revalidationsPerSample`
///   known processes are checked each time (their `stat`: start time and command name, which an
///   exec changes) in turn.
/// - **Events** (`apply(_:)`): the process connector's fork, exec, uid and exit events name what to
///   parse or drop; no listing at all unless events were lost (`.overrun`).
///
/// A process that has exited but not been reaped yet (a zombie) still shows in `/proc`; polling keeps
/// it until it is reaped, an exit event drops it at once. Kernel threads are never reported.
public final class ProcessSampler {
    public let procRoot: String
    public let identities: FileIdentityCache
    /// Known processes whose `stat` each `sample()` re-reads, in turn, to notice an exec or a reused
    /// PID the listing cannot show. Each costs one file read (about 10 µs); 0 turns it off.
    public var revalidationsPerSample = 4
    /// Command lines are read up to this many bytes.
    public var maxCommandLineBytes = 64 * 1024

    /// Only processes of these uids are parsed fully and reported (nil: all). The others are read as
    /// far as their uid (`stat` and `status`) and kept out of `cached`; with events, a fork of one
    /// of them or its exec is not read at all (a uid change is: it may make the process one of
    /// these). Meant for use with the process connector, whose uid events say when a process
    /// changes uid: polling would not notice. Setting a different set starts the cache over.
    public var interestingUIDs: Set<UInt32>? = nil {
        didSet {
            if interestingUIDs != oldValue { startOver() }
        }
    }

    /// Whether an executable (its path and identity) is a dynamic loader; set by the tracker from the
    /// catalog's loader list. A process running a loader is described by the program the loader
    /// mapped (see `MemoryMapping.programRunByLoader`).
    public var isLoader: (String, FileIdentityCache.Identity?) -> Bool = { _, _ in false }

    /// Processes running a loader that had not mapped its program yet when last parsed (it does so
    /// within microseconds of the exec), with the looks left for each; `lookAgainAtLoaders()` parses
    /// them again.
    public private(set) var unresolvedLoaders: [Int32: Int] = [:]
    /// How many more looks an unresolved loader process gets.
    static let loaderLooks = 50

    /// Loader processes still without a program after their quick looks (a loader slowed down on
    /// purpose, or one that only lists or verifies): `lookAgainAtSlowLoaders()` looks at them at the
    /// caller's pace (each tick) for as long as they live.
    public private(set) var slowLoaders: Set<Int32> = []

    /// Parses again the processes whose loader had not mapped its program yet; returns whether any
    /// changed. A process past its quick looks moves to `slowLoaders`.
    @discardableResult
    public func lookAgainAtLoaders() -> Bool {
        let before = changes
        for (pid, looks) in unresolvedLoaders {
            unresolvedLoaders[pid] = looks - 1
            store(parse(pid, secondLook: false), for: pid)
            if let left = unresolvedLoaders[pid], left <= 0 {
                unresolvedLoaders[pid] = nil
                slowLoaders.insert(pid)
            }
        }
        return changes != before
    }

    /// Parses again the loader processes in `slowLoaders`; returns whether any changed.
    @discardableResult
    public func lookAgainAtSlowLoaders() -> Bool {
        let before = changes
        for pid in slowLoaders {
            store(parse(pid, secondLook: false), for: pid)
            // Resolved, gone or no longer a loader: parse left it out of `unresolvedLoaders`.
            if unresolvedLoaders.removeValue(forKey: pid) == nil { slowLoaders.remove(pid) }
        }
        return changes != before
    }

    /// Counts changes to `cached`: equal counts, the same processes with the same facts.
    public private(set) var changes: UInt64 = 0

    /// The live processes by PID, as of the last `sample()`, `apply(_:)` or `refresh(pid:)`.
    public private(set) var cached: [Int32: TrackedProcess] = [:]

    private struct Entry {
        /// The inode of the `/proc/PID` directory.
        var inode: UInt64
        var startTime: UInt64
        var comm: String
        /// False for kernel threads and zombies: listed by `/proc` but not reported.
        var reported: Bool
        /// The listing generation that last saw it.
        var seen: UInt32
    }

    private enum Parsed {
        case gone
        case hidden(Entry)
        case process(Entry, TrackedProcess)
    }

    private var entries: [Int32: Entry] = [:]
    /// `cached` ordered by PID, kept up to date by small edits (a shift of the array, no reference
    /// counting), or rebuilt after many changes at once.
    private var snapshot: [TrackedProcess] = []
    private var snapshotIsCurrent = true
    private var snapshotEdits = 0
    private var generation: UInt32 = 0
    /// Processes first parsed by the last `sample()`, to parse again in the next.
    private var secondLooks: [Int32] = []
    private var revalidationCursor = 0
    /// `/proc/loadavg` as read just before the last complete listing; nil when it is not usable.
    private var stamp: ProcFiles.TaskStamp?
    private var listingRequired = true
    /// `/proc/loadavg` describes the PID namespace of the reader; it only stands for `procRoot` when
    /// that is the `/proc` of this process's own namespace.
    private let stampIsUsable: Bool
    private var unmatched: [(pid: Int32, inode: UInt64)] = []
    private let reader = ProcReader(capacity: 64 * 1024 + 1)

    public init(procRoot: String = "/proc", identities: FileIdentityCache = FileIdentityCache()) {
        self.procRoot = procRoot
        self.identities = identities
        stampIsUsable = procRoot == "/proc" && reader.readLink("/proc/self", in: AT_FDCWD) == String(getpid())
    }

    // MARK: Polling

    /// Brings the cache up to date with `/proc` and returns every live process, ordered by PID. Only
    /// processes not seen before are parsed fully; see the type's documentation for the costs.
    public func sample() -> [TrackedProcess] {
        let pendingSecondLooks = secondLooks
        secondLooks.removeAll(keepingCapacity: true)
        let now = stampIsUsable ? readStamp() : nil
        if listingRequired || now == nil || now != stamp {
            if list() {
                stamp = now
                listingRequired = false
            }
        }
        for pid in pendingSecondLooks where entries[pid] != nil {
            store(parse(pid, secondLook: false), for: pid)
        }
        revalidate(count: revalidationsPerSample)
        return current()
    }

    /// Lists `procRoot`; false if it cannot be read (the cache is then left as it was).
    private func list() -> Bool {
        guard var directory = try? DirectoryStream(path: procRoot) else { return false }
        generation &+= 1
        var matched = 0
        unmatched.removeAll(keepingCapacity: true)
        while let entry = directory.next() {
            guard let pid = ProcFiles.parsePid(entry.nameBytes) else { continue }
            let inode = entry.inode
            if let index = entries.index(forKey: pid), entries.values[index].inode == inode {
                entries.values[index].seen = generation
                matched += 1
            } else {
                unmatched.append((pid, inode))
            }
        }

        // Every listed PID ends up seen in this generation or gone; whatever else is left was not listed.
        var seen = matched
        for (pid, inode) in unmatched {
            if let index = entries.index(forKey: pid) {
                // A new inode: the same process whose procfs inode was rebuilt, or a reused PID.
                let known = entries.values[index]
                if let stat = readStat(pid), stat.startTime == known.startTime, !(stat.isDead && known.reported) {
                    entries.values[index].inode = inode
                    entries.values[index].seen = generation
                    seen += 1
                    continue
                }
            }
            store(parse(pid, secondLook: true), for: pid)
            if entries[pid] != nil { seen += 1 }
        }
        if entries.count > seen {
            for pid in entries.filter({ $0.value.seen != generation }).map(\.key) { remove(pid) }
        }
        return true
    }

    // MARK: Events

    /// Applies process connector events: forked, exec'd and uid-changed processes are parsed (once,
    /// however many events name them), exited ones are dropped. After `.overrun` (events were lost)
    /// `/proc` is listed again and every known process is checked. Returns the live processes,
    /// ordered by PID. An empty batch costs nothing.
    public func apply(_ events: [ProcessEvent]) -> [TrackedProcess] {
        var order: [Int32] = []
        var queued = Set<Int32>()
        var overrun = false
        let filtered = interestingUIDs != nil
        for event in events {
            switch event {
            case .fork(let parent, let pid):
                // A process forked by one not reported has its parent's uid: not interesting either.
                if filtered && cached[parent] == nil && !queued.contains(parent) { continue }
                if queued.insert(pid).inserted { order.append(pid) }
            case .exec(let pid):
                if filtered && cached[pid] == nil && !queued.contains(pid) { continue }
                if queued.insert(pid).inserted { order.append(pid) }
            case .uidChange(let pid):
                if queued.insert(pid).inserted { order.append(pid) }
            case .exit(let pid):
                queued.remove(pid)
                remove(pid)
            case .overrun:
                overrun = true
            }
        }
        for pid in order where queued.remove(pid) != nil {
            store(parse(pid, secondLook: false), for: pid)
        }
        if overrun {
            // With a uid filter, a process read as someone else's may have changed uid unseen.
            if filtered { startOver() }
            listingRequired = true
            _ = sample()
            revalidate(count: entries.count)
        }
        return current()
    }

    // MARK: One process

    /// Parses `pid` now (after an exec its executable and command line change) and caches the result;
    /// nil if it is gone, a zombie or a kernel thread.
    public func refresh(pid: Int32) -> TrackedProcess? {
        store(parse(pid, secondLook: false), for: pid)
        return cached[pid]
    }

    /// Without the process connector an exec goes unseen until the process is revalidated; for the
    /// few processes that matter (a managed user's) the caller asks each tick: one readlink of
    /// `/proc/PID/exe`, and a full parse only when the executable changed. Returns the process as
    /// now known (nil if gone).
    public func refreshIfExecutableChanged(pid: Int32) -> TrackedProcess? {
        guard let known = cached[pid] else { return refresh(pid: pid) }
        // Into the sampler's buffer, compared byte by byte: no allocation for the usual "unchanged".
        let capacity = min(reader.buffer.count, Int(PATH_MAX) * 4)
        let base = reader.buffer.baseAddress!.assumingMemoryBound(to: CChar.self)
        let count = readlink("\(procRoot)/\(pid)/exe", base, capacity)
        guard count > 0, count < capacity else { return known }
        let current = UnsafeRawBufferPointer(rebasing: reader.buffer[0..<count])
        let unchanged = known.facts.executablePath.map { $0.utf8.elementsEqual(current) } ?? false
        return unchanged ? known : refresh(pid: pid)
    }

    /// Makes the next `sample()` list `procRoot` whatever `/proc/loadavg` says (events were dropped).
    public func requireListing() { listingRequired = true }

    /// Drops `pid` from the cache (after its exit event). If it is still listed, the next `sample()`
    /// parses it again.
    public func forget(pid: Int32) {
        remove(pid)
        listingRequired = true
    }

    // MARK: Internals

    /// Forgets every process; the next `sample()` lists and reads them all again.
    private func startOver() {
        entries.removeAll()
        cached.removeAll()
        snapshot.removeAll()
        snapshotIsCurrent = true
        secondLooks.removeAll()
        listingRequired = true
        changes &+= 1
    }

    private func current() -> [TrackedProcess] {
        if !snapshotIsCurrent {
            snapshot.removeAll(keepingCapacity: true)
            for pid in cached.keys.sorted() { snapshot.append(cached[pid]!) }
            snapshotIsCurrent = true
        }
        snapshotEdits = 0
        return snapshot
    }

    /// Puts `process` (or nothing) at `pid`'s place in the snapshot. Past 32 edits between two reads
    /// of it, shifting the array each time costs more than sorting it once, so it is rebuilt instead.
    private func editSnapshot(_ pid: Int32, _ process: TrackedProcess?) {
        changes &+= 1
        guard snapshotIsCurrent else { return }
        snapshotEdits += 1
        if snapshotEdits > 32 {
            snapshotIsCurrent = false
            return
        }
        var low = 0
        var high = snapshot.count
        while low < high {
            let middle = (low + high) / 2
            if snapshot[middle].pid < pid { low = middle + 1 } else { high = middle }
        }
        let found = low < snapshot.count && snapshot[low].pid == pid
        switch (found, process) {
        case (true, let process?): snapshot[low] = process
        case (true, nil): snapshot.remove(at: low)
        case (false, let process?): snapshot.insert(process, at: low)
        case (false, nil): break
        }
    }

    private func remove(_ pid: Int32) {
        entries.removeValue(forKey: pid)
        unresolvedLoaders.removeValue(forKey: pid)
        slowLoaders.remove(pid)
        if cached.removeValue(forKey: pid) != nil { editSnapshot(pid, nil) }
    }

    private func store(_ parsed: Parsed, for pid: Int32) {
        switch parsed {
        case .gone:
            remove(pid)
        case .hidden(let entry):
            entries[pid] = entry
            if cached.removeValue(forKey: pid) != nil { editSnapshot(pid, nil) }
        case .process(let entry, let process):
            entries[pid] = entry
            if cached.updateValue(process, forKey: pid) != process { editSnapshot(pid, process) }
        }
    }

    /// Checks up to `count` reported processes, continuing where the last call stopped.
    private func revalidate(count: Int) {
        guard count > 0, !cached.isEmpty else { return }
        let pids = current()  // stays as it is while `store` changes the cache
        let total = min(count, pids.count)
        if revalidationCursor >= pids.count { revalidationCursor = 0 }
        for step in 0..<total {
            let pid = pids[(revalidationCursor + step) % pids.count].pid
            guard let entry = entries[pid], entry.reported else { continue }
            guard let stat = readStat(pid) else {
                remove(pid)
                continue
            }
            if stat.startTime != entry.startTime || stat.comm != entry.comm || stat.isDead {
                // Possibly in the middle of an exec: look once more next time.
                store(parse(pid, secondLook: true), for: pid)
            } else if let known = cached[pid], known.parentPid != stat.parentPid {
                cached[pid]!.parentPid = stat.parentPid
                editSnapshot(pid, cached[pid]!)
            }
        }
        revalidationCursor = (revalidationCursor + total) % pids.count
    }

    /// The CPU time (user + system, `/proc/PID/stat` fields 14 and 15) `process` has used, in
    /// milliseconds; nil when it is gone or its PID now belongs to another process.
    public func cpuMilliseconds(of process: ProcessRef) -> Int64? {
        guard let stat = readStat(process.pid), stat.startTime == process.startTime, !stat.isDead else { return nil }
        return Int64(clamping: stat.cpuTicks) * 1000 / Self.clockTicksPerSecond
    }

    /// `sysconf(_SC_CLK_TCK)`: the unit of `/proc/PID/stat`'s times (100 on Linux).
    static let clockTicksPerSecond: Int64 = max(1, Int64(sysconf(Int32(_SC_CLK_TCK))))

    private func readStat(_ pid: Int32) -> ProcFiles.Stat? {
        reader.read("\(procRoot)/\(pid)/stat", in: AT_FDCWD).flatMap(ProcFiles.parseStat)
    }

    private func readStamp() -> ProcFiles.TaskStamp? {
        reader.read("/proc/loadavg", in: AT_FDCWD).flatMap(ProcFiles.parseLoadAverage)
    }

    /// Reads everything about `pid` through one descriptor of its `/proc/PID` directory, so that all
    /// files describe the same process even if it exits and its PID is reused meanwhile.
    private func parse(_ pid: Int32, secondLook: Bool) -> Parsed {
        guard
            let opened = try? LinuxError.check(
                "open \(procRoot)/\(pid)", { open("\(procRoot)/\(pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC) })
        else { return .gone }
        let procDirectory = FileDescriptor(rawValue: opened)
        defer { try? procDirectory.close() }
        // Relative to it, as the *at calls take it.
        let directory = procDirectory.rawValue
        var status = Glibc.stat()
        guard (try? LinuxError.check("fstat", { fstat(directory, &status) })) != nil,
            let stat = reader.read("stat", in: directory).flatMap(ProcFiles.parseStat)
        else { return .gone }
        var entry = Entry(
            inode: UInt64(status.st_ino), startTime: stat.startTime, comm: stat.comm, reported: false, seen: generation)
        if stat.isKernelThread || stat.isDead { return .hidden(entry) }
        guard let uid = reader.read("status", in: directory).flatMap(ProcFiles.parseRealUID) else { return .gone }
        if let interestingUIDs, !interestingUIDs.contains(uid) { return .hidden(entry) }
        let commandLine =
            reader.read("cmdline", in: directory, limit: maxCommandLineBytes).map(ProcFiles.parseCommandLine) ?? []
        let cgroup =
            reader.read("cgroup", in: directory).map { CgroupInfo.parse(String(decoding: $0, as: UTF8.self)) }
            ?? CgroupInfo(path: "")
        var executable = reader.readLink("exe", in: directory)
        var identity = executable == nil ? nil : identities.identities(of: "exe", in: directory)
        var loader: String? = nil
        if let path = executable, isLoader(path, identity) {
            // `ld.so PROGRAM`: the program is what runs. Its file is read through map_files (which
            // works for a deleted file or a memfd), else through the path the mapping names.
            let mappings = reader.read("maps", in: directory).map { MemoryMapping.parse(String(decoding: $0, as: UTF8.self)) } ?? []
            let isSystemLibrary = { (mapping: MemoryMapping) -> Bool in
                guard MemoryMapping.hasLibraryName(mapping.path) else { return false }
                var file = Glibc.stat()
                return fstatat(directory, "map_files/\(mapping.range)", &file, 0) == 0 && file.st_uid == 0
            }
            if let program = MemoryMapping.programRunByLoader(
                mappings, loaderInode: identity?.inode ?? 0, isSystemLibrary: isSystemLibrary)
            {
                loader = path
                executable = program.path
                identity =
                    identities.identities(of: "map_files/\(program.range)", in: directory)
                    ?? identities.identities(ofFile: AppCatalog.withoutDeletedMarker(program.path))
                unresolvedLoaders[pid] = nil
            } else if unresolvedLoaders[pid] == nil {
                unresolvedLoaders[pid] = Self.loaderLooks
            }
        } else {
            unresolvedLoaders[pid] = nil
        }
        entry.reported = true
        if secondLook { secondLooks.append(pid) }
        let facts = ProcessFacts(
            executablePath: executable, commandLine: commandLine, flatpakId: cgroup.flatpakId,
            snapName: cgroup.snapName, systemdUnit: cgroup.systemdUnit, fileIdentity: identity?.contentHash,
            buildID: identity?.buildID, loader: loader, executableOwner: identity?.owner)
        return .process(
            entry,
            TrackedProcess(
                pid: pid, parentPid: stat.parentPid, uid: uid, startTime: stat.startTime, facts: facts,
                cgroupPath: cgroup.path))
    }
}
