import SystemPackage
import Glibc
import CLinux
import CurfewPOSIX

/// Starts `path` with `arguments` (argv[0] is `path`); returns its PID. The caller must `reap` it.
/// `options` give its environment (default: the caller's), standard streams (default: standard input
/// from /dev/null, output and errors the caller's) and process group.
///
/// The child starts with an empty signal mask and default handlers for SIGTERM, SIGINT, SIGHUP,
/// SIGQUIT and SIGPIPE, whatever the caller blocked or ignored (a Swift Testing process blocks
/// signals, and a blocked SIGTERM would stay pending for ever in the child).
///
/// With `uid` and/or `gid` it runs as that user through `setpriv --reuid --regid --clear-groups`
/// (util-linux), which changes credentials and then execs in place, so the PID returned is the
/// program's own; this call waits (up to 2 s) until that exec has happened. Without `gid`, the
/// user's primary group from the password database is used (or the uid's number if none).
/// Needs root for another uid.
public func spawnProcess(
    _ path: String, _ arguments: [String], uid: UInt32? = nil, gid: UInt32? = nil, options: SpawnOptions = SpawnOptions()
) throws(LinuxError) -> Int32 {
    guard uid != nil || gid != nil else { return try posixSpawn(path, [path] + arguments, options) }
    let candidates = ["/usr/bin/setpriv", "/bin/setpriv"]
    guard let setpriv = candidates.first(where: { candidate in access(candidate, X_OK) == 0 }) else {
        throw LinuxError(operation: "spawn \(path): setpriv (util-linux) not found", errno: .noSuchFileOrDirectory)
    }
    var wrapper = [setpriv]
    if let uid { wrapper.append("--reuid=\(uid)") }
    if let group = gid ?? uid.map(primaryGroup) { wrapper.append("--regid=\(group)") }
    wrapper += ["--clear-groups", "--", path]
    let pid = try posixSpawn(setpriv, wrapper + arguments, options)
    waitUntilExecuted(pid: pid, wrapper: setpriv)
    return pid
}

/// Waits for `pid` (blocking waitpid, EINTR retried) and returns its wait status; nil if it is not
/// our child or was already reaped.
@discardableResult
public func reap(_ pid: Int32) -> Int32? {
    var status: Int32 = 0
    guard (try? LinuxError.check("waitpid \(pid)", { waitpid(pid, &status, 0) })) != nil else { return nil }
    return status
}

/// Waits up to `milliseconds` for `pid` (a child of ours) to exit, on its pidfd (readable when it
/// exits), and reaps it if it did: true once it is reaped (or was not ours to reap), false while it
/// still runs (it is left as it is).
public func reap(_ pid: Int32, withinMilliseconds milliseconds: Int64) -> Bool {
    let handle = exitDescriptor(ofChild: pid)
    defer { try? handle?.close() }
    let deadline = SystemClock.monotonicNanoseconds() + milliseconds * 1_000_000
    while true {
        var status: Int32 = 0
        // 0: it still runs; else reaped (its PID) or not ours (-1, ECHILD).
        let result = waitpid(pid, &status, WNOHANG)
        if result != 0 && !(result < 0 && errno == EINTR) { return true }
        let left = (deadline - SystemClock.monotonicNanoseconds() + 999_999) / 1_000_000
        guard left > 0 else { return false }
        // Without a pidfd, Readiness looks again every quarter second.
        _ = Readiness.wait([handle], timeoutMilliseconds: left)
    }
}

/// A pidfd of `pid`, a child of ours not yet reaped (so its PID cannot name another process
/// meanwhile): readable once it exits. nil if none can be had. The caller closes it.
public func exitDescriptor(ofChild pid: Int32) -> FileDescriptor? {
    (try? LinuxError.check("pidfd_open \(pid)") { pidfd_open(pid, 0) }).map { FileDescriptor(rawValue: $0) }
}

/// SIGKILL, then `reap`.
public func killAndReap(_ pid: Int32) {
    guard pid > 0 else { return }
    kill(pid, SIGKILL)
    reap(pid)
}

/// Where a spawned child's standard streams go, its environment and its process group.
public struct SpawnOptions: Sendable {
    /// nil: the caller's environment.
    public var environment: [String: String]?
    /// A file for standard output (and standard error unless `errors` is given); nil: the caller's.
    public var output: String?
    public var errors: String?
    /// Truncate `output` and `errors` instead of appending.
    public var truncate: Bool
    /// A descriptor to become standard input; nil: /dev/null.
    public var input: Int32?
    /// Descriptors to hand on, as (the caller's descriptor, the child's number).
    public var passing: [Passing]
    /// nil: the caller's group; 0: a new group led by the child; else the group to join.
    public var processGroup: Int32?

    public struct Passing: Sendable {
        public var from: Int32
        public var to: Int32
        public init(from: Int32, to: Int32) {
            self.from = from
            self.to = to
        }
    }

    public init(
        environment: [String: String]? = nil, output: String? = nil, errors: String? = nil, truncate: Bool = false,
        input: Int32? = nil, passing: [Passing] = [], processGroup: Int32? = nil
    ) {
        self.environment = environment
        self.output = output
        self.errors = errors
        self.truncate = truncate
        self.input = input
        self.passing = passing
        self.processGroup = processGroup
    }
}

