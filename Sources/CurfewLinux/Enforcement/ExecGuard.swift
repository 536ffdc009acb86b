import SystemPackage
import CurfewCore
import CurfewPOSIX
import Glibc
import CLinux
import Logging
import Synchronization

/// Denies the exec of a program a managed user must not run now, before it runs (fanotify(7)).
///
/// One fanotify group of class `FAN_CLASS_CONTENT` (fanotify_init(2); CAP_SYS_ADMIN) with a
/// `FAN_OPEN_EXEC_PERM` mark on every mounted filesystem but the kernel's pseudo-filesystems
/// (fanotify_mark(2) `FAN_MARK_FILESYSTEM`, else `FAN_MARK_MOUNT`; mounts added later are marked when
/// `/proc/self/mountinfo` changes). The kernel then holds every exec on the machine until the guard
/// answers `FAN_ALLOW` or `FAN_DENY`, so the answer must always come, and soon, whatever a child
/// does (docs/security.md, "The exec guard cannot be stalled"):
/// - events are read in batches (`batchCapacity`); in each, an exec by anyone who is not a managed
///   user with something denied now is allowed first, from the event alone when nobody has anything
///   denied, else after reading the process's real uid; the managed users' execs come after, one of
///   each user's in turn, so a child's flood holds neither root's execs nor another child's;
/// - for a managed user, the file is named from what is already known of it (its path, and its
///   identity only if `FileIdentityCache` read it before) and denied when `ExecRules` says so.
///   Nothing on this thread reads a file's content or waits for a file system: a file not known yet
///   is allowed (the tracker stops the process after it starts, as it does for everything the guard
///   cannot see: an exec from a memfd lives on the kernel's internal shmem mount, which cannot be
///   marked) and handed to `runIdentifier`, which hashes it on its own thread for its next exec;
/// - `runWatchdog` answers the events of a batch the guard thread has held past the deadline, and
///   everything that queues meanwhile, as the guard would (the same rules and facts): a late guard
///   never lets a managed user's blocked exec through, and allows everyone else's. The guard thread
///   arms a one-shot timer (timerfd(2)) when it takes a batch and disarms it when the batch is
///   answered, so the watchdog sleeps until a decision is late;
/// - closing the descriptor (when the agent stops, or if it dies) removes the marks, and the kernel
///   allows whatever was still waiting.
///
/// A denied exec fails with EPERM ("Operation not permitted"); the denial is queued for the tracker
/// (`takeDenials`), which tells the child and records it as it does a stop.
///
/// Between reading a batch and answering it, the guard thread allocates nothing for the execs of
/// unmanaged users (preallocated buffers, a retained snapshot of the rules); only a managed user's
/// exec is named with Swift strings.
public final class ExecGuard: Sendable {
    /// An exec the guard denied.
    public struct DeniedExec: Sendable, Equatable {
        public var pid: Int32
        public var denial: ExecRules.Denial
    }

    /// The fanotify group, open for as long as the guard.
    public let descriptor: FileDescriptor
    let identities: FileIdentityCache
    let deadlineNanoseconds: Int64
    /// A test's hook (`curfewd --exec-guard-stall`): the guard thread sleeps this long before deciding a
    /// managed user's exec, so the watchdog must answer.
    let stallMilliseconds: Int64
    let rules = Mutex(ExecRules())
    /// The watchdog's one-shot timer (CLOCK_MONOTONIC): armed for the deadline while the guard thread
    /// holds an event, disarmed by its answer. It fires only for a late decision.
    let deadlineTimer: FileDescriptor
    /// Signalled when rules are published, for the guard thread: it marks the filesystems while some user has
    /// something denied and removes the marks while nobody has (then no exec on the machine waits for
    /// the agent at all), and drops the ignore marks, which were decided under the old rules.
    let marksChanged = EventSignal()
    let denials = Mutex<(list: [DeniedExec], dropped: Int)>(([], 0))
    let onDenial: @Sendable () -> Void
    /// The batch the guard thread holds, shared with the watchdog.
    struct InFlight {
        /// Per event: its descriptor + 1 while unanswered; 0 answered by the guard thread; -1 the
        /// watchdog is answering it; -2 the watchdog answered it.
        var tokens = [Int64](repeating: 0, count: ExecGuard.batchCapacity)
        var pids = [Int32](repeating: 0, count: ExecGuard.batchCapacity)
        var count = 0
        /// CLOCK_MONOTONIC nanoseconds when the guard thread read the batch; 0 when it holds none.
        var since: Int64 = 0
        /// Counts the batches, so that the watchdog knows when the one it stepped in for is over.
        var generation: UInt64 = 0
    }
    let inFlight = Mutex(InFlight())
    /// Answers given (allowed, denied) and execs the watchdog answered because the guard was late.
    public let allowed = Atomic<Int64>(0)
    public let denied = Atomic<Int64>(0)
    public let late = Atomic<Int64>(0)
    /// What is marked: superblocks ("major:minor") and, where a superblock cannot be, mount ids.
    let marked = Mutex<Set<String>>([])

