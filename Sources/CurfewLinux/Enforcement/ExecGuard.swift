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
/// answers `FAN_ALLOW` or `FAN_DENY`, so the answer must always come, and soon:
/// - an exec by anyone who is not a managed user with something denied now is allowed at once, from
///   the event alone when nobody has anything denied, else after reading the process's real uid;
/// - for a managed user, the file is named from what is already known of it (its path, and its
///   identity only if `FileIdentityCache` read it before: nothing is read or hashed before the
///   answer) and denied when `ExecRules` says so; a file not known yet is allowed and the tracker
///   stops the process after it starts, as it does for everything the guard cannot see (an exec from
///   a memfd lives on the kernel's internal shmem mount, which cannot be marked);
/// - `runWatchdog` answers `FAN_ALLOW` for an event the guard thread has held past the deadline, and
///   for everything that queues meanwhile: the guard thread arms a one-shot timer (timerfd(2)) when it
///   takes an event and disarms it with its answer, so the watchdog sleeps until a decision is late;
/// - closing the descriptor (when the agent stops, or if it dies) removes the marks, and the kernel
///   allows whatever was still waiting.
///
/// A denied exec fails with EPERM ("Operation not permitted"); the denial is queued for the tracker
/// (`takeDenials`), which tells the child and records it as it does a stop.
///
/// Between reading an event and answering it, the guard thread allocates nothing for the execs of
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
    /// The event the guard thread holds: its descriptor + 1; 0 none; -1 the watchdog is answering it;
    /// -2 the watchdog answered it and the guard thread has not come back yet.
    let current = Atomic<Int64>(0)
    /// CLOCK_MONOTONIC nanoseconds when the guard thread read the event it holds.
    let currentSince = Atomic<Int64>(0)
    /// Answers given (allowed, denied) and execs the watchdog allowed because the guard was late.
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

    /// Answers events until `stop` is readable, then removes the marks. Marks new mounts as they
    /// appear. Every event read is answered before the next is read.
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
        // Preallocated: one event, a process's status, a file's path, `PID/status`.
        let eventSize = MemoryLayout<fanotify_event_metadata>.size
        let event = UnsafeMutableRawPointer.allocate(byteCount: eventSize, alignment: 8)
        let status = UnsafeMutablePointer<UInt8>.allocate(capacity: 1024)
        let name = UnsafeMutablePointer<CChar>.allocate(capacity: 64)
        let path = UnsafeMutablePointer<CChar>.allocate(capacity: Int(PATH_MAX) + 1)
        defer {
            event.deallocate()
            status.deallocate()
            name.deallocate()
            path.deallocate()
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
            // One event per read: each is answered before the next is taken.
            while true {
                guard case .success(eventSize) = valueOrErrno({ read(descriptor.rawValue, event, eventSize) }) else { break }
                let metadata = event.load(as: fanotify_event_metadata.self)
                guard metadata.vers == UInt8(FANOTIFY_METADATA_VERSION), metadata.fd >= 0 else { continue }
                // The file being executed, opened for us by the kernel: ours to close once answered.
                let fd = FileDescriptor(rawValue: metadata.fd)
                currentSince.store(Self.monotonicNanoseconds(), ordering: .relaxed)
                current.store(Int64(fd.rawValue) + 1, ordering: .releasing)
                setDeadlineTimer(nanoseconds: deadlineNanoseconds)
                var answer = UInt32(FAN_ALLOW)
                var denial: ExecRules.Denial? = nil
                if metadata.pid != ownPID {
                    denial = decide(
                        fd: fd, pid: metadata.pid, procDirectory: procDirectory, status: status, name: name, path: path)
                    if denial != nil { answer = UInt32(FAN_DENY) }
                }
                let answeredByUs = finish(fd: fd, response: answer)
                setDeadlineTimer(nanoseconds: 0)
                // After the answer: a file nobody is denied now is not shown to the guard again.
                if answeredByUs && denial == nil { ignoreIfAllowedToAll(fd: fd, name: name, path: path) }
                try? fd.close()
                if answeredByUs, let denial {
                    denied.add(1, ordering: .relaxed)
                    denials.withLock { queued in
                        if queued.list.count < Self.maxQueuedDenials {
                            queued.list.append(DeniedExec(pid: metadata.pid, denial: denial))
                        } else {
                            queued.dropped += 1
                        }
                    }
                    onDenial()
                } else if answeredByUs {
                    allowed.add(1, ordering: .relaxed)
                }
            }
        }
    }

    /// The denial for one event, or nil to allow it.
    func decide(
        fd: FileDescriptor, pid: Int32, procDirectory: Int32, status: UnsafeMutablePointer<UInt8>, name: UnsafeMutablePointer<CChar>,
        path: UnsafeMutablePointer<CChar>
    ) -> ExecRules.Denial? {
        let rules = self.rules.withLock { $0 }
        guard !rules.isEmpty, let uid = Self.realUID(of: pid, procDirectory: procDirectory, status: status, name: name),
            rules.owner(of: uid) != nil
        else { return nil }
        if stallMilliseconds > 0 { usleep(UInt32(clamping: stallMilliseconds * 1000)) }
        var file = stat()
        guard fstat(fd.rawValue, &file) == 0 else { return nil }
        let known = identities.cachedIdentity(of: file)?.all ?? []
        // The file's path as the process opened it (`/proc/self/fd/N`); ` (deleted)` is ignored by matching.
        Self.writeDecimal(fd.rawValue, prefix: "/proc/self/fd/", into: name)
        let length = readlink(name, path, Int(PATH_MAX))
        guard length > 0 else { return nil }
        let filePath = String(
            decoding: UnsafeRawBufferPointer(start: path, count: length).bindMemory(to: UInt8.self), as: UTF8.self)
        return rules.denial(uid: uid, path: filePath, identities: known, fileOwner: file.st_uid)
    }

    /// Makes the kernel stop asking about the file open as `fd` (an ignore mark on its inode, dropped
    /// when the file is written, and by `run` whenever the rules change) when no managed user is
    /// denied it now: with what names it (`ignoreIdentities`), its path and the rules, exactly as
    /// `decide` would name it for each of them. Interpreters and the dynamic loader, opened by most
    /// execs, are never denied and so are shown once.
    func ignoreIfAllowedToAll(fd: FileDescriptor, name: UnsafeMutablePointer<CChar>, path: UnsafeMutablePointer<CChar>) {
        let rules = self.rules.withLock { $0 }
        guard !rules.isEmpty else { return }
        var file = stat()
        guard fstat(fd.rawValue, &file) == 0, let known = ignoreIdentities(fd: fd, file: file) else { return }
        Self.writeDecimal(fd.rawValue, prefix: "/proc/self/fd/", into: name)
        let length = readlink(name, path, Int(PATH_MAX))
        guard length > 0 else { return }
        let filePath = String(
            decoding: UnsafeRawBufferPointer(start: path, count: length).bindMemory(to: UInt8.self), as: UTF8.self)
        for uid in rules.users.keys where rules.denial(uid: uid, path: filePath, identities: known, fileOwner: file.st_uid) != nil {
            return
        }
        _ = fanotify_mark(descriptor.rawValue, UInt32(FAN_MARK_ADD | FAN_MARK_IGNORED_MASK), UInt64(FAN_OPEN_EXEC_PERM), fd.rawValue, nil)
    }

    /// Files without a build-id up to this size (scripts) are hashed on the guard thread to be ignored.
    static let hashedToIgnoreBytes: Int64 = 1 << 20

    /// What names the file for the ignore decision, without holding up the next exec on the machine:
    /// its identities when the cache knows them; else its ELF build-id alone (a few reads of its
    /// headers: a claim is made of a file's hash and build-id together, so a file whose build-id no app
    /// claims has a hash none claims either); else, for a small file (a script), its hash; else nil, and
    /// the file is not ignored (each exec of it costs the guard one cheap answer). Hashing a large
    /// program here held every exec that queued meanwhile, on the whole machine, for as long as reading
    /// it took.
    func ignoreIdentities(fd: FileDescriptor, file: stat) -> [String]? {
        if let cached = identities.cachedIdentity(of: file) { return cached.all }
        if let buildID = ElfBuildID.read(fd: fd.rawValue) { return [buildID] }
        guard Int64(file.st_size) <= Self.hashedToIgnoreBytes, let hash = FileIdentityCache.hash(fd: fd, size: Int64(file.st_size))
        else { return nil }
        return [hash]
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

    /// Answers the event on `fd` unless the watchdog took it; whether the guard thread answered.
    func finish(fd: FileDescriptor, response: UInt32) -> Bool {
        let token = Int64(fd.rawValue) + 1
        if current.compareExchange(expected: token, desired: 0, ordering: .acquiringAndReleasing).exchanged {
            respond(fd: fd, response: response)
            return true
        }
        // The watchdog took this event: the descriptor stays open until it has answered.
        while current.load(ordering: .acquiring) != -2 { sched_yield() }
        current.store(0, ordering: .releasing)
        return false
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

    /// Answers `FAN_ALLOW` for the event the guard thread holds once it has held it past the deadline,
    /// then for every event that queues until the guard thread comes back. It sleeps until the deadline
    /// timer fires, which happens only when a decision is late: an agent whose guard answers on time
    /// never wakes it.
    public func runWatchdog(until stop: FileDescriptor?, logger: Logger) {
        let quarter = max(1, deadlineNanoseconds / 4_000_000)
        var lastLogged: Int64 = .min / 2
        /// Execs allowed late since the last log line.
        var lateBefore: Int64 = 0
        var expirations: UInt64 = 0
        while true {
            let ready = Readiness.wait([stop, deadlineTimer], timeoutMilliseconds: -1)
            if ready.first == true { return }
            // The timer's count of expirations; it is readable again only when it fires again.
            _ = Glibc.read(deadlineTimer.rawValue, &expirations, MemoryLayout<UInt64>.size)
            let token = current.load(ordering: .acquiring)
            guard token > 0, Self.monotonicNanoseconds() - currentSince.load(ordering: .relaxed) >= deadlineNanoseconds,
                current.compareExchange(expected: token, desired: -1, ordering: .acquiringAndReleasing).exchanged
            else { continue }
            // Borrowed: the guard thread closes it once this answer is given (-2).
            respond(fd: FileDescriptor(rawValue: Int32(token - 1)), response: UInt32(FAN_ALLOW))
            current.store(-2, ordering: .releasing)
            late.add(1, ordering: .relaxed)
            // Said when it happens (at most once a minute, with how many were allowed late meanwhile).
            let now = Self.monotonicNanoseconds()
            if now - lastLogged >= 60_000_000_000 {
                lastLogged = now
                logger.warning(
                    "exec guard: a decision took longer than the deadline; execs are allowed until it is back (apps still stop after they start)",
                    metadata: ["late.before": "\(lateBefore)", "deadline.ms": "\(deadlineNanoseconds / 1_000_000)"])
                lateBefore = 0
            }
            lateBefore += 1
            // While the guard thread is held up, everything that queues is allowed here.
            var event = fanotify_event_metadata()
            let eventSize = MemoryLayout<fanotify_event_metadata>.size
            while current.load(ordering: .acquiring) == -2 {
                let read = Glibc.read(descriptor.rawValue, &event, eventSize)
                if read == eventSize {
                    if event.fd >= 0 {
                        let fd = FileDescriptor(rawValue: event.fd)
                        respond(fd: fd, response: UInt32(FAN_ALLOW))
                        try? fd.close()
                        late.add(1, ordering: .relaxed)
                        lateBefore += 1
                    }
                    continue
                }
                if Readiness.wait([stop, descriptor], timeoutMilliseconds: quarter).first == true { break }
            }
        }
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
