import SystemPackage
import CurfewLinux
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Every process the benchmark started and has not reaped yet, so that they are all stopped and
/// reaped by PID however the benchmark ends: normally, on an error, or on SIGINT/SIGTERM/SIGHUP.
/// A crash or SIGKILL is left to `Guardian`, and sleepers end by themselves after `Sleepers.lifetime`.
final class ChildRegistry: Sendable {
    private struct State {
        var children: [pid_t: Int32] = [:]  // pid -> the signal that stops it
        var cleanups: [(order: Int, work: @Sendable () -> Void)] = []
    }

    private let state = Mutex(State())

    func add(_ pid: pid_t, stopSignal: Int32 = SIGKILL) { state.withLock { $0.children[pid] = stopSignal } }
    func remove(_ pid: pid_t) { _ = state.withLock { $0.children.removeValue(forKey: pid) } }

    /// Work to do at the end (restore a sysctl, remove a directory), after every child was stopped.
    func atExit(order: Int = 0, _ work: @escaping @Sendable () -> Void) {
        state.withLock { $0.cleanups.append((order, work)) }
    }

    /// Signals every child, reaps them, then runs the cleanups (each once).
    func stopEverything() {
        let (children, cleanups) = state.withLock { state in
            defer {
                state.children.removeAll()
                state.cleanups.removeAll()
            }
            return (state.children, state.cleanups)
        }
        for (pid, signal) in children { kill(pid, signal) }
        for (pid, signal) in children {
            if signal != SIGKILL {
                // Give a graceful stop up to 5 s (its pidfd tells when it is over), then insist.
                if reap(pid, withinMilliseconds: 5_000) { continue }
                kill(pid, SIGKILL)
            }
            reap(pid)
        }
        for cleanup in cleanups.sorted(by: { $0.order < $1.order }) { cleanup.work() }
    }

    nonisolated(unsafe) private static var signalSources: [any DispatchSourceSignal] = []

    /// On SIGINT, SIGTERM or SIGHUP: stop and reap every child, clean up, exit 128 + signal.
    /// Call once, from the main thread, before starting children.
    func stopOnSignals() {
        for signalNumber in [SIGINT, SIGTERM, SIGHUP] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { [self] in
                print("\ninterrupted: stopping every process the benchmark started")
                stopEverything()
                exit(128 + signalNumber)
            }
            source.resume()
            Self.signalSources.append(source)
        }
    }
}

let children = ChildRegistry()

/// The last line of defence when the benchmark dies without cleaning up (a crash, SIGKILL): a small
/// shell, in a process group of its own, reads process group ids from a pipe whose only writer is
/// the benchmark. When the benchmark exits the pipe closes; unless it said `done` first, the shell
/// kills every group it was told about (`kill -9 -GROUP`: the form dash accepts). Sleepers and
/// agents are started in such groups.
final class Guardian {
    private let writer: Int32
    let pid: pid_t

    private static let script = """
        groups=""
        while read -r word group; do
          case "$word" in
            group) groups="$groups $group" ;;
            done) exit 0 ;;
          esac
        done
        for group in $groups; do kill -9 "-$group" 2>/dev/null; done
        """

    /// nil if it cannot be started (the benchmark then relies on its own cleanup alone).
    init?() {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { return nil }
        // Neither end may leak into other children: a sleeper holding the writer would keep the
        // pipe open after the benchmark died.
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let started = spawnChild(
            "/bin/sh", ["-c", Self.script], environment: ["PATH": "/usr/bin:/bin"], processGroup: 0, input: ends[0])
        close(ends[0])
        guard case .success(let pid) = started else {
            close(ends[1])
            return nil
        }
        self.pid = pid
        writer = ends[1]
    }

    /// Kill the process group `group` if the benchmark dies.
    func watch(group: pid_t) { say("group \(group)") }

    /// Normal end: the guardian exits without killing anything.
    func dismiss() {
        say("done")
        close(writer)
        waitForExit(pid)
    }

    private func say(_ line: String) {
        let bytes = Array("\(line)\n".utf8)
        _ = bytes.withUnsafeBytes { write(writer, $0.baseAddress, $0.count) }
    }
}

/// The account whose processes the tracking section spawns and whose policy the agent enforces.
struct BenchAccount {
    var name: String
    var uid: UInt32
    var gid: UInt32
    /// Whether spawned processes change to this account (setpriv); false when it is our own.
    var switchesUser: Bool

