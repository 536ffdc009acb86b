import CurfewPOSIX
import SystemPackage
import CLinux
import CurfewCore
import CurfewLinux

#if canImport(Glibc)
    import Glibc
#endif

/// `curfew-indicator`: the child's tray item. It watches the caller's own status through the agent's
/// socket (`watch`: the agent sends it when it changes, so nothing here polls or ticks) and shows it
/// on the session bus. It needs no privilege and reads nothing of the state directory.
public final class Indicator {
    /// Why the indicator stopped.
    public enum Outcome: Equatable, Sendable {
        /// The account is not managed here (or is root): nothing to show, exit 0.
        case notManaged(String)
        case failed(String)
    }

    let socketPath: String
    let busAddress: String?
    var tray: TrayItem?
    var stream: PeerSocketStream?
    var status: StatusReport?
    var note: String?
    /// While the agent cannot be reached: when to try again, and the wait after that (1 s .. 60 s).
    var retryAt: Int64 = 0
    var backoff: Int64 = 1_000

    public init(socketPath: String, busAddress: String? = nil) {
        self.socketPath = socketPath
        self.busAddress = busAddress
    }

    /// Runs until the session ends (the bus closes) or the account turns out not to be managed.
    public func run() -> Outcome {
        if getuid() == 0 { return .notManaged("root is never managed") }
        while true {
            if stream == nil && monotonic() >= retryAt {
                if let outcome = connect() { return outcome }
            }
            var pollers: [pollfd] = []
            var wait: Int64 = -1
            if let stream { pollers.append(pollfd(fd: stream.descriptor, events: Int16(POLLIN), revents: 0)) } else {
                pollers.append(pollfd(fd: -1, events: 0, revents: 0))
                wait = max(0, retryAt - monotonic())
            }
            if let tray {
                do {
                    let state = try tray.bus.pollState()
                    pollers.append(pollfd(fd: state.fd, events: state.events, revents: 0))
                    if let deadline = state.deadlineMicroseconds {
                        let left = Int64(deadline / 1000) - monotonic()
                        wait = wait < 0 ? max(0, left) : min(wait, max(0, left))
                    }
                } catch {
                    return .failed("the session bus went away: \(error)")
                }
            }
            let polled = valueOrErrno(retryOnInterrupt: false) { poll(&pollers, nfds_t(pollers.count), wait < 0 ? -1 : Int32(clamping: wait)) }
            if case .failure(let error) = polled, error != .interrupted { return .failed("poll: \(error)") }
            if let stream, pollers[0].revents != 0 {
                let (lines, closed) = stream.readLines()
                for line in lines {
                    if let outcome = receive(line) { return outcome }
                }
                if closed { disconnected() }
            }
            if let tray {
                do {
                    try tray.bus.processUntilIdle()
                } catch {
                    return .failed("the session bus went away: \(error)")
                }
            }
        }
    }

    /// Opens the watch; an outcome when the agent says this account is not managed.
    func connect() -> Outcome? {
        do {
            stream = try PeerSocketStream(path: socketPath, line: AgentRequest.watch(user: nil).line)
        } catch {
            disconnected()
        }
        return nil
    }

    func disconnected() {
        stream = nil
        retryAt = monotonic() + backoff
        backoff = min(backoff * 2, 60_000)
    }

    /// One line from the watch: the status, or the agent's refusal.
    func receive(_ line: String) -> Outcome? {
        guard let reply = WatchReply(line) else { return nil }
        guard reply.ok, let status = reply.status else {
            switch reply.error {
            case AgentRefusal.unknownUser.rawValue?, AgentRefusal.notPermitted.rawValue?: return .notManaged(reply.message ?? "not managed")
            case AgentRefusal.alreadyWatching.rawValue? where tray == nil:
                // Another indicator already shows this session: this one is not needed.
                return .notManaged("another indicator watches this session")
            default:
                // Busy (too many connections, or the agent still holds our last watch): try later.
                stream = nil
                retryAt = monotonic() + 60_000
                return nil
            }
        }
        backoff = 1_000
        self.status = status
        return show()
    }

    func show() -> Outcome? {
        guard let status else { return nil }
        let view = IndicatorView.make(status, note: note)
        if let tray {
            tray.show(view)
            return nil
        }
        do {
            let bus = try busAddress.map { address throws(LinuxSystemdError) in try SDBus.open(address: address) } ?? SDBus.openUser()
            let tray = try TrayItem(bus: bus, view: view, pid: getpid())
            tray.onClick = { [unowned self] id in self.clicked(id) }
            try bus.flush()
            self.tray = tray
        } catch {
            return .failed("cannot show the item on the session bus: \(error)")
        }
        return nil
    }

    /// A menu item: ask a parent (a request with the state as its cause) or take the allowance.
    func clicked(_ id: Int32) {
        guard let status, let action = IndicatorView.action(for: id, allowance: status.selfExtension != nil) else { return }
        let request: AgentRequest
        switch action {
        case .ask(let minutes):
            let cause = "asked from the panel: " + ChildWords.summary(status)
            request = .request(minutes: Int64(minutes), reason: String(cause.prefix(RequestRules.maxReasonCharacters)))
        case .extend:
            request = .extend
        }
        let answer = (try? PeerSocketClient.request(path: socketPath, line: request.line)).flatMap { WatchReply($0) }
        switch (action, answer) {
        case (_, nil): note = "The agent did not answer; try again"
        case (.ask(let minutes), let reply?) where reply.ok:
            note = "Asked for \(ChildWords.duration(seconds: Int64(minutes) * 60)) (request \(reply.requestID ?? 0)); a parent will answer"
        case (.extend, let reply?) where reply.ok:
            note = reply.extended.map { "Took \(ChildWords.duration(seconds: Int64($0.minutes) * 60)) more (\($0.used) of \($0.perWeek) this week)" }
        case (_, let reply?):
            note = UntrustedText.escaped(reply.message ?? "refused", for: .terminal)
        }
        _ = show()
    }

    func monotonic() -> Int64 { ClockReading.now().monotonic }
}
