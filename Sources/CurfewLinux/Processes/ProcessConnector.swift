import SystemPackage
import CurfewPOSIX
import CLinux
import Glibc
import CLinux
import Synchronization

/// What the kernel's process connector reports, reduced to what tracking needs. PIDs are
/// thread-group ids (what `/proc` lists); events of other threads are left out.
public enum ProcessEvent: Sendable, Equatable {
    /// A new process (not a thread). `parent` is the forking process's thread-group id.
    case fork(parent: Int32, child: Int32)
    /// The process ran execve: its executable and command line changed.
    case exec(pid: Int32)
    /// The thread-group leader exited. Usually the whole process; a leader that called pthread_exit
    /// while other threads run leaves a live process behind (a later listing finds it).
    case exit(pid: Int32)
    /// The process changed its uid.
    case uidChange(pid: Int32)
    /// The kernel dropped events (the socket's buffer was full): rescan `/proc`.
    case overrun
}

/// Byte layouts of the netlink messages, written out because Swift cannot import these kernel
/// headers' structs and macros. All fields are in host byte order.
enum ConnectorLayout {
    // linux/netlink.h
    /// `NETLINK_CONNECTOR`
    static let netlinkConnector: Int32 = 11
    /// `struct sockaddr_nl { __kernel_sa_family_t nl_family; unsigned short nl_pad; __u32 nl_pid; __u32 nl_groups; }`
    static let sockaddrSize = 12
    static let sockaddrFamilyOffset = 0
    static let sockaddrPortOffset = 4
    static let sockaddrGroupsOffset = 8
    /// `struct nlmsghdr { __u32 nlmsg_len; __u16 nlmsg_type; __u16 nlmsg_flags; __u32 nlmsg_seq; __u32 nlmsg_pid; }`
    static let headerSize = 16
    static let headerLengthOffset = 0
    static let headerTypeOffset = 4
    static let headerFlagsOffset = 6
    static let headerSequenceOffset = 8
    static let headerPortOffset = 12
    /// `NLMSG_ALIGNTO`
    static let alignment = 4
    /// `NLMSG_NOOP`, `NLMSG_ERROR`, `NLMSG_DONE`, `NLMSG_OVERRUN`
    static let typeNoop: UInt16 = 1
    static let typeError: UInt16 = 2
    static let typeDone: UInt16 = 3
    static let typeOverrun: UInt16 = 4

    // linux/connector.h
    /// `CN_IDX_PROC`, `CN_VAL_PROC`; the index is also the multicast group to join.
    static let procIndex: UInt32 = 1
    static let procValue: UInt32 = 1
    /// `struct cn_msg { struct cb_id { __u32 idx; __u32 val; } id; __u32 seq; __u32 ack; __u16 len; __u16 flags; __u8 data[0]; }`
    static let messageSize = 20
    static let messageIndexOffset = 0
    static let messageValueOffset = 4
    static let messageSequenceOffset = 8
    static let messageAckOffset = 12
    static let messageLengthOffset = 16
    static let messageFlagsOffset = 18

    // linux/cn_proc.h
    /// `enum proc_cn_mcast_op`, sent as the 4-byte payload of a `cn_msg`.
    static let listen: UInt32 = 1
    static let ignore: UInt32 = 2
    /// `struct proc_event { __u32 what; __u32 cpu; __u64 timestamp_ns; union { ... } event_data; }`:
    /// `event_data` starts at 16 (timestamp_ns is 8-byte aligned).
    static let eventHeaderSize = 16
    static let eventWhatOffset = 0
    static let eventDataOffset = 16
    /// `enum what`
    static let eventNone: UInt32 = 0x0000_0000
    static let eventFork: UInt32 = 0x0000_0001
    static let eventExec: UInt32 = 0x0000_0002
    static let eventUID: UInt32 = 0x0000_0004
    static let eventExit: UInt32 = 0x8000_0000
    /// `struct { __u32 err; } ack` (what == PROC_EVENT_NONE, the reply to a listen/ignore request).
    static let ackErrorOffset = 16
    /// `struct fork_proc_event { __kernel_pid_t parent_pid, parent_tgid, child_pid, child_tgid; }`
    static let forkParentTgidOffset = 20
    static let forkChildPidOffset = 24
    static let forkChildTgidOffset = 28
    /// `struct exec_proc_event`, `struct id_proc_event` and `struct exit_proc_event` all begin with
    /// `__kernel_pid_t process_pid, process_tgid;`.
    static let processPidOffset = 16
    static let processTgidOffset = 20
    static let processEventSize = 24
    static let forkEventSize = 32