    /// `$CURFEW_BENCH_USER`, else `curfewbench`, created as a system account without a home when we
    /// are root and it does not exist. Without root: the current user.
    static func resolve() throws -> BenchAccount {
        guard geteuid() == 0 else {
            guard let me = Accounts.account(uid: getuid()) else { throw BenchFailure("no passwd entry for uid \(getuid())") }
            return BenchAccount(name: me.name, uid: me.uid, gid: me.gid, switchesUser: false)
        }
        let name = ProcessInfo.processInfo.environment["CURFEW_BENCH_USER"].flatMap { $0.isEmpty ? nil : $0 } ?? "curfewbench"
        if Accounts.account(named: name) == nil {
            let status = run("/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name])
            print("created the system account \(name) for the benchmark (useradd exit \(status))")
        }
        guard let account = Accounts.account(named: name) else { throw BenchFailure("cannot create the account \(name)") }
        return BenchAccount(name: account.name, uid: account.uid, gid: account.gid, switchesUser: account.uid != geteuid())
    }
}

/// The kernel limits that decide how many processes can be started, raised where we may.
enum ProcessLimits {
    /// Makes room for `extra` more processes of `account`: RLIMIT_NPROC (inherited by the children;
    /// the kernel refuses setuid-then-exec past it even for root's children), kernel.pid_max and
    /// kernel.threads-max (restored at the end). Returns lines describing what it saw and did.
    static func prepare(extra: Int) -> [String] {
        var notes: [String] = []
        let tasks = currentTasks() ?? 0
        let needed = tasks + extra + 1_000

        // RLIM_INFINITY is ((rlim_t) -1), which Swift imports as an overflowing literal.
        let unlimited = rlim_t.max
        var limit = rlimit()
        getrlimit(Int32(__RLIMIT_NPROC.rawValue), &limit)
        let describe = { (value: rlim_t) in value == unlimited ? "unlimited" : "\(value)" }
        if limit.rlim_cur != unlimited && limit.rlim_cur < rlim_t(needed) {
            let before = limit.rlim_cur
            var raised = limit
            raised.rlim_cur = geteuid() == 0 ? unlimited : limit.rlim_max
            if geteuid() == 0 { raised.rlim_max = unlimited }
            if setrlimit(Int32(__RLIMIT_NPROC.rawValue), &raised) == 0 {
                notes.append("RLIMIT_NPROC raised from \(describe(before)) to \(describe(raised.rlim_cur))")
            } else {
                notes.append("RLIMIT_NPROC is \(describe(before)) and cannot be raised")
            }
        } else {
            notes.append("RLIMIT_NPROC \(describe(limit.rlim_cur))")
        }

        for (name, path) in [("kernel.pid_max", "/proc/sys/kernel/pid_max"), ("kernel.threads-max", "/proc/sys/kernel/threads-max")] {
            guard let value = readNumber(path) else { continue }
            if value >= needed {
                notes.append("\(name) \(value)")
                continue
            }
            if geteuid() == 0, let file = fopen(path, "w") {
                fputs("\(needed)\n", file)
                fclose(file)
                if readNumber(path) == needed {
                    notes.append("\(name) raised from \(value) to \(needed) for the run")
                    children.atExit(order: 10) {
                        if let file = fopen(path, "w") {
                            fputs("\(value)\n", file)
                            fclose(file)
                        }
                    }
                    continue
                }
            }
            notes.append("\(name) is \(value), below the \(needed) tasks needed, and cannot be raised")
        }
        if let pidsMax = cgroupPidsMax() {
            notes.append("cgroup pids.max \(pidsMax)" + (pidsMax < needed ? " (may stop the benchmark short)" : ""))
        }
        notes.append("\(tasks) tasks running before")
        return notes
    }

    /// The task count of /proc/loadavg (`0.00 0.01 0.05 1/123 4567`).
    static func currentTasks() -> Int? {
        guard let text = readText("/proc/loadavg") else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count >= 4, let slash = fields[3].firstIndex(of: "/") else { return nil }
        return Int(fields[3][fields[3].index(after: slash)...])
    }

