import SystemPackage
import CurfewPOSIX
import CLinux

#if canImport(Glibc)
    import Glibc
#endif

/// Who is at the other end of a connection, as the kernel vouches for it (SO_PEERCRED at connect time).
public struct PeerCredentials: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// The agent's local socket: a Unix stream socket whose connections carry the caller's credentials
/// (SO_PEERCRED), so the agent decides what each caller may see by who they really are.
/// One request line in, one response line out, then the connection is closed.
///
/// Any local account can connect, so every caller is treated as hostile: one event loop (`serve`)
/// holds many connections at once and never waits on any one of them; each request has a deadline;
/// each account has a cap on open connections (an account's subordinate uids count as the account:
/// `accountOf`), and the trusted accounts (root: PAM's `check-login`, the parent's commands) are
/// served even when children fill every slot. A caller turned away for lack of a slot whose request
/// line is already complete when it is accepted is answered there and then, holding no slot: what a
/// flood takes is the slots of connections that do not ask, never the capacity to answer one that does.
public final class PeerSocketServer: Sendable {
    /// What callers can make the server hold.
    public struct Limits: Sendable, Equatable {
        /// From accept to a complete request line, and again from the answer to its last byte sent:
        /// a caller who is slower, in either direction, is disconnected.
        public var requestDeadline: Duration
        /// Open connections of one account outside `trustedUIDs` (its subordinate uids included); more
        /// are refused at accept, unless their request line is already complete (then answered at once).
        public var connectionsPerUID: Int
        /// Open connections in all. When they are full a trusted caller takes the slot of the oldest
        /// untrusted connection; an untrusted one is refused.
        public var connections: Int
        /// The longest request line, newline excluded; a longer one closes the connection.
        public var maxLineBytes: Int
        /// Accounts never capped per uid and never refused for others' connections (root).
        public var trustedUIDs: Set<UInt32>
        /// Open watches of one account (each is also one of its `connectionsPerUID`, so a watching
        /// account keeps room for ordinary requests); every uid is capped, root too.
        public var watchesPerUID: Int
        /// What a watch may have queued and not yet read; a watcher that falls further behind is dropped.
        public var watchOutputBytes: Int

        public init(
            requestDeadline: Duration = .seconds(1), connectionsPerUID: Int = 8, connections: Int = 256,
            maxLineBytes: Int = 65_536, trustedUIDs: Set<UInt32> = [0], watchesPerUID: Int = 4,
            watchOutputBytes: Int = 65_536
        ) {
            self.requestDeadline = requestDeadline
            self.connectionsPerUID = connectionsPerUID
            self.connections = connections
            self.maxLineBytes = maxLineBytes
            self.trustedUIDs = trustedUIDs
            self.watchesPerUID = watchesPerUID
            self.watchOutputBytes = watchOutputBytes
        }
    }

    /// What the server turned away or cut off, counted since the last report.
    public struct Tally: Sendable, Equatable {
        public var accepted = 0
        public var answered = 0
        /// Refused at accept: over the per-uid cap, or every slot taken.
        public var refused = 0
        /// Closed to make room for a trusted caller.
        public var evicted = 0
        /// Closed at the deadline: no complete line in time, or the answer not read in time.
        public var expired = 0
        /// Closed for a request line over `maxLineBytes`.
        public var oversized = 0
        /// Watches refused (over `watchesPerUID`, or a second one of the same group).
        public var watchesRefused = 0
        /// Watchers dropped for not reading (`watchOutputBytes` queued).
        public var watchersDropped = 0
        /// Answered at accept without a slot: over the caps, with the request line already complete.
        public var answeredAtAccept = 0
        /// Per account (a subordinate uid counted as its owner): connections refused, evicted, expired or oversized.
        public var troubleByUID: [UInt32: Int] = [:]

        public init() {}

        /// Whether a caller was turned away or cut off.
        public var hasTrouble: Bool { refused + evicted + expired + oversized + watchesRefused + watchersDropped > 0 }
    }

    /// The listening socket, open for as long as the server.
    let fd: FileDescriptor
    public let path: String