    static func aligned(_ length: Int) -> Int { (length + alignment - 1) & ~(alignment - 1) }

    /// An `nlmsghdr` + `cn_msg` carrying a `proc_cn_mcast_op` to the kernel.
    static func controlMessage(operation: UInt32, sequence: UInt32, ack: UInt32, port: UInt32) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: headerSize + messageSize + 4)
        bytes.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt32(raw.count), toByteOffset: headerLengthOffset, as: UInt32.self)
            raw.storeBytes(of: typeDone, toByteOffset: headerTypeOffset, as: UInt16.self)
            raw.storeBytes(of: 0, toByteOffset: headerFlagsOffset, as: UInt16.self)
            raw.storeBytes(of: sequence, toByteOffset: headerSequenceOffset, as: UInt32.self)
            raw.storeBytes(of: port, toByteOffset: headerPortOffset, as: UInt32.self)
            let message = headerSize
            raw.storeBytes(of: procIndex, toByteOffset: message + messageIndexOffset, as: UInt32.self)
            raw.storeBytes(of: procValue, toByteOffset: message + messageValueOffset, as: UInt32.self)
            raw.storeBytes(of: sequence, toByteOffset: message + messageSequenceOffset, as: UInt32.self)
            raw.storeBytes(of: ack, toByteOffset: message + messageAckOffset, as: UInt32.self)
            raw.storeBytes(of: 4, toByteOffset: message + messageLengthOffset, as: UInt16.self)
            raw.storeBytes(of: 0, toByteOffset: message + messageFlagsOffset, as: UInt16.self)
            raw.storeBytes(of: operation, toByteOffset: message + messageSize, as: UInt32.self)
        }
        return bytes
    }

    // asm-generic/socket.h
    static let attachFilter: Int32 = 26
    static let detachFilter: Int32 = 27

    /// A classic BPF program (linux/filter.h `struct sock_filter`) run on each datagram before it is
    /// queued: keeps control messages (any netlink type but NLMSG_DONE) and `PROC_EVENT_UID`, drops
    /// every other event. Loads read network byte order, so the constants are compared big-endian.
    static let uidChangesOnly: [(code: UInt16, jumpIfTrue: UInt8, jumpIfFalse: UInt8, k: UInt32)] = [
        // A = nlmsg_type (BPF_LD | BPF_H | BPF_ABS)
        (0x28, 0, 0, UInt32(headerTypeOffset)),
        // not NLMSG_DONE: keep (BPF_JMP | BPF_JEQ | BPF_K)
        (0x15, 0, 3, UInt32(typeDone.bigEndian)),
        // A = proc_event.what (BPF_LD | BPF_W | BPF_ABS)
        (0x20, 0, 0, UInt32(headerSize + messageSize + eventWhatOffset)),
        (0x15, 1, 0, eventUID.bigEndian),
        // drop, keep (BPF_RET | BPF_K)
        (0x06, 0, 0, 0),
        (0x06, 0, 0, 0xFFFF_FFFF),
    ]

    /// A reply to a listen/ignore request found in a datagram.
    struct Acknowledgement: Equatable {
        var sequence: UInt32
        var ack: UInt32
        var error: UInt32
    }

    /// Parses one datagram: any number of netlink messages, each checked against the bytes actually
    /// there before a field is read. Malformed parts are skipped.
    static func parse(
        _ datagram: UnsafeRawBufferPointer, into events: inout [ProcessEvent],
        acknowledgements: ((Acknowledgement) -> Void)? = nil
    ) {
        var offset = 0
        while datagram.count - offset >= headerSize {
            let length = Int(datagram.loadUnaligned(fromByteOffset: offset + headerLengthOffset, as: UInt32.self))
            let type = datagram.loadUnaligned(fromByteOffset: offset + headerTypeOffset, as: UInt16.self)
            guard length >= headerSize, length <= datagram.count - offset else { return }
            let payload = UnsafeRawBufferPointer(rebasing: datagram[(offset + headerSize)..<(offset + length)])
            switch type {
            case typeOverrun:
                if events.last != .overrun { events.append(.overrun) }
            case typeNoop, typeError:
                break
            default:
                parseConnectorMessage(payload, into: &events, acknowledgements: acknowledgements)
            }
            offset += aligned(length)
        }
    }

    private static func parseConnectorMessage(
        _ payload: UnsafeRawBufferPointer, into events: inout [ProcessEvent],
        acknowledgements: ((Acknowledgement) -> Void)?
    ) {
        guard payload.count >= messageSize,
            payload.loadUnaligned(fromByteOffset: messageIndexOffset, as: UInt32.self) == procIndex,
            payload.loadUnaligned(fromByteOffset: messageValueOffset, as: UInt32.self) == procValue
        else { return }
        let dataLength = Int(payload.loadUnaligned(fromByteOffset: messageLengthOffset, as: UInt16.self))
        guard dataLength <= payload.count - messageSize, dataLength >= eventHeaderSize else { return }
        let event = UnsafeRawBufferPointer(rebasing: payload[messageSize..<(messageSize + dataLength)])
        func int32(_ offset: Int) -> Int32 { event.loadUnaligned(fromByteOffset: offset, as: Int32.self) }

        switch event.loadUnaligned(fromByteOffset: eventWhatOffset, as: UInt32.self) {
        case eventNone:
            guard event.count >= ackErrorOffset + 4, let acknowledgements else { return }
            acknowledgements(
                Acknowledgement(
                    sequence: payload.loadUnaligned(fromByteOffset: messageSequenceOffset, as: UInt32.self),
                    ack: payload.loadUnaligned(fromByteOffset: messageAckOffset, as: UInt32.self),
                    error: event.loadUnaligned(fromByteOffset: ackErrorOffset, as: UInt32.self)))
        case eventFork:
            guard event.count >= forkEventSize else { return }
            let child = int32(forkChildPidOffset)
            let childGroup = int32(forkChildTgidOffset)
            // A new thread has child_pid != child_tgid.
            guard child > 0, child == childGroup else { return }
            events.append(.fork(parent: int32(forkParentTgidOffset), child: child))
        case eventExec:
            guard event.count >= processEventSize, int32(processTgidOffset) > 0 else { return }
            events.append(.exec(pid: int32(processTgidOffset)))
        case eventUID:
            guard event.count >= processEventSize, int32(processTgidOffset) > 0 else { return }
            let event = ProcessEvent.uidChange(pid: int32(processTgidOffset))
            // setuid in a multithreaded process reports every thread.
            if events.last != event { events.append(event) }
        case eventExit:
            guard event.count >= processEventSize else { return }
            let pid = int32(processPidOffset)
            guard pid > 0, pid == int32(processTgidOffset) else { return }  // another thread ended
            events.append(.exit(pid: pid))
        default:
            break
        }
    }
}

