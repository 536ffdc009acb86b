import CSystemd

/// The service manager's notification protocol (sd-daemon).
public enum SystemdNotify {
    /// Sends `state`, such as "READY=1", "STOPPING=1", "WATCHDOG=1" or "STATUS=...", to the socket in
    /// `NOTIFY_SOCKET` (`sd_notify(0, state)`). False when `NOTIFY_SOCKET` is unset (not started by systemd
    /// with Type=notify) or the send failed; callers carry on either way.
    @discardableResult
    public static func send(_ state: String) -> Bool {
        sd_notify(0, state) > 0
    }

    /// How often the service manager expects "WATCHDOG=1", or nil when it does not
    /// (`sd_watchdog_enabled(0, ...)`, which reads `WATCHDOG_USEC` and checks `WATCHDOG_PID` against
    /// this process). Ping at half this interval.
    public static func watchdogInterval() -> Duration? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return .microseconds(Int64(clamping: usec))
    }
}