    /// socket + bind + listen; a stale socket file at `path` is replaced; the file gets `mode`
    /// (access is checked per request from the peer's credentials, not by file permissions).
    /// The listening socket is non-blocking: `serve` accepts only what poll said is there.
    public init(path: String, mode: mode_t = 0o666, backlog: Int32 = 512) throws(LinuxError) {
        guard var address = unixAddress(path) else {
            throw LinuxError(operation: "socket path \(path) is too long", errno: .fileNameTooLong)
        }
        let fd = FileDescriptor(
            rawValue: try LinuxError.check("socket") {
                socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            })
        do {
            unlink(path)
            try LinuxError.check("bind \(path)") {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd.rawValue, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                }
            }
            try LinuxError.check("chmod \(path)") { chmod(path, mode) }
            try LinuxError.check("listen \(path)") { listen(fd.rawValue, backlog) }
        } catch {
            try? fd.close()
            throw error
        }
        self.fd = fd
        self.path = path
    }

    /// Serves callers on this thread until `shouldStop` returns true: asked whenever `stopDescriptor`
    /// becomes readable (an eventfd the stopper signals) and after each turn; without one (nil), at
    /// least every 250 ms. With one, an idle server sleeps until a caller or the stop comes.
    /// `answer` turns a request line and its caller into the answer line (without the newline); it
    /// runs on this thread, so it must not block. `busyAnswer` is sent (best effort, never waited
    /// for) to a caller refused for lack of a slot. `report` gets the tally at most once every
    /// `reportInterval`, and only when a caller was turned away or cut off.
    public func serve(
        limits: Limits = Limits(), busyAnswer: String? = nil, reportInterval: Duration = .seconds(60),
        report: (Tally) -> Void = { _ in }, until shouldStop: () -> Bool, stopDescriptor: FileDescriptor? = nil,
        accountOf: @escaping (UInt32) -> UInt32 = { $0 },
        answer: (_ line: String, _ caller: PeerCredentials) -> String
    ) {
        serve(
            limits: limits, busyAnswer: busyAnswer, reportInterval: reportInterval, report: report, until: shouldStop,
            stopDescriptor: stopDescriptor, accountOf: accountOf, watchRefusal: "", watchWake: nil
        ) { PeerSocketAnswer(line: answer($0, $1)) }
    }

    /// `serve`, where an answer may start a watch: the connection stays open and gets the watch's
    /// view again whenever it changed, looked at when `watchWake` (an eventfd, drained here) becomes
    /// readable or at the moment the last view named. `watchWake` is polled only while a watch is
    /// open, so without watchers its signals cost this thread nothing. `watchRefusal` is sent
    /// instead of the first view when the caller has `watchesPerUID` watches, or one of the same group.
    /// `accountOf` names the account a caller's uid counts as for the caps (its owner, for a
    /// subordinate uid of a user namespace); it runs on this thread at each accept.
    public func serve(
        limits: Limits = Limits(), busyAnswer: String? = nil, reportInterval: Duration = .seconds(60),
        report: (Tally) -> Void = { _ in }, until shouldStop: () -> Bool, stopDescriptor: FileDescriptor? = nil,
        accountOf: @escaping (UInt32) -> UInt32 = { $0 },
        watchRefusal: String, watchWake: FileDescriptor?,
        respond: (_ line: String, _ caller: PeerCredentials) -> PeerSocketAnswer
    ) {
        let answer = respond
        var loop = PeerSocketLoop(listener: fd, limits: limits, busyAnswer: busyAnswer.map { Array(($0 + "\n").utf8) })
        loop.stopDescriptor = stopDescriptor
        loop.watchWake = watchWake
        loop.watchRefusal = watchRefusal
        loop.accountOf = accountOf
        let interval = milliseconds(reportInterval)
        var lastReport = monotonicMilliseconds()
        while !shouldStop() {
            // With a stop descriptor the wait has no bound of its own, except the next report of
            // callers turned away (so it is not held back until the next caller).
            var wait: Int64 = 250
            if stopDescriptor != nil {
                wait = loop.tally.hasTrouble ? max(0, lastReport + interval - monotonicMilliseconds()) : -1
            }
            loop.turn(maxWaitMilliseconds: wait, answer: answer)
            let now = monotonicMilliseconds()
            if now - lastReport >= interval {
                lastReport = now
                if loop.tally.hasTrouble { report(loop.tally) }
                loop.tally = Tally()
            }
        }
        loop.closeAll()
    }

    /// Stops listening and removes the socket file.
    public func shutdown() {
        Glibc.shutdown(fd.rawValue, Int32(SHUT_RDWR))
        unlink(path)
    }

    deinit { try? fd.close() }
}

