import ArgumentParser
import CurfewReports
import CurfewCore
import CurfewLinux
import CurfewStore
import CurfewSync
import Foundation
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// `curfew check-login`: PAM's account check (pam_exec), for every login service.
struct CheckLogin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-login",
        abstract: "Say whether a user may log in now (for pam_exec in the PAM account stack).",
        discussion: """
            Reads the user from --user or $PAM_USER and the service from $PAM_SERVICE. Exit 0: allowed \
            (root and users Curfew does not manage always are, whoever runs the check). Exit 77: refused; the reason and when \
            they may log in again are printed on stdout, which pam_exec's `stdout` option shows at the \
            login prompt. The agent is asked first; without it the policy and usage on disk decide. \
            Run without root (a screen locker runs it as the user), the check is of the caller's own \
            account: another account but root's is refused alike, managed or not; and with no answer \
            from the agent, a user in the list the agent keeps beside its socket (managed-users) is \
            refused, saying why. \
            When a managed user's state cannot be read at all, the login is refused unless \
            --fail-open is given or CURFEW_FAIL_MODE is "open" (in the environment, else in \
            /etc/default/curfew). Scheduled jobs (PAM services cron, atd, anacron) are not logins and \
            are let through.
            PAM line: account required pam_exec.so quiet stdout seteuid /usr/bin/curfew check-login
            """)

    @OptionGroup var location: LocationOptions
    @Option(help: ArgumentHelp("The user logging in (default: $PAM_USER).", valueName: "name")) var user: String?
    @Option(help: ArgumentHelp("The agent's socket (default: $CURFEW_SOCKET, else /run/curfew/curfewd.sock).", valueName: "path"))
    var socket: String?
    @Flag(help: "Let a managed user in when their state cannot be read (default: refuse).") var failOpen = false

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        guard let name = user ?? environment["PAM_USER"], !name.isEmpty else {
            throw CLIError("check-login needs a user: pass --user or run it from pam_exec, which sets PAM_USER", .invalidArguments)
        }
        // Root is never managed, whoever asks. Nothing here depends on who runs the check: sudo and su
        // run pam_exec with the caller's real uid (without its seteuid option), a screen locker runs it
        // as the user; the agent answers each caller by the effective uid the kernel vouches for, and
        // without the agent only a caller who can read the state directory (root) learns anything from it.
        if Accounts.isSuperuser(name) { return }
        let service = environment["PAM_SERVICE"] ?? "unknown"
        // A scheduled job (cron, atd) is not a login: let through, its processes counted as any.
        guard LoginVerdict.isLogin(service: service) else { return }
        // --fail-open, else CURFEW_FAIL_MODE from the environment, else from /etc/default/curfew.
        let configured = DefaultsFile.failMode(environment: environment)
        if let error = configured.error { Output.error(error) }
        let verdict = try Self.verdict(
            user: name, service: service, location: location, socket: socket,
            failOpen: failOpen || configured.mode == .open)
        guard verdict.allowed else {
            Output.line(verdict.message)
            throw ExitCode(ExitStatus.notPermitted.rawValue)
        }
    }

    static func verdict(user: String, service: String, location: LocationOptions, socket: String?, failOpen: Bool) throws
        -> LoginVerdict
    {
        let environment = ProcessInfo.processInfo.environment
        let socketPath = Locations.socket(socket, environment: environment)
        let caller = geteuid()
        // Anyone but root asking about another account (a child probing a sibling) is refused alike,
        // managed or not, as the agent does: the answer never says who is managed.
        if caller != 0 && Accounts.account(uid: caller)?.name != user {
            return LoginVerdict(allowed: false, message: "Curfew: \(LoginVerdict.onlyRootChecksOthers)")
        }
        let request = AgentRequest.checkLogin(user: user, service: service)
        // At most 1 s for the agent (connect, request and answer), whatever is on the socket: the
        // records on disk then decide, so a login never waits more than 2 s.
        var why = "did not answer within 1 s"
        switch ask(request, socket: socketPath, within: .seconds(1)) {
        case .answered(let reply):
            if reply.ok, let allowed = reply.allowed, let message = reply.message {
                return LoginVerdict(allowed: allowed, message: message)
            }
            // This caller may not ask (not root, about another user): refused, not let in by default.
            if reply.error == .notPermitted, let message = reply.message {
                return LoginVerdict(allowed: false, message: "Curfew: \(message)")
            }
            why = "refused to answer (\(reply.message ?? "no reason given"))"
        case .unanswered(let reason):
            why = reason
        }
        // Not root: the state directory is root's alone. The list of managed users the agent publishes
        // beside its socket says whether this user (the caller) is managed: a managed child is refused,
        // saying why; anyone else is let in as before.
        if caller != 0 {
            guard ManagedUsers.readPublished(socketPath: socketPath)?.contains(user) == true else {
                return LoginVerdict(allowed: true, message: "\(user) is not known to be managed")
            }
            return LoginVerdict.unanswered(user: user, why: why, failOpen: failOpen)
        }
        // No agent: the records and the usage on disk decide. Reads never wait for a writer (WAL); the
        // refusal's event waits at most half a second for an agent that holds the write lock.
        let workspace = Workspace(location)
        workspace.busySeconds = 0.5
        let now = Workspace.now()
        do {
            // The policy the agent would enforce: the records, the last good policy it kept, fail mode.
            let inForce = try workspace.policyInForce(only: [user], failOpen: failOpen)
            guard let entry = inForce.entries[user], entry.source != .failClosed else {
                if inForce.entries[user] != nil || inForce.failingOpen.contains(user) {
                    return failMode(user: user, failOpen: failOpen, why: "no valid policy can be read")
                }
                return LoginVerdict(allowed: true, message: "\(user) is not managed on this computer")
            }
            let policy = entry.policy
            let (schedule, totals, others) = try workspace.savedDay(of: user, policy: policy, now: now)
            let store = try workspace.openStore()
            let week = try workspace.savedWeek(of: user, policy: policy, now: now)
            let verdict = LoginVerdict.decide(
                user: user, schedule: schedule,
                usage: ScheduleUsage(
                    daySeconds: ((totals[UsageKey.screen] ?? 0) + others) / 1000, weekSeconds: week.map { ($0 + others) / 1000 }),
                now: now)
            if !verdict.allowed {
                // The refusal stands even if the audit log cannot take it (a read-only disk, say).
                _ = try? store.write { try EventLog.append(verdict.event(user: user, service: service, now: now), $0) }
            }
            workspace.finish()
            return verdict
        } catch {
            // Nothing readable: only a user this computer is known to manage is kept out.
            let managed = (ManagedUsers.read(stateDirectory: workspace.stateDirectory) ?? [])
                .union(ManagedUsers.readPublished(socketPath: socketPath) ?? [])
            guard managed.contains(user) else {
                return LoginVerdict(allowed: true, message: "\(user) is not known to be managed")
            }
            // A key or file error in the words a command would print for it.
            let problem = CLIError(translating: error)?.message ?? "\(error)"
            return failMode(user: user, failOpen: failOpen, why: "its state cannot be read (\(problem))")
        }
    }

    /// What asking the agent came to: its reply, or why there is none (for the refusal's words).
    enum AgentAnswer {
        case answered(AgentReply)
        case unanswered(String)
    }

    /// Asks the agent within `budget` in all. A `busy` refusal (every slot of this account taken, by
    /// a flood of its own, say), or the connection closed before the answer, is asked again while
    /// time is left: the agent answers a request that is complete when it is accepted even then, so
    /// only a connect that reaches the agent before its line is turned away. An agent that is not
    /// running is not waited for.
    static func ask(_ request: AgentRequest, socket: String, within budget: Duration) -> AgentAnswer {
        let clock = ContinuousClock()
        let deadline = clock.now + budget
        var why = "did not answer within 1 s"
        while true {
            let left = deadline - clock.now
            guard left > .zero else { return .unanswered(why) }
            let line: String
            do {
                line = try PeerSocketClient.request(path: socket, line: request.line, timeout: left)
            } catch {
                switch error.errno {
                case .noSuchFileOrDirectory, .connectionRefused: return .unanswered("is not running")
                case .timedOut: return .unanswered(why)
                case .brokenPipe, .connectionReset:
                    // Turned away before the line arrived (its busy line unread): ask again.
                    why = "is busy (too many connections are open)"
                    usleep(20_000)
                    continue
                default: return .unanswered("cannot be reached (\(error))")
                }
            }
            guard case .object(let sent)? = try? JSONValue.parse(line),
                let reply = try? JSONValueDecoder().decode(AgentReply.self, from: .object(sent))
            else { return .unanswered("sent something that is not an answer") }
            guard reply.error == .busy else { return .answered(reply) }
            why = "is busy (too many connections are open)"
            usleep(20_000)
        }
    }

    static func failMode(user: String, failOpen: Bool, why: String) -> LoginVerdict {
        failOpen
            ? LoginVerdict(allowed: true, message: "\(user) let in: Curfew \(why) and fails open")
            : LoginVerdict(allowed: false, message: "Curfew: \(user) may not log in now: Curfew \(why). Ask a parent.")
    }
}