/// The signals a child gets back at their default action, whatever the caller ignored or handled.
private let signalsResetInChildren = [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGCHLD, SIGUSR1, SIGUSR2]

private func posixSpawn(_ path: String, _ argv: [String], _ options: SpawnOptions) throws(LinuxError) -> Int32 {
    var actions = posix_spawn_file_actions_t()
    try LinuxError.checkErrorNumber("posix_spawn_file_actions_init") { posix_spawn_file_actions_init(&actions) }
    defer { posix_spawn_file_actions_destroy(&actions) }
    if let input = options.input {
        posix_spawn_file_actions_adddup2(&actions, input, 0)
    } else {
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    }
    let mode = O_WRONLY | O_CREAT | (options.truncate ? O_TRUNC : O_APPEND)
    if let output = options.output {
        posix_spawn_file_actions_addopen(&actions, 1, output, mode, 0o644)
    }
    if let errors = options.errors {
        posix_spawn_file_actions_addopen(&actions, 2, errors, mode, 0o644)
    } else if options.output != nil {
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
    }
    for descriptor in options.passing { posix_spawn_file_actions_adddup2(&actions, descriptor.from, descriptor.to) }

    var attributes = posix_spawnattr_t()
    try LinuxError.checkErrorNumber("posix_spawnattr_init") { posix_spawnattr_init(&attributes) }
    defer { posix_spawnattr_destroy(&attributes) }
    var mask = sigset_t()
    sigemptyset(&mask)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in signalsResetInChildren { sigaddset(&defaults, signal) }
    try LinuxError.checkErrorNumber("posix_spawnattr_setsigmask") { posix_spawnattr_setsigmask(&attributes, &mask) }
    try LinuxError.checkErrorNumber("posix_spawnattr_setsigdefault") {
        posix_spawnattr_setsigdefault(&attributes, &defaults)
    }
    var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
    if let group = options.processGroup {
        posix_spawnattr_setpgroup(&attributes, group)
        flags |= POSIX_SPAWN_SETPGROUP
    }
    try LinuxError.checkErrorNumber("posix_spawnattr_setflags") { posix_spawnattr_setflags(&attributes, Int16(flags)) }

    let cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    let cEnvironment: [UnsafeMutablePointer<CChar>?]? = options.environment.map { entries in
        entries.map { strdup("\($0.key)=\($0.value)") } + [nil]
    }
    defer {
        for argument in cArguments { free(argument) }
        for entry in cEnvironment ?? [] { free(entry) }
    }
    var pid: pid_t = 0
    try LinuxError.checkErrorNumber("posix_spawn \(path)") {
        cArguments.withUnsafeBufferPointer { argumentsPointer in
            if let cEnvironment {
                cEnvironment.withUnsafeBufferPointer {
                    posix_spawn(&pid, path, &actions, &attributes, argumentsPointer.baseAddress!, $0.baseAddress!)
                }
            } else {
                posix_spawn(&pid, path, &actions, &attributes, argumentsPointer.baseAddress!, environ)
            }
        }
    }
    return pid
}

/// The passwd entry's group of `uid` (getpwuid_r), or the uid's own number.
private func primaryGroup(of uid: UInt32) -> UInt32 {
    var entry = passwd()
    var result: UnsafeMutablePointer<passwd>?
    var buffer = [CChar](repeating: 0, count: 16 * 1024)
    let found = getpwuid_r(uid, &entry, &buffer, buffer.count, &result)
    return found == 0 && result != nil ? entry.pw_gid : uid
}

/// Waits until `/proc/PID/exe` no longer names the wrapper (or the process is gone), up to 2 s.
/// An exec releases the old image, which closes the wrapper's executable (inotify's
/// IN_CLOSE_NOWRITE on it, after the new image is in place), so the wait is on that event; any
/// other process's open and close of the wrapper only makes it look again. Should the event never
/// come (a filesystem inotify is blind on), it looks again every `recheckMilliseconds`.
private func waitUntilExecuted(pid: Int32, wrapper: String, recheckMilliseconds: Int64 = 50) {
    let wrapperPath = realPath(wrapper) ?? wrapper
    // Made before the first look, so that an exec after it is not missed.
    let watch = try? DirectoryWatch(paths: [wrapperPath], events: UInt32(IN_CLOSE_NOWRITE))
    let deadline = SystemClock.monotonicNanoseconds() + 2_000 * 1_000_000
    while true {
        guard let current = try? linkTarget("/proc/\(pid)/exe"), !current.isEmpty else { return }
        if current != wrapperPath { return }
        let left = (deadline - SystemClock.monotonicNanoseconds() + 999_999) / 1_000_000
        guard left > 0 else { return }
        if let watch {
            _ = watch.waitForChange(timeoutMilliseconds: Int32(clamping: min(left, recheckMilliseconds)))
        } else {
            _ = Readiness.wait([], timeoutMilliseconds: min(left, recheckMilliseconds))
        }
    }
}

private func realPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}
