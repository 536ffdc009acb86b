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
    /// Where the PIN dialog is named (`Pinentry.program(configuration:)`): /etc/default/curfew, or a
    /// file given with `--config` that root owns alone.
    let configurationPath: String
    var tray: TrayItem?
    var stream: PeerSocketStream?
    var status: StatusReport?
    var note: String?
    /// The PIN dialog while it is open (`approveWithPIN` on a thread of its own).
    var approval: DetachedWork?
    /// The program's mappings dropped from memory once started, dropped again after each update.
    var programPages: [Range<UInt>] = []
    /// While the agent cannot be reached: when to try again, and the wait after that (1 s .. 60 s).
    var retryAt: Int64 = 0
    var backoff: Int64 = 1_000

    public init(socketPath: String, busAddress: String? = nil, configurationPath: String = "/etc/default/curfew") {
        self.socketPath = socketPath
        self.busAddress = busAddress
        self.configurationPath = configurationPath
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
            if let stream { pollers.append(pollfd(fd: stream.descriptor.rawValue, events: Int16(POLLIN), revents: 0)) } else {
                pollers.append(pollfd(fd: -1, events: 0, revents: 0))
                wait = max(0, retryAt - monotonic())
            }
            if let approval { pollers.append(pollfd(fd: approval.descriptor.rawValue, events: Int16(POLLIN), revents: 0)) }
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
            if let approval, pollers[1].revents != 0, let result = approval.readResult() {
                self.approval = nil
                note = result
                if let outcome = show() { return outcome }
            }
            if let tray {
                do {
                    try tray.bus.processUntilIdle()
                } catch {
                    return .failed("the session bus went away: \(error)")
                }
            }
            if pollers[0].revents != 0 {
                // The update (read, shown, sent on the bus) ran code the indicator will not run again
                // until the next one: its pages go back to the page cache while it sleeps.
                try? ProgramPages.drop(programPages)
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
        guard let reply = AgentReply(line: line) else { return nil }
        guard reply.ok, let status = reply.status else {
            switch reply.error {
            case .unknownUser?, .notPermitted?: return .notManaged(reply.message ?? "not managed")
            case .alreadyWatching? where tray == nil:
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
            // Started: the item is on the bus. What startup ran of the program is not needed again:
            // its pages leave the indicator's resident set for the page cache (`ProgramPages`).
            programPages = (try? ProgramPages.release(withLibraries: true))?.clean ?? []
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
        case .approve(let minutes):
            // The dialog waits for a person: the tray and the watch are served meanwhile.
            if approval == nil {
                let (socketPath, user, configuration) = (socketPath, status.user, configurationPath)
                do {
                    approval = try DetachedWork.start {
                        Indicator.approveWithPIN(minutes: minutes, user: user, socketPath: socketPath, configuration: configuration)
                    }
                    note = "A parent types the PIN in the dialog"
                } catch {
                    note = "The PIN dialog could not start"
                }
            } else {
                note = "The PIN dialog is open"
            }
            _ = show()
            return
        case .ask(let minutes):
            let cause = "asked from the panel: " + ChildWords.summary(status)
            request = .request(minutes: Int64(minutes), reason: String(cause.prefix(RequestRules.maxReasonCharacters)))
        case .extend:
            request = .extend
        }
        let answer = (try? PeerSocketClient.request(path: socketPath, line: request.line)).flatMap { AgentReply(line: $0) }
        switch (action, answer) {
        case (.approve, _): break
        case (_, nil): note = "The agent did not answer; try again"
        case (.ask(let minutes), let reply?) where reply.ok:
            note = "Asked for \(ChildWords.duration(seconds: Int64(minutes) * 60)) (request \(reply.request?.id ?? 0)); a parent will answer"
        case (.extend, let reply?) where reply.ok:
            note = reply.extended.map { "Took \(ChildWords.duration(seconds: Int64($0.minutes) * 60)) more (\($0.used) of \($0.perWeek) this week)" }
        case (_, let reply?):
            note = UntrustedText.escaped(reply.message ?? "refused", for: .terminal)
        }
        _ = show()
    }

    /// "A parent approves … here…": the system's PIN dialog (pinentry, `Pinentry.program(configuration:)`)
    /// asks for the parent's PIN; a request for `minutes` is filed when the PIN is first typed (the PIN
    /// answers a request, once: the agent gives at most what the child's newest pending request asked);
    /// the agent checks the PIN and gives the time; a wrong PIN is asked for again (the dialog says so)
    /// while the agent allows tries. Returns the note the menu shows. Runs on a thread of its own
    /// (`DetachedWork`): the dialog waits up to `Pinentry.dialogTimeoutSeconds` per question for a person.
    static func approveWithPIN(minutes: Int, user: String, socketPath: String, configuration: String = Pinentry.systemConfiguration) -> String {
        let program: String
        switch Pinentry.program(configuration: configuration) {
        case .success(let path): program = path
        case .failure(.broken(let reason)): return UntrustedText.escaped(reason, for: .terminal)
        case .failure: return "No PIN dialog (pinentry) is installed; a parent can use curfew grant"
        }
        let amount = ChildWords.duration(seconds: Int64(minutes) * 60)
        let dialog: Pinentry
        do {
            dialog = try Pinentry(program: program)
        } catch {
            return "The PIN dialog could not start"
        }
        defer { dialog.finish() }
        do throws(Pinentry.Failure) {
            try dialog.command("SETTITLE", "Curfew")
            try dialog.command("SETDESC", "A parent approves \(amount) more today for \(user).\nType the parent's PIN:")
            try dialog.command("SETPROMPT", "PIN:")
            try dialog.command("SETOK", "Approve")
            try dialog.command("SETCANCEL", "Cancel")
            try dialog.command("SETTIMEOUT", "\(Pinentry.dialogTimeoutSeconds)")
            var asked = false
            for _ in 0...PINRules.maxTries {
                var pin = try dialog.getPIN()
                if !asked {
                    // Refused when enough requests wait already: the agent answers the newest of them.
                    let reason = String("asked with a parent beside me".prefix(RequestRules.maxReasonCharacters))
                    _ = try? PeerSocketClient.request(
                        path: socketPath, line: AgentRequest.request(minutes: Int64(minutes), reason: reason).line, timeout: .seconds(10))
                    asked = true
                }
                let line = AgentRequest.approvePIN(pin: String(decoding: pin, as: UTF8.self), minutes: Int64(minutes)).line
                for index in pin.indices { pin[index] = 0 }
                let reply = (try? PeerSocketClient.request(path: socketPath, line: line, timeout: .seconds(10))).flatMap { AgentReply(line: $0) }
                guard let reply else { return "The agent did not answer; try again" }
                if reply.ok {
                    let granted = reply.grant.map { ChildWords.duration(seconds: $0.minutes * 60) } ?? amount
                    return "A parent approved \(granted) more"
                }
                let reason = UntrustedText.escaped(reply.message ?? "refused", for: .terminal)
                guard reply.error == .wrongPIN else {
                    // No PIN set, tries used up, or the agent failed: say so in the dialog, then in the menu.
                    _ = try? dialog.command("SETDESC", reason)
                    _ = try? dialog.command("MESSAGE")
                    return reason
                }
                try dialog.command("SETERROR", reason)
            }
            return "Too many PIN tries; try again later"
        } catch .cancelled {
            return "Approval cancelled"
        } catch .notInstalled {
            return "No PIN dialog (pinentry) is installed; a parent can use curfew grant"
        } catch {
            return "The PIN dialog failed"
        }
    }

    func monotonic() -> Int64 { ClockReading.now().monotonic }
}