/// The kernel's process connector: fork, exec, uid and exit events of every process on the machine
/// (a `NETLINK_CONNECTOR` socket joined to `CN_IDX_PROC` after a `PROC_CN_MCAST_LISTEN` request).
/// Works only in the initial user and PID namespaces; kernels before 6.6 also want CAP_NET_ADMIN.
///
/// Sendable: `next` may block on one thread while `close` is called from another; `close` wakes it
/// and the descriptors are closed only once no call uses them.
public final class ProcessConnector: Sendable {
    /// Owns the descriptors: `release` closes them.
    private struct State {
        var socket: FileDescriptor
        /// A socket pair: writing to `wake[1]` makes a blocked `poll` on `wake[0]` return.
        var wake: (FileDescriptor, FileDescriptor)
        var users = 0
        var closing = false
        var closed = false
    }

    private let state: Mutex<State>

    private init(socket: FileDescriptor, wake: (FileDescriptor, FileDescriptor)) {
        state = Mutex(State(socket: socket, wake: wake))
    }

    /// The error `next` throws once `close` was called.
    public static let closedError = LinuxError(operation: "process connector closed", errno: .badFileDescriptor)

    /// Opens the socket and subscribes, waiting (at most a second) for the kernel to confirm.
    /// Events from before the confirmation are dropped: scan `/proc` after this returns.
    /// Throws if the connector is missing, the caller lacks CAP_NET_ADMIN on an older kernel
    /// (`EPERM`), or no confirmation comes (`ETIMEDOUT`: the kernel ignores requests from other PID
    /// or user namespaces, e.g. in a container).
    public static func open() throws(LinuxError) -> ProcessConnector {
        let socket = try LinuxError.check("socket NETLINK_CONNECTOR") {
            Glibc.socket(
                AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue),
                ConnectorLayout.netlinkConnector)
        }
        var wake: [Int32] = [-1, -1]
        do throws(LinuxError) {
            // A burst of forks (a build, a browser starting) can fill the default buffer; as root the
            // limit can be raised. Failure only means more overruns.
            var size: Int32 = 4 << 20
            if setsockopt(socket, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size)) != 0 {
                _ = setsockopt(socket, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            }
            // Port 0: the kernel picks a unique port id, so several connectors can coexist.
            var address = netlinkAddress(port: 0, groups: ConnectorLayout.procIndex)
            try LinuxError.check("bind NETLINK_CONNECTOR") {
                address.withUnsafeMutableBytes { raw in
                    bind(socket, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
                }
            }
            var length = socklen_t(address.count)
            try LinuxError.check("getsockname NETLINK_CONNECTOR") {
                address.withUnsafeMutableBytes { raw in
                    getsockname(socket, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
                }
            }
            let port = address.withUnsafeBytes {
                $0.loadUnaligned(fromByteOffset: ConnectorLayout.sockaddrPortOffset, as: UInt32.self)
            }
            try LinuxError.check("socketpair") {
                socketpair(
                    AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue),
                    0, &wake)
            }
            try subscribe(socket: socket, port: port)
        } catch {
            Glibc.close(socket)
            for fd in wake where fd >= 0 { Glibc.close(fd) }
            throw error
        }
        return ProcessConnector(
            socket: FileDescriptor(rawValue: socket), wake: (FileDescriptor(rawValue: wake[0]), FileDescriptor(rawValue: wake[1])))
    }

