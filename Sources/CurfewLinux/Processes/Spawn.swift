import Glibc

/// Starts `path` with `arguments` (argv[0] is `path`) and the caller's environment; returns its PID.
/// The caller must `reap` it.
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
public func spawnProcess(_ path: String, _ arguments: [String], uid: UInt32? = nil, gid: UInt32? = nil)
    throws(LinuxError) -> Int32
{
    guard uid != nil || gid != nil else { return try posixSpawn(path, [path] + arguments) }
    let candidates = ["/usr/bin/setpriv", "/bin/setpriv"]
    guard let setpriv = candidates.first(where: { candidate in access(candidate, X_OK) == 0 }) else {
        throw LinuxError(operation: "spawn \(path): setpriv (util-linux) not found", errno: ENOENT)
    }
    var wrapper = [setpriv]
    if let uid { wrapper.append("--reuid=\(uid)") }
    if let group = gid ?? uid.map(primaryGroup) { wrapper.append("--regid=\(group)") }
    wrapper += ["--clear-groups", "--", path]
    let pid = try posixSpawn(setpriv, wrapper + arguments)
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

/// SIGKILL, then `reap`.
public func killAndReap(_ pid: Int32) {
    guard pid > 0 else { return }
    kill(pid, SIGKILL)
    reap(pid)
}

private func posixSpawn(_ path: String, _ argv: [String]) throws(LinuxError) -> Int32 {
    var attributes = posix_spawnattr_t()
    try LinuxError.checkErrorNumber("posix_spawnattr_init") { posix_spawnattr_init(&attributes) }
    defer { posix_spawnattr_destroy(&attributes) }
    var mask = sigset_t()
    sigemptyset(&mask)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE] { sigaddset(&defaults, signal) }
    try LinuxError.checkErrorNumber("posix_spawnattr_setsigmask") { posix_spawnattr_setsigmask(&attributes, &mask) }
    try LinuxError.checkErrorNumber("posix_spawnattr_setsigdefault") {
        posix_spawnattr_setsigdefault(&attributes, &defaults)
    }
    try LinuxError.checkErrorNumber("posix_spawnattr_setflags") {
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    }

    let cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    defer { for argument in cArguments { free(argument) } }
    var pid: pid_t = 0
    try LinuxError.checkErrorNumber("posix_spawn \(path)") {
        cArguments.withUnsafeBufferPointer { argumentsPointer in
            posix_spawn(&pid, path, nil, &attributes, argumentsPointer.baseAddress!, environ)
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

/// Polls `/proc/PID/exe` until it no longer names the wrapper (or the process is gone).
private func waitUntilExecuted(pid: Int32, wrapper: String) {
    func executable(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
    let wrapperPath = realPath(wrapper) ?? wrapper
    for _ in 0..<2000 {
        guard let current = executable("/proc/\(pid)/exe") else { return }
        if current != wrapperPath { return }
        usleep(1000)
    }
}

private func realPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}