/// What the server does with a request line: sends `line`; with a `watch`, keeps the connection
/// open and follows it.
public struct PeerSocketAnswer {
    public var line: String
    public var watch: PeerSocketWatch?

    public init(line: String, watch: PeerSocketWatch? = nil) {
        self.line = line
        self.watch = watch
    }
}

/// A view the server keeps sending while it changes.
public struct PeerSocketWatch {
    /// What one view is: `key` says whether it changed (a line whose figures tick every second may
    /// keep its key for a minute); `line` is sent; `lookAgainInMilliseconds`: when to look again even
    /// without a wake (nil: only on a wake).
    public struct View: Equatable, Sendable {
        public var key: String
        public var line: String
        public var lookAgainInMilliseconds: Int64?

        public init(key: String, line: String, lookAgainInMilliseconds: Int64? = nil) {
            self.key = key
            self.line = line
            self.lookAgainInMilliseconds = lookAgainInMilliseconds
        }
    }

    /// At most one watch of a group is open (the caller's login session, say).
    public var group: String
    /// The first view, sent in place of the answer's `line` (which is sent only when the watch is refused).
    public var first: View
    /// The view now; nil ends the watch (the connection is closed).
    public var current: () -> View?

    public init(group: String, first: View, current: @escaping () -> View?) {
        self.group = group
        self.first = first
        self.current = current
    }
}

/// Who gets a slot when a caller connects: the rule alone, so it is tested without sockets.
struct ConnectionAdmission: Equatable {
    enum Verdict: Equatable {
        case admit
        /// Admit, closing the open connection at this index (the oldest untrusted one) first.
        case admitEvicting(Int)
        case refuse
    }

    /// `open`: the uids of the open connections, oldest first. `accountOf`: the account a uid counts
    /// as (a subordinate uid's owner), so a child's user namespace shares the child's cap; only the
    /// trusted uids themselves are trusted, never a uid that counts as one.
    static func verdict(
        for uid: UInt32, open: [UInt32], limits: PeerSocketServer.Limits, accountOf: (UInt32) -> UInt32 = { $0 }
    ) -> Verdict {
        verdict(for: uid, account: accountOf(uid), open: open, openAccounts: open.map(accountOf), limits: limits)
    }

    /// The same with the accounts already known: `openAccounts[i]` is the account of `open[i]`.
    static func verdict(for uid: UInt32, account: UInt32, open: [UInt32], openAccounts: [UInt32], limits: PeerSocketServer.Limits) -> Verdict {
        let trusted = limits.trustedUIDs.contains(uid)
        if !trusted && openAccounts.reduce(0, { $0 + ($1 == account ? 1 : 0) }) >= limits.connectionsPerUID { return .refuse }
        guard open.count >= limits.connections else { return .admit }
        guard trusted, let oldest = open.firstIndex(where: { !limits.trustedUIDs.contains($0) }) else { return .refuse }
        return .admitEvicting(oldest)
    }
}

/// The state of `PeerSocketServer.serve`: the open connections, oldest first, each reading its
/// request line or writing its answer, none of them ever waited on.
struct PeerSocketLoop {
    struct Connection {
        /// Accepted by `acceptPending`, closed by `remove`.
        let fd: FileDescriptor
        let caller: PeerCredentials
        /// The account the caller counts as (`accountOf`): its uid, or the owner of its subordinate uid.
        let account: UInt32
        /// Monotonic milliseconds by which the current phase must be done.
        var deadline: Int64
        var input: [UInt8] = []
        /// The answer with its newline, once there is one, and how much of it is sent.
        var output: [UInt8]? = nil
        var sent = 0
        /// Set once the connection is a watch: it stays open, without a deadline while nothing is queued.
        var watch: PeerSocketWatch? = nil
        var watchKey = ""
        /// Monotonic milliseconds at which the watch's view is looked at again without a wake.
        var lookAgainAt: Int64? = nil
    }

