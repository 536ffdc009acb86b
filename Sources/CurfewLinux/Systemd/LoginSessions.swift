import CSystemd
import CLinux

#if canImport(Glibc)
    import Glibc
#endif

/// Which login session a process belongs to, as systemd knows it.
public enum LoginSessions {
    /// The session id of `pid` (`sd_pid_get_session`, which reads the process's cgroup); nil when it
    /// is in none (a system service, a test outside any login) or is gone.
    public static func session(ofPID pid: Int32) -> String? {
        var session: UnsafeMutablePointer<CChar>?
        guard sd_pid_get_session(pid, &session) >= 0, let session else { return nil }
        defer { free(session) }
        return String(cString: session)
    }
}