    static let maxQueuedDenials = 256
    /// Filesystems nobody executes from.
    static let unmarkedTypes: Set<String> = [
        "proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "debugfs", "tracefs", "securityfs", "pstore", "bpf",
        "configfs", "fusectl", "binfmt_misc", "autofs", "efivarfs", "rpc_pipefs", "nsfs", "selinuxfs",
    ]

    /// fanotify_init(2) with `FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK`; fails with EPERM
    /// without CAP_SYS_ADMIN, and with ENOSYS or EINVAL on a kernel without fanotify permission events.
    /// Nothing is marked yet (`markMounts`).
    public init(
        identities: FileIdentityCache, deadlineMilliseconds: Int64 = 100, stallMilliseconds: Int64 = 0,
        onDenial: @escaping @Sendable () -> Void = {}
    ) throws(LinuxError) {
        // O_LARGEFILE is 0 on 64-bit glibc; event descriptors are read-only and close-on-exec.
        let group = try LinuxError.check("fanotify_init") {
            fanotify_init(UInt32(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK), UInt32(O_RDONLY | O_CLOEXEC))
        }
        descriptor = FileDescriptor(rawValue: group)
        do {
            deadlineTimer = FileDescriptor(
                rawValue: try LinuxError.check("timerfd_create") { timerfd_create(CLOCK_MONOTONIC, CURFEW_TFD_CLOEXEC | CURFEW_TFD_NONBLOCK) })
        } catch {
            try? descriptor.close()
            throw error
        }
        self.identities = identities
        self.deadlineNanoseconds = max(1, deadlineMilliseconds) * 1_000_000
        self.stallMilliseconds = max(0, stallMilliseconds)
        self.onDenial = onDenial
    }

    deinit {
        try? descriptor.close()
        try? deadlineTimer.close()
    }

    /// Takes what the tracker decided; the guard thread uses it from its next event on. The old value
    /// is released outside the lock.
    public func publish(_ new: ExecRules) {
        var old = new
        rules.withLock { swap(&$0, &old) }
        marksChanged.signal()
    }

    /// The execs denied since the last call, and how many more were denied than kept.
    public func takeDenials() -> (list: [DeniedExec], dropped: Int) {
        denials.withLock { queued in
            defer { queued = ([], 0) }
            return queued
        }
    }

    // MARK: - Marks

    /// Marks every mounted filesystem not marked yet (`/proc/self/mountinfo`). Returns the mount
    /// points newly marked and those that could not be.
    public func markMounts(mountInfo path: String = "/proc/self/mountinfo") -> (marked: [String], failed: [(String, LinuxError)]) {
        guard let text = Self.readSmallFile(path) else { return ([], [("/proc/self/mountinfo", LinuxError(operation: "read \(path)", errno: .last))]) }
        var newlyMarked: [String] = []
        var failed: [(String, LinuxError)] = []
        for mount in Self.parseMountInfo(text) where !Self.unmarkedTypes.contains(mount.type) {
            let already = marked.withLock { $0.contains(mount.device) || $0.contains("mount:\(mount.id)") }
            if already { continue }
            do {
                try LinuxError.check("fanotify_mark FAN_MARK_FILESYSTEM \(mount.point)") {
                    fanotify_mark(
                        descriptor.rawValue, UInt32(FAN_MARK_ADD | FAN_MARK_FILESYSTEM), UInt64(FAN_OPEN_EXEC_PERM), AT_FDCWD, mount.point)
                }
                marked.withLock { _ = $0.insert(mount.device) }
                newlyMarked.append(mount.point)
            } catch {
                // Some filesystems cannot be marked whole (no fsid, say): the mount then.
                do {
                    try LinuxError.check("fanotify_mark FAN_MARK_MOUNT \(mount.point)") {
                        fanotify_mark(
                            descriptor.rawValue, UInt32(FAN_MARK_ADD | FAN_MARK_MOUNT), UInt64(FAN_OPEN_EXEC_PERM), AT_FDCWD, mount.point)
                    }
                    marked.withLock { _ = $0.insert("mount:\(mount.id)") }
                    newlyMarked.append(mount.point)
                } catch let mountError {
                    failed.append((mount.point, mountError))
                }
            }
        }
        return (newlyMarked, failed)
    }