    /// The pids controller limit of our cgroup (v2 or v1), nil if none.
    static func cgroupPidsMax() -> Int? {
        guard let lines = readText("/proc/self/cgroup")?.split(separator: "\n") else { return nil }
        for line in lines {
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { continue }
            let path = String(parts[2])
            let file: String
            if parts[0] == "0" && parts[1].isEmpty {
                file = "/sys/fs/cgroup\(path)/pids.max"
            } else if parts[1].split(separator: ",").contains("pids") {
                file = "/sys/fs/cgroup/pids\(path)/pids.max"
            } else {
                continue
            }
            if let value = readNumber(file) { return value }
        }
        return nil
    }
}

/// Sleeping processes of the bench account: `/bin/sleep`, started with posix_spawn and a clean
/// signal mask, through `setpriv --reuid --regid --clear-groups` (util-linux, which execs in place,
/// so the PID is sleep's own) when they run as another user.
///
/// Started in batches: `spawnProcess(_:_:uid:gid:)` waits for each exec before returning, which made
/// 5,000 processes take over 30 s; here a batch is started, then waited for.
final class Sleepers {
    /// How long each sleeps: longer than the benchmark, short enough to go away by themselves if
    /// the benchmark is killed with SIGKILL.
    static let lifetime = 600

    let account: BenchAccount
    private(set) var pids: [pid_t] = []
    /// All sleepers share one process group, led by the first (joining works as long as any member
    /// lives), which the guardian kills if the benchmark dies.
    private var group: pid_t? = nil
    private let guardian: Guardian?
    private let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].first { (path: String) in access(path, X_OK) == 0 }
    private let environment = ["PATH": "/usr/bin:/bin", "LANG": "C"]

    init(account: BenchAccount, guardian: Guardian?) {
        self.account = account
        self.guardian = guardian
    }

    var count: Int { pids.count }

    /// Grows to `target`; returns what stopped it short, if anything.
    func grow(to target: Int) -> (any Error)? {
        var started: [pid_t] = []
        var failure: (any Error)? = nil
        while pids.count + started.count < target {
            switch start() {
            case .success(let pid):
                children.add(pid)
                started.append(pid)
                if group == nil {
                    group = pid
                    guardian?.watch(group: pid)
                }
            case .failure(let error):
                failure = error
            }
            if failure != nil { break }
        }
        // Wait until each one runs /bin/sleep; setpriv exits instead when it cannot change user or
        // exec fails (EAGAIN past RLIMIT_NPROC).
        var pending = started
        let deadline = clock.now + .seconds(30)
        while !pending.isEmpty {
            pending.removeAll { pid in
                if readText("/proc/\(pid)/comm") == "sleep\n" {
                    pids.append(pid)
                    return true
                }
                if waitpid(pid, nil, WNOHANG) == pid {
                    children.remove(pid)
                    failure = failure ?? BenchFailure("a spawned sleep exited at once (setpriv or exec failed)")
                    return true
                }
                return false
            }
            if pending.isEmpty { break }
            if clock.now > deadline {
                for pid in pending { kill(pid, SIGKILL); reap(pid); children.remove(pid) }
                return BenchFailure("\(pending.count) spawned processes did not exec /bin/sleep within 30 s")
            }
            usleep(2_000)
        }
        return failure
    }

    /// Starts one more and waits until it runs /bin/sleep.
    func spawnOne() throws {
        if let error = grow(to: count + 1) { throw error }
    }

    private func start() -> Result<pid_t, LaunchError> {
        let sleep = ["/bin/sleep", "\(Self.lifetime)"]
        let processGroup = group ?? 0
        guard account.switchesUser else {
            return spawnChild(sleep[0], Array(sleep.dropFirst()), environment: environment, processGroup: processGroup)
        }
        guard let setpriv else { return .failure(LaunchError(path: "setpriv (util-linux)", errno: .noSuchFileOrDirectory)) }
        return spawnChild(
            setpriv, ["--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--"] + sleep,
            environment: environment, processGroup: processGroup)
    }

    /// Stops and reaps the most recently started one.
    func stopLast() {
        guard let pid = pids.popLast() else { return }
        killAndReap(pid)
        children.remove(pid)
    }

    /// SIGKILL to all first, then reap each: a few ms for thousands, instead of one at a time.
    func stopAll() {
        for pid in pids { kill(pid, SIGKILL) }
        for pid in pids {
            reap(pid)
            children.remove(pid)
        }
        pids.removeAll()
        group = nil
    }
}