    let listener: FileDescriptor
    let limits: PeerSocketServer.Limits
    let busyAnswer: [UInt8]?
    let deadlineMilliseconds: Int64
    var connections: [Connection] = []
    var tally = PeerSocketServer.Tally()
    /// After EMFILE and the like: when accept is tried again (monotonic ms).
    var acceptPausedUntil: Int64 = 0
    /// Polled too, so a stop ends a wait at once (borrowed: the stopper's).
    var stopDescriptor: FileDescriptor? = nil
    /// Polled while a watch is open: readable when the views may have changed (borrowed: the signaller's).
    var watchWake: FileDescriptor? = nil
    var watchRefusal = ""
    /// The account a uid counts as for the caps (the server's `accountOf`).
    var accountOf: (UInt32) -> UInt32 = { $0 }
    var scratch = [UInt8](repeating: 0, count: 65_536)

    init(listener: FileDescriptor, limits: PeerSocketServer.Limits, busyAnswer: [UInt8]?) {
        self.listener = listener
        self.limits = limits
        self.busyAnswer = busyAnswer
        deadlineMilliseconds = max(1, milliseconds(limits.requestDeadline))
    }

    /// One poll over the listener, every connection and the stop descriptor (at most
    /// `maxWaitMilliseconds`, negative: no limit; less when a deadline comes first), then whatever is
    /// ready: bytes read, lines answered, answers sent, callers accepted, latecomers closed.
    mutating func turn(maxWaitMilliseconds: Int64, answer: (String, PeerCredentials) -> PeerSocketAnswer) {
        let now = monotonicMilliseconds()
        expire(now: now)
        let listening = now >= acceptPausedUntil
        var wait = maxWaitMilliseconds < 0 ? Int64.max : maxWaitMilliseconds
        if !listening { wait = min(wait, acceptPausedUntil - now) }
        for connection in connections {
            wait = min(wait, connection.deadline - now)
            if let again = connection.lookAgainAt { wait = min(wait, again - now) }
        }
        let watching = connections.contains { $0.watch != nil }
        var pollers = [pollfd(fd: listening ? listener.rawValue : -1, events: Int16(POLLIN), revents: 0)]
        pollers += connections.map {
            // A watch is read too (to see the caller hang up) while its queue is sent.
            let events = $0.watch != nil ? Int16(POLLIN) | ($0.output == nil ? 0 : Int16(POLLOUT)) : Int16($0.output == nil ? POLLIN : POLLOUT)
            return pollfd(fd: $0.fd.rawValue, events: events, revents: 0)
        }
        pollers.append(pollfd(fd: stopDescriptor?.rawValue ?? -1, events: Int16(POLLIN), revents: 0))
        pollers.append(pollfd(fd: watching ? watchWake?.rawValue ?? -1 : -1, events: Int16(POLLIN), revents: 0))
        let ready = poll(&pollers, nfds_t(pollers.count), wait == Int64.max ? -1 : Int32(clamping: max(0, wait)))
        let woken = ready > 0 && pollers[pollers.count - 1].revents != 0
        if ready > 0 {
            var closing: [Int] = []
            for index in connections.indices where pollers[index + 1].revents != 0 {
                if !handle(index, answer: answer) { closing.append(index) }
            }
            remove(closing)
        }
        if woken { drainWake() }
        let after = monotonicMilliseconds()
        if woken || connections.contains(where: { ($0.lookAgainAt ?? Int64.max) <= after }) {
            refreshWatches(all: woken, now: after)
        }
        guard ready > 0 else { return }
        // Read after the answers above: a newcomer's deadline starts when it is accepted.
        if pollers[0].revents != 0 { acceptPending(now: monotonicMilliseconds(), answer: answer) }
    }