    /// Removes every mark (the descriptor stays open until the guard is released).
    public func removeMarks() {
        _ = fanotify_mark(descriptor.rawValue, UInt32(FAN_MARK_FLUSH | FAN_MARK_FILESYSTEM), 0, AT_FDCWD, nil)
        _ = fanotify_mark(descriptor.rawValue, UInt32(FAN_MARK_FLUSH | FAN_MARK_MOUNT), 0, AT_FDCWD, nil)
        _ = fanotify_mark(descriptor.rawValue, UInt32(FAN_MARK_FLUSH), 0, AT_FDCWD, nil)
        marked.withLock { $0 = [] }
    }

    struct Mount: Equatable {
        var id: String
        var device: String
        var point: String
        var type: String
    }

    /// proc(5) mountinfo: `id parent major:minor root point options [optional...] - type source super`.
    static func parseMountInfo(_ text: String) -> [Mount] {
        var mounts: [Mount] = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count >= 7, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count, dash >= 6 else { continue }
            mounts.append(
                Mount(id: String(fields[0]), device: String(fields[2]), point: unescape(fields[4]), type: String(fields[dash + 1])))
        }
        return mounts
    }

    /// mountinfo writes space, tab, newline and backslash as `\ooo`.
    static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        let source = Array(field.utf8)
        var index = 0
        while index < source.count {
            if source[index] == UInt8(ascii: "\\"), index + 4 <= source.count,
                let value = UInt8(String(decoding: source[(index + 1)..<(index + 4)], as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(source[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func readSmallFile(_ path: String) -> String? {
        SmallFile.read(path, limit: 4 << 20).map { String(decoding: $0, as: UTF8.self) }
    }

    // MARK: - The guard thread

    /// Buffers for one decision, allocated once per thread: a process's status, a `/proc` name, a path.
    struct Scratch {
        let status = UnsafeMutablePointer<UInt8>.allocate(capacity: 1024)
        let name = UnsafeMutablePointer<CChar>.allocate(capacity: 64)
        let path = UnsafeMutablePointer<CChar>.allocate(capacity: Int(PATH_MAX) + 1)

        func deallocate() {
            status.deallocate()
            name.deallocate()
            path.deallocate()
        }
    }

    /// Answers events until `stop` is readable, then removes the marks. Marks new mounts as they
    /// appear. Events are read as many at a time as are queued (up to `batchCapacity`) and every event
    /// of a batch is answered before the next batch is read: first, in the order they came, those of
    /// everyone who is not a managed user with something denied (a look at the process's uid each);
    /// then the managed users' execs, taking each user's in turn, so that one child's flood delays
    /// neither root's execs nor another child's by more than the bounded work of one batch.
    public func run(until stop: FileDescriptor?, logger: Logger) {
        defer {
            removeMarks()
            allowQueued()
        }
        let ownPID = getpid()
        // Opened here, closed when the guard stops; -1 (left out of poll, no uid) when they cannot be.
        let procOpened = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        let proc = procOpened >= 0 ? FileDescriptor(rawValue: procOpened) : nil
        defer { try? proc?.close() }
        let procDirectory = proc?.rawValue ?? -1
        let mountInfoOpened = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)
        let mountInfoFile = mountInfoOpened >= 0 ? FileDescriptor(rawValue: mountInfoOpened) : nil
        defer { try? mountInfoFile?.close() }
        let mountInfo = mountInfoFile?.rawValue ?? -1
        // Preallocated: a batch of events, what was decided of each, a decision's buffers.
        let eventSize = MemoryLayout<fanotify_event_metadata>.size
        let events = UnsafeMutableRawPointer.allocate(byteCount: eventSize * Self.batchCapacity, alignment: 8)
        let fds = UnsafeMutablePointer<FileDescriptor>.allocate(capacity: Self.batchCapacity)
        let pids = UnsafeMutablePointer<Int32>.allocate(capacity: Self.batchCapacity)
        /// Per event: the managed user's uid it belongs to, or -1 (answered in the first pass).
        let owners = UnsafeMutablePointer<Int64>.allocate(capacity: Self.batchCapacity)
        /// Per event: 1 allowed by this thread, 2 denied by it, 0 answered by the watchdog or not an exec.
        let answers = UnsafeMutablePointer<UInt8>.allocate(capacity: Self.batchCapacity)
        let scratch = Scratch()
        defer {
            events.deallocate()
            fds.deallocate()
            pids.deallocate()
            owners.deallocate()
            answers.deallocate()
            scratch.deallocate()
        }
        var pollers = [
            pollfd(fd: descriptor.rawValue, events: Int16(POLLIN), revents: 0),
            pollfd(fd: stop?.rawValue ?? -1, events: Int16(POLLIN), revents: 0),
            pollfd(fd: mountInfo, events: Int16(POLLPRI), revents: 0),
            pollfd(fd: marksChanged.descriptor?.rawValue ?? -1, events: Int16(POLLIN), revents: 0),
        ]
        var watching = !marked.withLock { $0.isEmpty }
        while true {
            pollers[0].revents = 0
            pollers[1].revents = 0
            pollers[2].revents = 0
            pollers[3].revents = 0
            let polled = valueOrErrno(retryOnInterrupt: false) { poll(&pollers, nfds_t(pollers.count), -1) }
            if case .failure(let error) = polled, error != .interrupted { break }
            if pollers[1].revents != 0 { break }
            if pollers[3].revents != 0 {
                marksChanged.drain()
                // Ignore marks were decided under the old rules (inode marks only: FAN_MARK_FLUSH alone).
                _ = fanotify_mark(descriptor.rawValue, UInt32(FAN_MARK_FLUSH), 0, AT_FDCWD, nil)
                let needed = !rules.withLock { $0.isEmpty }
                if needed && !watching {
                    let (newMounts, failures) = markMounts()
                    logger.info("exec guard: watching execs", metadata: ["mounts": "\(newMounts.count)"])
                    for (point, error) in failures {
                        logger.notice("exec guard: cannot mark a mount", metadata: ["mount": "\(point)", "error": "\(error)"])
                    }
                } else if !needed && watching {
                    removeMarks()
                    logger.info("exec guard: nothing is denied to anyone; not watching execs")
                }
                watching = needed
            }
            if watching && pollers[2].revents & Int16(POLLPRI | POLLERR) != 0 {
                let (newMounts, failures) = markMounts()
                if !newMounts.isEmpty { logger.info("exec guard: marked new mounts", metadata: ["mounts": "\(newMounts)"]) }
                for (point, error) in failures {
                    logger.notice("exec guard: cannot mark a mount", metadata: ["mount": "\(point)", "error": "\(error)"])
                }
            }
            // One batch per wake: under a flood that never lets the queue empty, a stop and new rules
            // (whose flush of the ignore marks must not wait) are still seen between batches.
            if pollers[0].revents != 0 {
                guard case .success(let length) = valueOrErrno({ read(descriptor.rawValue, events, eventSize * Self.batchCapacity) }),
                    length >= eventSize
                else { continue }
                // The events read, each with the file being executed, opened for us by the kernel: ours to
                // close once answered.
                var count = 0
                var offset = 0
                while offset + eventSize <= length && count < Self.batchCapacity {
                    let metadata = (events + offset).loadUnaligned(as: fanotify_event_metadata.self)
                    offset += max(Int(metadata.event_len), eventSize)
                    guard metadata.fd >= 0 else { continue }
                    guard metadata.vers == UInt8(FANOTIFY_METADATA_VERSION) else {
                        let fd = FileDescriptor(rawValue: metadata.fd)
                        respond(fd: fd, response: UInt32(FAN_ALLOW))
                        try? fd.close()
                        continue
                    }
                    fds[count] = FileDescriptor(rawValue: metadata.fd)
                    pids[count] = metadata.pid
                    owners[count] = -1
                    answers[count] = 0
                    count += 1
                }
                answerBatch(
                    count: count, fds: fds, pids: pids, owners: owners, answers: answers, ownPID: ownPID,
                    procDirectory: procDirectory, scratch: scratch)
            }
        }
    }

    /// At most this many events are read and decided together: the most one batch can make an exec
    /// that arrives behind it wait is this many bounded decisions.
    static let batchCapacity = 256

    /// Answers a batch of `count` events (`fds`, `pids`), then closes their descriptors: see `run`.
    func answerBatch(
        count: Int, fds: UnsafeMutablePointer<FileDescriptor>, pids: UnsafeMutablePointer<Int32>, owners: UnsafeMutablePointer<Int64>,
        answers: UnsafeMutablePointer<UInt8>, ownPID: Int32, procDirectory: Int32, scratch: Scratch
    ) {
        guard count > 0 else { return }
        inFlight.withLock { batch in
            for index in 0..<count {
                batch.tokens[index] = Int64(fds[index].rawValue) + 1
                batch.pids[index] = pids[index]
            }
            batch.count = count
            batch.since = Self.monotonicNanoseconds()
            batch.generation &+= 1
        }
        setDeadlineTimer(nanoseconds: deadlineNanoseconds)
        let rules = self.rules.withLock { $0 }
        // First everyone but the managed users with something denied: a look at the uid each.
        var managed = 0
        for index in 0..<count {
            if pids[index] != ownPID, !rules.isEmpty,
                let uid = Self.realUID(of: pids[index], procDirectory: procDirectory, status: scratch.status, name: scratch.name),
                let owner = rules.owner(of: uid)
            {
                owners[index] = Int64(owner)
                managed += 1
                continue
            }
            if answer(index, fd: fds[index], response: UInt32(FAN_ALLOW)) { answers[index] = 1 }
        }
        // Then the managed users' execs, one of each user's in turn.
        if managed > 0 {
            var order: [(turn: Int, index: Int)] = []
            order.reserveCapacity(managed)
            var turns: [Int64: Int] = [:]
            for index in 0..<count where owners[index] >= 0 {
                let turn = turns[owners[index], default: 0]
                turns[owners[index]] = turn + 1
                order.append((turn, index))
            }
            order.sort { $0.turn != $1.turn ? $0.turn < $1.turn : $0.index < $1.index }
            for (_, index) in order {
                if stallMilliseconds > 0 && inFlight.withLock({ $0.tokens[index] > 0 }) {
                    usleep(UInt32(clamping: stallMilliseconds * 1000))
                }
                let denial = decide(fd: fds[index], owner: UInt32(owners[index]), rules: rules, scratch: scratch)
                guard answer(index, fd: fds[index], response: UInt32(denial == nil ? FAN_ALLOW : FAN_DENY)) else { continue }
                answers[index] = denial == nil ? 1 : 2
                if let denial { queueDenial(DeniedExec(pid: pids[index], denial: denial)) }
            }
        }
        setDeadlineTimer(nanoseconds: 0)
        // The watchdog may be answering some: their descriptors stay open until it has.
        while true {
            let answering = inFlight.withLock { batch -> Bool in
                for index in 0..<batch.count where batch.tokens[index] == -1 { return true }
                batch.count = 0
                batch.since = 0
                return false
            }
            if !answering { break }
            sched_yield()
        }
        // After the answers: a file nobody is denied now is not shown to the guard again.
        for index in 0..<count {
            if answers[index] == 1 { ignoreIfAllowedToAll(fd: fds[index], rules: rules, scratch: scratch) }
            try? fds[index].close()
        }
    }

    /// Answers event `index` of the batch unless the watchdog took it; whether this thread answered.
    func answer(_ index: Int, fd: FileDescriptor, response: UInt32) -> Bool {
        let token = Int64(fd.rawValue) + 1
        let mine = inFlight.withLock { batch -> Bool in
            guard batch.tokens[index] == token else { return false }
            batch.tokens[index] = 0
            return true
        }
        if mine {
            respond(fd: fd, response: response)
            if response == UInt32(FAN_DENY) { denied.add(1, ordering: .relaxed) } else { allowed.add(1, ordering: .relaxed) }
        }
        return mine
    }

    func queueDenial(_ exec: DeniedExec) {
        denials.withLock { queued in
            if queued.list.count < Self.maxQueuedDenials {
                queued.list.append(exec)
            } else {
                queued.dropped += 1
            }
        }
        onDenial()
    }

    /// The denial for the exec of the file open as `fd` by a process of managed user `owner`, or nil to
    /// allow it. Bounded and never waiting for a disk or a file system's server: the file's attributes
    /// as the kernel has them (`statWithoutSync`), its identity only if `FileIdentityCache` read it
    /// before (a file not known yet is handed to `runIdentifier`, off this thread, and is known at
    /// its next exec), its path (`/proc/self/fd/N`; ` (deleted)` is ignored by matching).
    func decide(fd: FileDescriptor, owner: UInt32, rules: ExecRules, scratch: Scratch) -> ExecRules.Denial? {
        guard let file = Self.statWithoutSync(fd) else { return nil }
        let known = identities.cachedIdentity(of: file)?.all
        if known == nil { queueForIdentity(fd: fd, file: file) }
        guard let filePath = Self.path(of: fd, scratch: scratch) else { return nil }
        return rules.denial(uid: owner, path: filePath, identities: known ?? [], fileOwner: file.st_uid)
    }

    /// The path of the open file `fd`, through `/proc/self/fd/N`.
    static func path(of fd: FileDescriptor, scratch: Scratch) -> String? {
        writeDecimal(fd.rawValue, prefix: "/proc/self/fd/", into: scratch.name)
        let length = readlink(scratch.name, scratch.path, Int(PATH_MAX))
        guard length > 0 else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: scratch.path, count: length).bindMemory(to: UInt8.self), as: UTF8.self)
    }

    /// fstat(2) of `fd` with the attributes the kernel has (`fstatat(fd, "", AT_EMPTY_PATH |
    /// AT_STATX_DONT_SYNC)`): a network or FUSE file system is not asked (a child's FUSE server that
    /// never answers cannot hold the guard).
    static func statWithoutSync(_ fd: FileDescriptor) -> stat? {
        var file = stat()
        guard fstatat(fd.rawValue, "", &file, emptyPath | statxDontSync) == 0 else { return nil }
        return file
    }

    /// `AT_EMPTY_PATH` and `AT_STATX_DONT_SYNC` (<linux/fcntl.h>; the Glibc module declares neither).
    static let emptyPath: Int32 = 0x1000
    static let statxDontSync: Int32 = 0x4000

    /// Makes the kernel stop asking about the file open as `fd` (an ignore mark on its inode, dropped
    /// when the file is written, and by `run` whenever the rules change) when no managed user is
    /// denied it now, exactly as `decide` would name it for each of them. Only a file whose identity
    /// is known is ignored (one not known yet is handed to `runIdentifier` and ignored at its next
    /// exec): nothing is read here. Interpreters and the dynamic loader, opened by most execs, are
    /// never denied and so are shown once.
    func ignoreIfAllowedToAll(fd: FileDescriptor, rules: ExecRules, scratch: Scratch) {
        guard !rules.isEmpty, let file = Self.statWithoutSync(fd) else { return }
        guard let known = identities.cachedIdentity(of: file)?.all else {
            queueForIdentity(fd: fd, file: file)
            return
        }
        guard let filePath = Self.path(of: fd, scratch: scratch) else { return }
        for uid in rules.users.keys where rules.denial(uid: uid, path: filePath, identities: known, fileOwner: file.st_uid) != nil {
            return
        }
        _ = fanotify_mark(descriptor.rawValue, UInt32(FAN_MARK_ADD | FAN_MARK_IGNORED_MASK), UInt64(FAN_OPEN_EXEC_PERM), fd.rawValue, nil)
    }

    // MARK: - Identities, off the guard's thread

    /// Files waiting for `runIdentifier`: a duplicate of the descriptor the kernel gave, and the file's
    /// key, so that one file exec'd by many is queued once. Bounded: past it, a file waits for its
    /// next exec (or for the tracker, which reads what a managed user runs).
    let identityQueue = Mutex<(fds: [FileDescriptor], keys: Set<FileIdentityCache.Key>)>(([], []))
    let identityQueued = EventSignal()
    static let maxQueuedIdentities = 64

    func queueForIdentity(fd: FileDescriptor, file: stat) {
        guard file.st_mode & S_IFMT == S_IFREG else { return }
        let key = FileIdentityCache.Key(file)
        let queued = identityQueue.withLock { queue -> Bool in
            guard queue.fds.count < Self.maxQueuedIdentities, !queue.keys.contains(key) else { return false }
            let copy = fcntl(fd.rawValue, F_DUPFD_CLOEXEC, 0)
            guard copy >= 0 else { return false }
            queue.fds.append(FileDescriptor(rawValue: copy))
            queue.keys.insert(key)
            return true
        }
        if queued { identityQueued.signal() }
    }

    /// Reads the identity (content hash and build-id, `FileIdentityCache`) of each file the guard met
    /// without knowing it, until `stop` is readable: the reading that could take long (a large file,
    /// a slow disk, a child's FUSE server) is done here, where it holds no exec.
    public func runIdentifier(until stop: FileDescriptor?) {
        while true {
            let ready = Readiness.wait([stop, identityQueued.descriptor], timeoutMilliseconds: -1)
            if ready.first == true { break }
            identityQueued.drain()
            while true {
                let next = identityQueue.withLock { queue -> FileDescriptor? in queue.fds.isEmpty ? nil : queue.fds.removeFirst() }
                guard let fd = next else { break }
                var file = stat()
                let key = fstat(fd.rawValue, &file) == 0 ? FileIdentityCache.Key(file) : nil
                _ = identities.identities(ofOpen: fd)
                try? fd.close()
                identityQueue.withLock { queue in
                    if let key { queue.keys.remove(key) }
                    if queue.fds.isEmpty { queue.keys.removeAll(keepingCapacity: true) }
                }
            }
        }
        identityQueue.withLock { queue in
            for fd in queue.fds { try? fd.close() }
            queue = ([], [])
        }
    }

    /// Allows every event already queued (after the marks are gone, nothing new arrives).
    func allowQueued() {
        var event = fanotify_event_metadata()
        let eventSize = MemoryLayout<fanotify_event_metadata>.size
        while Glibc.read(descriptor.rawValue, &event, eventSize) == eventSize {
            guard event.fd >= 0 else { continue }
            let fd = FileDescriptor(rawValue: event.fd)
            respond(fd: fd, response: UInt32(FAN_ALLOW))
            try? fd.close()
        }
    }

    func respond(fd: FileDescriptor, response: UInt32) {
        var answer = fanotify_response(fd: fd.rawValue, response: response)
        _ = valueOrErrno { write(descriptor.rawValue, &answer, MemoryLayout<fanotify_response>.size) }
    }

    // MARK: - The watchdog

    /// Arms (`nanoseconds` > 0) or disarms (0) the watchdog's one-shot timer. Nothing to allocate; a
    /// failure (which timerfd_settime(2) has none of for a valid descriptor and value) leaves the
    /// watchdog asleep, and the guard thread still answers every event itself.
    func setDeadlineTimer(nanoseconds: Int64) {
        var value = itimerspec()
        value.it_value = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        _ = timerfd_settime(deadlineTimer.rawValue, 0, &value, nil)
    }

    /// The watchdog's answer to an event the guard thread is late with: the guard's own decision (the
    /// same rules, from what is known without reading the file), never a plain allow. A managed
    /// user's blocked exec is denied however late the guard is; everyone else's (`owner` nil: not a
    /// managed user with something denied, or a process whose uid could not be read) is allowed.
    /// Returns the denial, if any, after answering.
    func answerAsTheGuardWould(fd: FileDescriptor, owner: UInt32?, rules: ExecRules, scratch: Scratch) -> ExecRules.Denial? {
        let denial = owner.flatMap { decide(fd: fd, owner: $0, rules: rules, scratch: scratch) }
        respond(fd: fd, response: UInt32(denial == nil ? FAN_ALLOW : FAN_DENY))
        late.add(1, ordering: .relaxed)
        if denial == nil { allowed.add(1, ordering: .relaxed) } else { denied.add(1, ordering: .relaxed) }
        return denial
    }

    /// Answers, once the guard thread has held a batch past the deadline, the events of the batch it
    /// has not answered yet, then every event that queues until the guard thread is back: each as the
    /// guard would (`answerAsTheGuardWould`), so a late guard never lets a managed user's blocked exec
    /// through. It sleeps until the deadline timer fires, which happens only when a batch is late: an
    /// agent whose guard answers on time never wakes it.
    public func runWatchdog(until stop: FileDescriptor?, logger: Logger) {
        let quarter = max(1, deadlineNanoseconds / 4_000_000)
        var lastLogged: Int64 = .min / 2
        /// Execs answered late since the last log line.
        var lateBefore: Int64 = 0
        var expirations: UInt64 = 0
        let procOpened = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { if procOpened >= 0 { _ = close(procOpened) } }
        let scratch = Scratch()
        defer { scratch.deallocate() }
        var taken = [(fd: FileDescriptor, pid: Int32)]()
        taken.reserveCapacity(Self.batchCapacity)
        let eventSize = MemoryLayout<fanotify_event_metadata>.size
        let events = UnsafeMutableRawPointer.allocate(byteCount: eventSize * Self.batchCapacity, alignment: 8)
        defer { events.deallocate() }
        while true {
            let ready = Readiness.wait([stop, deadlineTimer], timeoutMilliseconds: -1)
            if ready.first == true { return }
            // The timer's count of expirations; it is readable again only when it fires again.
            _ = Glibc.read(deadlineTimer.rawValue, &expirations, MemoryLayout<UInt64>.size)
            taken.removeAll(keepingCapacity: true)
            let lateBatch = inFlight.withLock { batch -> UInt64 in
                guard batch.since != 0, Self.monotonicNanoseconds() - batch.since >= deadlineNanoseconds else { return 0 }
                for index in 0..<batch.count where batch.tokens[index] > 0 {
                    taken.append((FileDescriptor(rawValue: Int32(batch.tokens[index] - 1)), batch.pids[index]))
                    batch.tokens[index] = -1
                }
                return batch.generation
            }
            guard !taken.isEmpty else { continue }
            let rules = self.rules.withLock { $0 }
            let ownPID = getpid()
            for event in taken {
                var owner: UInt32? = nil
                if event.pid != ownPID, !rules.isEmpty,
                    let uid = Self.realUID(of: event.pid, procDirectory: procOpened, status: scratch.status, name: scratch.name)
                {
                    owner = rules.owner(of: uid)
                }
                // Borrowed: the guard thread closes it once this answer is given (-2).
                if let denial = answerAsTheGuardWould(fd: event.fd, owner: owner, rules: rules, scratch: scratch) {
                    queueDenial(DeniedExec(pid: event.pid, denial: denial))
                }
            }
            inFlight.withLock { batch in
                for index in 0..<batch.count where batch.tokens[index] == -1 { batch.tokens[index] = -2 }
            }
            lateBefore += Int64(taken.count)
            // Said when it happens (at most once a minute, with how many were answered late meanwhile).
            let now = Self.monotonicNanoseconds()
            if now - lastLogged >= 60_000_000_000 {
                lastLogged = now
                logger.warning(
                    "exec guard: a decision took longer than the deadline; execs are answered by the watchdog, as the guard would, until it is back",
                    metadata: ["late.before": "\(lateBefore)", "deadline.ms": "\(deadlineNanoseconds / 1_000_000)"])
                lateBefore = 0
            }
            // While the guard thread is held up in that batch, everything that queues is answered here,
            // read in batches as the guard reads them: everyone but the managed users first.
            while inFlight.withLock({ $0.since != 0 && $0.generation == lateBatch }) {
                let length = Glibc.read(descriptor.rawValue, events, eventSize * Self.batchCapacity)
                if length >= eventSize {
                    lateBefore += Int64(answerLateBatch(events: events, length: length, procDirectory: procOpened, scratch: scratch))
                    continue
                }
                if Readiness.wait([stop, descriptor], timeoutMilliseconds: quarter).first == true { break }
            }
        }
    }

    /// Answers, on the watchdog's thread, the events read into `events` (`length` bytes) as the guard
    /// would: first everyone who is not a managed user with something denied, then the managed users'
    /// execs (`answerAsTheGuardWould`). Returns how many were answered.
    func answerLateBatch(events: UnsafeMutableRawPointer, length: Int, procDirectory: Int32, scratch: Scratch) -> Int {
        let eventSize = MemoryLayout<fanotify_event_metadata>.size
        let rules = self.rules.withLock { $0 }
        let ownPID = getpid()
        var answered = 0
        // Two passes over the same events: those of the first pass are marked answered (fd -1).
        for pass in 0..<2 {
            var offset = 0
            while offset + eventSize <= length {
                var metadata = (events + offset).loadUnaligned(as: fanotify_event_metadata.self)
                let at = offset
                offset += max(Int(metadata.event_len), eventSize)
                guard metadata.fd >= 0 else { continue }
                var owner: UInt32? = nil
                if metadata.pid != ownPID, !rules.isEmpty,
                    let uid = Self.realUID(of: metadata.pid, procDirectory: procDirectory, status: scratch.status, name: scratch.name)
                {
                    owner = rules.owner(of: uid)
                }
                if pass == 0 && owner != nil { continue }
                let fd = FileDescriptor(rawValue: metadata.fd)
                if let denial = answerAsTheGuardWould(fd: fd, owner: owner, rules: rules, scratch: scratch) {
                    queueDenial(DeniedExec(pid: metadata.pid, denial: denial))
                }
                try? fd.close()
                answered += 1
                metadata.fd = -1
                (events + at).storeBytes(of: metadata, as: fanotify_event_metadata.self)
            }
        }
        return answered
    }

    // MARK: - Helpers without allocation

    /// The real uid of `pid`: the first number of the `Uid:` line of `/proc/PID/status`, read into
    /// `buffer` (1024 bytes) through `name` (64 bytes).
    static func realUID(
        of pid: Int32, procDirectory: Int32, status buffer: UnsafeMutablePointer<UInt8>, name: UnsafeMutablePointer<CChar>
    ) -> UInt32? {
        guard procDirectory >= 0, pid > 0 else { return nil }
        writeDecimal(pid, prefix: "", suffix: "/status", into: name)
        let opened = openat(procDirectory, name, O_RDONLY | O_CLOEXEC)
        guard opened >= 0 else { return nil }
        let file = FileDescriptor(rawValue: opened)
        defer { try? file.close() }
        let count = read(file.rawValue, buffer, 1023)
        guard count > 0 else { return nil }
        // "\nUid:\t<real>\t<effective>..."
        var index = 0
        while index + 5 < count {
            // "\nUid:"
            let matches =
                buffer[index] == 10 && buffer[index + 1] == 85 && buffer[index + 2] == 105 && buffer[index + 3] == 100
                && buffer[index + 4] == 58
            if matches {
                var position = index + 5
                while position < count && (buffer[position] == 9 || buffer[position] == 32) { position += 1 }
                var value: UInt64 = 0
                var digits = 0
                while position < count, buffer[position] >= 48, buffer[position] <= 57, digits < 10 {
                    value = value * 10 + UInt64(buffer[position] - 48)
                    position += 1
                    digits += 1
                }
                return digits > 0 && value <= UInt64(UInt32.max) ? UInt32(value) : nil
            }
            index += 1
        }
        return nil
    }

    /// Writes `prefix`, the decimal `value` and `suffix`, NUL-terminated, into `buffer` (64 bytes).
    static func writeDecimal(_ value: Int32, prefix: StaticString, suffix: StaticString = "", into buffer: UnsafeMutablePointer<CChar>) {
        var position = 0
        for byte in UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount) {
            buffer[position] = CChar(bitPattern: byte)
            position += 1
        }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var remaining = UInt32(bitPattern: value)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { digits in
            repeat {
                digits[count] = UInt8(48 + remaining % 10)
                remaining /= 10
                count += 1
            } while remaining > 0 && count < 12
            for index in stride(from: count - 1, through: 0, by: -1) {
                buffer[position] = CChar(bitPattern: digits[index])
                position += 1
            }
        }
        for byte in UnsafeBufferPointer(start: suffix.utf8Start, count: suffix.utf8CodeUnitCount) {
            buffer[position] = CChar(bitPattern: byte)
            position += 1
        }
        buffer[position] = 0
    }

    static func monotonicNanoseconds() -> Int64 { SystemClock.monotonicNanoseconds() }
}