    /// Sends PROC_CN_MCAST_LISTEN and waits for the kernel's acknowledgement. The kernel multicasts
    /// it to all listeners and overwrites its sequence number with an event counter; only `ack`
    /// (ours plus one, drivers/connector/cn_proc.c `cn_proc_ack`) tells ours from another's, so
    /// ours is random.
    private static func subscribe(socket: Int32, port: UInt32) throws(LinuxError) {
        let token = UInt32.random(in: 1...UInt32.max - 1)
        try send(ConnectorLayout.listen, socket: socket, ack: token, port: port)
        let deadline = monotonicMilliseconds() + 1000
        var events: [ProcessEvent] = []
        var result: UInt32?
        while result == nil {
            let remaining = deadline - monotonicMilliseconds()
            guard remaining > 0 else {
                throw LinuxError(operation: "PROC_CN_MCAST_LISTEN: no acknowledgement", errno: .timedOut)
            }
            var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard try LinuxError.check("poll NETLINK_CONNECTOR", { poll(&poller, 1, Int32(remaining)) }) > 0 else {
                continue
            }
            try receive(socket: socket, into: &events) { acknowledgement in
                if acknowledgement.ack == token &+ 1 { result = acknowledgement.error }
            }
            events.removeAll()
        }
        if let result, result != 0 {
            throw LinuxError(operation: "PROC_CN_MCAST_LISTEN", errno: Errno(rawValue: Int32(bitPattern: result)))
        }
    }