    /// Reads or writes what connection `index` has ready; false when it is done with.
    mutating func handle(_ index: Int, answer: (String, PeerCredentials) -> PeerSocketAnswer) -> Bool {
        if connections[index].watch != nil { return follow(index) }
        if connections[index].output != nil { return send(index) }
        let fd = connections[index].fd.rawValue
        let room = limits.maxLineBytes + 1 - connections[index].input.count
        let received = valueOrErrno(retryOnInterrupt: false) {
            scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, min($0.count, room), Int32(MSG_DONTWAIT)) }
        }
        guard case .success(let count) = received else { return received.isTemporaryFailure }
        let line: [UInt8]
        if count == 0 {
            // The caller stopped sending: a request without its newline is still a request.
            guard !connections[index].input.isEmpty else { return false }
            line = connections[index].input
        } else if let newline = scratch[0..<count].firstIndex(of: 0x0A) {
            line = connections[index].input + scratch[0..<newline]
        } else {
            connections[index].input += scratch[0..<count]
            guard connections[index].input.count <= limits.maxLineBytes else {
                trouble(connections[index].account) { $0.oversized += 1 }
                return false
            }
            return true
        }
        guard line.count <= limits.maxLineBytes else {
            trouble(connections[index].account) { $0.oversized += 1 }
            return false
        }
        let reply = answer(String(decoding: line, as: UTF8.self), connections[index].caller)
        tally.answered += 1
        connections[index].input = []
        // The answer gets a deadline of its own, counted from now: the work above is ours, not the caller's.
        connections[index].deadline = monotonicMilliseconds() + deadlineMilliseconds
        var text = reply.line
        if let watch = reply.watch {
            let account = connections[index].account
            let same = connections.filter { $0.watch != nil && $0.account == account }
            if same.count >= limits.watchesPerUID || same.contains(where: { $0.watch?.group == watch.group }) {
                trouble(account) { $0.watchesRefused += 1 }
                text = watchRefusal
            } else {
                connections[index].watch = watch
                connections[index].watchKey = watch.first.key
                connections[index].lookAgainAt = watch.first.lookAgainInMilliseconds.map { monotonicMilliseconds() + max(0, $0) }
                connections[index].output = Array((watch.first.line + "\n").utf8)
                return follow(index, reading: false)
            }
        }
        connections[index].output = Array((text + "\n").utf8)
        return send(index)
    }

    /// A watch's turn: reads (and ignores) what the caller sends, to see them hang up; sends what is
    /// queued. False when the caller is gone.
    mutating func follow(_ index: Int, reading: Bool = true) -> Bool {
        if reading {
            let fd = connections[index].fd.rawValue
            let received = valueOrErrno(retryOnInterrupt: false) {
                scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            }
            switch received {
            case .success(0): return false
            case .failure(let error) where !error.isTemporary: return false
            default: break
            }
        }
        guard connections[index].output != nil else { return true }
        let more = send(index)
        guard let output = connections[index].output else { return true }
        if connections[index].sent >= output.count {
            connections[index].output = nil
            connections[index].sent = 0
            connections[index].deadline = Int64.max
            return true
        }
        if !more { return false }
        // Still queued: the deadline bounds how long a caller may leave it unread.
        if connections[index].deadline == Int64.max { connections[index].deadline = monotonicMilliseconds() + deadlineMilliseconds * 30 }
        return true
    }

    /// Looks at the watches' views (all of them after a wake, else those whose moment came) and
    /// queues the ones that changed; drops a watcher whose queue would pass `watchOutputBytes`.
    mutating func refreshWatches(all: Bool, now: Int64) {
        var closing: [Int] = []
        for index in connections.indices {
            guard let watch = connections[index].watch else { continue }
            guard all || (connections[index].lookAgainAt ?? Int64.max) <= now else { continue }
            guard let view = watch.current() else {
                closing.append(index)
                continue
            }
            connections[index].lookAgainAt = view.lookAgainInMilliseconds.map { now + max(0, $0) }
            guard view.key != connections[index].watchKey else { continue }
            connections[index].watchKey = view.key
            let line = Array((view.line + "\n").utf8)
            var queued = connections[index].output.map { Array($0[connections[index].sent...]) } ?? []
            guard queued.count + line.count <= limits.watchOutputBytes else {
                trouble(connections[index].account) { $0.watchersDropped += 1 }
                closing.append(index)
                continue
            }
            queued += line
            connections[index].output = queued
            connections[index].sent = 0
            if !follow(index, reading: false) { closing.append(index) }
        }
        remove(closing)
    }

    func drainWake() {
        guard let watchWake else { return }
        var count: UInt64 = 0
        _ = valueOrErrno { Glibc.read(watchWake.rawValue, &count, 8) }
    }

    /// Sends what the socket takes of the answer without waiting; false when it is all sent or the
    /// caller is gone.
    mutating func send(_ index: Int) -> Bool {
        guard let output = connections[index].output else { return true }
        let fd = connections[index].fd.rawValue
        while connections[index].sent < output.count {
            let offset = connections[index].sent
            let sent = valueOrErrno {
                output.withUnsafeBytes {
                    Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                }
            }
            guard case .success(let count) = sent, count > 0 else { return sent.isTemporaryFailure }
            connections[index].sent += count
        }
        return false
    }

    /// accept4 until the backlog is empty (or 1,024 callers this turn, so open connections are not
    /// starved by a flood of new ones); each caller is admitted, admitted in place of an untrusted
    /// one, answered at once without a slot (its request line already complete), or refused at once.
    mutating func acceptPending(now: Int64, answer: (String, PeerCredentials) -> PeerSocketAnswer) {
        for _ in 0..<1_024 {
            let accepted = valueOrErrno(retryOnInterrupt: false) {
                accept4(listener.rawValue, nil, nil, Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue))
            }
            let client: FileDescriptor
            switch accepted {
            case .success(let descriptor): client = FileDescriptor(rawValue: descriptor)
            case .failure(.interrupted), .failure(.connectionAbort), .failure(.protocolError): continue
            case .failure(.tooManyOpenFiles), .failure(.tooManyOpenFilesInSystem), .failure(.noBufferSpace), .failure(.noMemory):
                // Out of descriptors or memory: callers wait in the backlog a moment rather than spin the loop.
                acceptPausedUntil = now + 100
                return
            case .failure: return
            }
            // struct ucred (needs _GNU_SOURCE, which Swift's Glibc does not set): pid_t pid; uid_t uid; gid_t gid.
            var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
            var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
            guard getsockopt(client.rawValue, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, length == 12 else {
                try? client.close()
                continue
            }
            let caller = PeerCredentials(pid: credentials.0, uid: credentials.1, gid: credentials.2)
            let account = accountOf(caller.uid)
            tally.accepted += 1
            switch ConnectionAdmission.verdict(
                for: caller.uid, account: account, open: connections.map(\.caller.uid), openAccounts: connections.map(\.account),
                limits: limits)
            {
            case .admit:
                break
            case .admitEvicting(let index):
                trouble(connections[index].account) { $0.evicted += 1 }
                remove([index])
            case .refuse:
                if answerAtOnce(client, caller: caller, answer: answer) {
                    try? client.close()
                    continue
                }
                trouble(account) { $0.refused += 1 }
                if let busyAnswer {
                    _ = busyAnswer.withUnsafeBytes {
                        Glibc.send(client.rawValue, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                    }
                }
                try? client.close()
                continue
            }
            connections.append(Connection(fd: client, caller: caller, account: account, deadline: now + deadlineMilliseconds))
        }
    }

    /// A caller with no slot whose request line is complete in the socket already (a client such as
    /// `curfew check-login` sends it as soon as it connects): read, answered and sent without waiting
    /// (what the socket does not take at once is dropped; answers are small), so the connections an
    /// account holds open without asking never take the capacity to answer one that asks. A watch
    /// needs a slot: it gets `watchRefusal`. False when no complete line is there (the caller is refused).
    mutating func answerAtOnce(_ client: FileDescriptor, caller: PeerCredentials, answer: (String, PeerCredentials) -> PeerSocketAnswer) -> Bool {
        let room = min(scratch.count, limits.maxLineBytes + 1)
        let peeked = valueOrErrno(retryOnInterrupt: false) {
            scratch.withUnsafeMutableBytes { recv(client.rawValue, $0.baseAddress, room, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) }
        }
        guard case .success(let count) = peeked, count > 0, let newline = scratch[0..<count].firstIndex(of: 0x0A) else { return false }
        let line = String(decoding: scratch[0..<newline], as: UTF8.self)
        let reply = answer(line, caller)
        tally.answered += 1
        tally.answeredAtAccept += 1
        let output = Array(((reply.watch == nil ? reply.line : watchRefusal) + "\n").utf8)
        _ = output.withUnsafeBytes {
            Glibc.send(client.rawValue, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
        }
        return true
    }

    /// Closes every connection whose deadline has passed.
    mutating func expire(now: Int64) {
        let late = connections.indices.filter { connections[$0].deadline <= now }
        for index in late { trouble(connections[index].account) { $0.expired += 1 } }
        remove(late)
    }

    /// Closes and forgets the connections at `indices` (ascending).
    mutating func remove(_ indices: [Int]) {
        guard !indices.isEmpty else { return }
        for index in indices { try? connections[index].fd.close() }
        let gone = Set(indices)
        connections = connections.indices.filter { !gone.contains($0) }.map { connections[$0] }
    }

    mutating func closeAll() { remove(Array(connections.indices)) }

    mutating func trouble(_ uid: UInt32, _ count: (inout PeerSocketServer.Tally) -> Void) {
        count(&tally)
        tally.troubleByUID[uid, default: 0] += 1
    }
}

/// The client side: connects to `path`, sends one line, returns the answer line, all within one
/// total deadline, whatever the other end does (a full backlog, a stalled or hostile server).
public enum PeerSocketClient {
    /// `timeout` covers connect, sending the request and receiving the whole answer.
    public static func request(path: String, line: String, timeout: Duration = .seconds(3)) throws(LinuxError) -> String {
        let deadline = monotonicMilliseconds() + max(1, milliseconds(timeout))
        let fd = try connect(path, until: deadline)
        defer { try? fd.close() }
        try send(line, to: fd, until: deadline, path)
        let maxBytes = 4 << 20
        var collected: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let received = valueOrErrno(retryOnInterrupt: false) { chunk.withUnsafeMutableBytes { recv(fd.rawValue, $0.baseAddress, $0.count, 0) } }
            guard case .success(let count) = received else {
                if case .failure(let error) = received, !error.isTemporary { throw LinuxError(operation: "recv from \(path)", errno: error) }
                try waitFor(fd, Int16(POLLIN), until: deadline, path)
                continue
            }
            if count > 0 {
                if let newline = chunk[0..<count].firstIndex(of: 0x0A) {
                    collected += chunk[0..<newline]
                    return String(decoding: collected, as: UTF8.self)
                }
                collected += chunk[0..<count]
                guard collected.count <= maxBytes else { throw LinuxError(operation: "answer from \(path) is too long", errno: .messageTooLong) }
                continue
            }
            // Closed without a newline: what came is the answer, if anything did.
            guard !collected.isEmpty else { throw LinuxError(operation: "no answer from \(path)", errno: .connectionReset) }
            return String(decoding: collected, as: UTF8.self)
        }
    }

    /// socket(2) and connect(2) to the Unix stream socket at `path` by the monotonic `deadline`, every
    /// result checked; the descriptor comes back non-blocking (the caller closes it), or is closed here
    /// when the connection cannot be made.
    static func connect(_ path: String, until deadline: Int64) throws(LinuxError) -> FileDescriptor {
        let fd = FileDescriptor(
            rawValue: try LinuxError.check("socket") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) })
        do throws(LinuxError) {
            guard var address = unixAddress(path) else { throw LinuxError(operation: "connect \(path)", errno: .fileNameTooLong) }
            // On a Unix socket a non-blocking connect does not wait for room in a full backlog (EAGAIN at
            // once) and a blocking one waits for as long as the send timeout: that timeout bounds it.
            while true {
                let left = deadline - monotonicMilliseconds()
                guard left > 0 else { throw LinuxError(operation: "connect \(path)", errno: .timedOut) }
                var wait = timeval(tv_sec: Int(left / 1000), tv_usec: Int(left % 1000) * 1000)
                try LinuxError.check("setsockopt SO_SNDTIMEO") {
                    setsockopt(fd.rawValue, SOL_SOCKET, SO_SNDTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
                }
                // Not retried here: after EINTR the loop takes the time left again.
                let connected = valueOrErrno(retryOnInterrupt: false) {
                    withUnsafePointer(to: &address) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            Glibc.connect(fd.rawValue, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                        }
                    }
                }
                if case .failure(let error) = connected {
                    // EAGAIN: the backlog stayed full until the timeout (or a spurious wake-up: try again while time is left).
                    if error == .interrupted || error == .resourceTemporarilyUnavailable { continue }
                    if error != .socketIsConnected { throw LinuxError(operation: "connect \(path)", errno: error) }
                }
                break
            }
            let flags = try LinuxError.check("fcntl F_GETFL") { fcntl(fd.rawValue, F_GETFL) }
            try LinuxError.check("fcntl O_NONBLOCK") { fcntl(fd.rawValue, F_SETFL, flags | O_NONBLOCK) }
        } catch {
            try? fd.close()
            throw error
        }
        return fd
    }

    /// Sends `line` and its newline on the non-blocking `fd`, waiting for room until the monotonic `deadline`.
    static func send(_ line: String, to fd: FileDescriptor, until deadline: Int64, _ path: String) throws(LinuxError) {
        let request = Array((line + "\n").utf8)
        var sent = 0
        while sent < request.count {
            let result = valueOrErrno(retryOnInterrupt: false) {
                request.withUnsafeBytes { Glibc.send(fd.rawValue, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            }
            switch result {
            case .success(let count) where count > 0:
                sent += count
                continue
            case .success:
                throw LinuxError(operation: "send to \(path)", errno: .brokenPipe)
            case .failure(let error) where !error.isTemporary:
                throw LinuxError(operation: "send to \(path)", errno: error)
            case .failure:
                try waitFor(fd, Int16(POLLOUT), until: deadline, path)
            }
        }
    }

    /// Polls `fd` for `events` until the monotonic `deadline`; throws ETIMEDOUT when it passes first.
    private static func waitFor(_ fd: FileDescriptor, _ events: Int16, until deadline: Int64, _ path: String) throws(LinuxError) {
        while true {
            let left = deadline - monotonicMilliseconds()
            guard left > 0 else { throw LinuxError(operation: "no answer from \(path)", errno: .timedOut) }
            var poller = pollfd(fd: fd.rawValue, events: events, revents: 0)
            // Not retried here: after EINTR the loop takes the time left again.
            let ready = valueOrErrno(retryOnInterrupt: false) { poll(&poller, 1, Int32(clamping: left)) }
            switch ready {
            case .success(let count) where count > 0: return
            case .failure(let error) where error != .interrupted: throw LinuxError(operation: "poll", errno: error)
            default: continue
            }
        }
    }
}

/// A `sockaddr_un` for `path`; nil when the path does not fit.
private func unixAddress(_ path: String) -> sockaddr_un? {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    guard path.utf8.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: path.utf8)
        raw[path.utf8.count] = 0
    }
    return address
}

