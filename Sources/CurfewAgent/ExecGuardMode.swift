/// Whether the exec guard denies execs of blocked apps before they run, as the agent reports it.
public enum ExecGuardMode: Sendable, Equatable, CustomStringConvertible {
    case on
    /// Turned off (`--exec-guard off`).
    case off
    /// Asked for but unavailable: why, with the error.
    case unavailable(reason: String)

    /// `on`, `off`, or `off: <why>` for the log.
    public var description: String {
        switch self {
        case .on: "on"
        case .off: "off"
        case .unavailable(let reason): "off: \(reason)"
        }
    }
}