    private static func send(_ operation: UInt32, socket: Int32, ack: UInt32, port: UInt32) throws(LinuxError) {
        let message = ConnectorLayout.controlMessage(operation: operation, sequence: 0, ack: ack, port: port)
        var kernel = netlinkAddress(port: 0, groups: 0)
        let sent = try LinuxError.check("send PROC_CN_MCAST \(operation)") {
            kernel.withUnsafeMutableBytes { address in
                message.withUnsafeBytes { bytes in
                    sendto(
                        socket, bytes.baseAddress, bytes.count, 0,
                        address.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(address.count))
                }
            }
        }
        guard sent == message.count else {
            throw LinuxError(operation: "send PROC_CN_MCAST \(operation): short write", errno: .ioError)
        }
    }

    /// Reads every queued datagram (at most 256, so a storm cannot keep one call going forever).
    /// Datagrams not sent by the kernel (port id 0) are ignored.
    private static func receive(
        socket: Int32, into events: inout [ProcessEvent],
        acknowledgements: ((ConnectorLayout.Acknowledgement) -> Void)? = nil
    ) throws(LinuxError) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 8192, alignment: 16)
        defer { buffer.deallocate() }
        var sender = [UInt8](repeating: 0, count: ConnectorLayout.sockaddrSize)
        for _ in 0..<256 {
            var senderLength = socklen_t(sender.count)
            let count: Int
            do {
                count = try LinuxError.check("recvfrom NETLINK_CONNECTOR") {
                    sender.withUnsafeMutableBytes { address in
                        recvfrom(
                            socket, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT),
                            address.baseAddress!.assumingMemoryBound(to: sockaddr.self), &senderLength)
                    }
                }
            } catch where error.errno == .resourceTemporarilyUnavailable || error.errno == .wouldBlock {
                return
            } catch where error.errno == .noBufferSpace {
                if events.last != .overrun { events.append(.overrun) }
                continue
            }
            let fromKernel = sender.withUnsafeBytes {
                $0.loadUnaligned(fromByteOffset: ConnectorLayout.sockaddrPortOffset, as: UInt32.self) == 0
            }
            guard fromKernel else { continue }
            ConnectorLayout.parse(
                UnsafeRawBufferPointer(rebasing: buffer[0..<min(count, buffer.count)]), into: &events,
                acknowledgements: acknowledgements)
        }
    }

    /// Waits until events arrive, `close` is called, one of `descriptors` is readable (a stop or a
    /// change the caller must look at), or `timeoutMilliseconds` pass (poll(2); -1 waits for ever),
    /// then returns what is queued, maybe nothing. Lost events (ENOBUFS) come back as `.overrun`.
    /// Throws `closedError` when called after `close`.
    public func next(timeoutMilliseconds: Int32, orUntilReadable descriptors: [FileDescriptor?] = []) throws(LinuxError) -> [ProcessEvent] {
        let (socket, wake) = try state.withLock { state throws(LinuxError) in
            guard !state.closing else { throw Self.closedError }
            state.users += 1
            return (state.socket.rawValue, state.wake.0.rawValue)
        }
        defer {
            state.withLock { state in
                state.users -= 1
                if state.closing && state.users == 0 { Self.release(&state) }
            }
        }
        var pollers = [
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        pollers += descriptors.map { pollfd(fd: $0?.rawValue ?? -1, events: Int16(POLLIN), revents: 0) }
        let ready = try LinuxError.check("poll NETLINK_CONNECTOR") { poll(&pollers, nfds_t(pollers.count), timeoutMilliseconds) }
        guard ready > 0, pollers[1].revents == 0 else { return [] }
        var events: [ProcessEvent] = []
        if pollers[0].revents & Int16(POLLIN | POLLERR) != 0 {
            try Self.receive(socket: socket, into: &events)
        }
        return events
    }

    /// Whether the kernel drops every event but uid changes before they reach this socket
    /// (SO_ATTACH_FILTER with `ConnectorLayout.uidChangesOnly`, or SO_DETACH_FILTER).
    ///
    /// While none of the users a caller cares about has a process, a uid change (login, su, setpriv,
    /// a daemon dropping privileges) is the only way one of theirs can appear; the forks, execs and
    /// exits of everyone else then cost no wake-up at all. What is dropped meanwhile is lost: list
    /// `/proc` after turning the filter off.
    public func passOnlyUIDChanges(_ only: Bool) throws(LinuxError) {
        try state.withLock { state throws(LinuxError) in
            guard !state.closing else { throw Self.closedError }
            let socket = state.socket.rawValue
            if only {
                var program = [UInt8](repeating: 0, count: ConnectorLayout.uidChangesOnly.count * 8)
                program.withUnsafeMutableBytes { raw in
                    for (index, instruction) in ConnectorLayout.uidChangesOnly.enumerated() {
                        raw.storeBytes(of: instruction.code, toByteOffset: index * 8, as: UInt16.self)
                        raw.storeBytes(of: instruction.jumpIfTrue, toByteOffset: index * 8 + 2, as: UInt8.self)
                        raw.storeBytes(of: instruction.jumpIfFalse, toByteOffset: index * 8 + 3, as: UInt8.self)
                        raw.storeBytes(of: instruction.k, toByteOffset: index * 8 + 4, as: UInt32.self)
                    }
                }
                let result = program.withUnsafeMutableBytes { instructions in
                    // struct sock_fprog { unsigned short len; struct sock_filter *filter; }
                    var fprog = [UInt8](repeating: 0, count: 16)
                    fprog.withUnsafeMutableBytes { raw in
                        raw.storeBytes(of: UInt16(ConnectorLayout.uidChangesOnly.count), toByteOffset: 0, as: UInt16.self)
                        raw.storeBytes(of: instructions.baseAddress, toByteOffset: 8, as: UnsafeMutableRawPointer?.self)
                    }
                    return fprog.withUnsafeBytes {
                        setsockopt(socket, SOL_SOCKET, ConnectorLayout.attachFilter, $0.baseAddress, socklen_t($0.count))
                    }
                }
                try LinuxError.check("setsockopt SO_ATTACH_FILTER", retryOnInterrupt: false) { result }
            } else {
                var unused: Int32 = 0
                do throws(LinuxError) {
                    try LinuxError.check("setsockopt SO_DETACH_FILTER") {
                        setsockopt(socket, SOL_SOCKET, ConnectorLayout.detachFilter, &unused, socklen_t(MemoryLayout<Int32>.size))
                    }
                } catch where error.errno == .noSuchFileOrDirectory {
                    // There was no filter.
                }
            }
        }
    }

    /// Unsubscribes (PROC_CN_MCAST_IGNORE, so the kernel stops preparing events nobody reads) and
    /// closes the socket; wakes a `next` blocked on another thread. Calling it again does nothing.
    public func close() {
        state.withLock { state in
            guard !state.closing else { return }
            state.closing = true
            var byte: UInt8 = 1
            _ = Glibc.write(state.wake.1.rawValue, &byte, 1)
            if state.users == 0 { Self.release(&state) }
        }
    }

    deinit {
        state.withLock { state in
            state.closing = true
            Self.release(&state)
        }
    }

    private static func release(_ state: inout State) {
        guard !state.closed else { return }
        state.closed = true
        try? send(ConnectorLayout.ignore, socket: state.socket.rawValue, ack: 0, port: 0)
        try? state.socket.close()
        try? state.wake.0.close()
        try? state.wake.1.close()
    }

    private static func netlinkAddress(port: UInt32, groups: UInt32) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: ConnectorLayout.sockaddrSize)
        bytes.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt16(AF_NETLINK), toByteOffset: ConnectorLayout.sockaddrFamilyOffset, as: UInt16.self)
            raw.storeBytes(of: port, toByteOffset: ConnectorLayout.sockaddrPortOffset, as: UInt32.self)
            raw.storeBytes(of: groups, toByteOffset: ConnectorLayout.sockaddrGroupsOffset, as: UInt32.self)
        }
        return bytes
    }

    private static func monotonicMilliseconds() -> Int64 { ClockReading.read(CLOCK_MONOTONIC) }
}