private func monotonicMilliseconds() -> Int64 { ClockReading.read(CLOCK_MONOTONIC) }

/// Whole milliseconds of a duration (rounded down).
private func milliseconds(_ duration: Duration) -> Int64 {
    duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
}

/// The client side of a watch: one request line sent, then answer lines as the server sends them,
/// read without blocking whenever `descriptor` is readable (the caller polls it with its own).
public final class PeerSocketStream {
    /// The connection, open for as long as the stream.
    public let descriptor: FileDescriptor
    private var buffered: [UInt8] = []
    /// The longest line kept; a longer one closes the stream (a broken or hostile server).
    public let maxLineBytes: Int

    /// Connects and sends `line` within `timeout`.
    public init(path: String, line: String, timeout: Duration = .seconds(3), maxLineBytes: Int = 1 << 20) throws(LinuxError) {
        self.maxLineBytes = maxLineBytes
        let deadline = monotonicMilliseconds() + max(1, milliseconds(timeout))
        let fd = try PeerSocketClient.connect(path, until: deadline)
        do throws(LinuxError) {
            try PeerSocketClient.send(line, to: fd, until: deadline, path)
        } catch {
            try? fd.close()
            throw error
        }
        descriptor = fd
    }

    deinit { try? descriptor.close() }

    /// The complete lines that arrived (without their newlines), and whether the server closed the
    /// stream (or broke it): then the caller drops it.
    public func readLines() -> (lines: [String], closed: Bool) {
        var lines: [String] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let received = valueOrErrno {
                chunk.withUnsafeMutableBytes { recv(descriptor.rawValue, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            }
            let count: Int
            switch received {
            case .success(let received): count = received
            case .failure(let error): return (lines, error != .resourceTemporarilyUnavailable)
            }
            if count > 0 {
                buffered += chunk[0..<count]
                while let newline = buffered.firstIndex(of: 0x0A) {
                    lines.append(String(decoding: buffered[..<newline], as: UTF8.self))
                    buffered.removeSubrange(...newline)
                }
                if buffered.count > maxLineBytes { return (lines, true) }
                continue
            }
            return (lines, true)
        }
    }
}
