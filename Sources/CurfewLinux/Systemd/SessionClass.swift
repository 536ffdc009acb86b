/// logind's `Class` of a session (pam_systemd(8) lists them): only `user` sessions are a person at
/// the computer whose screen time counts.
public enum SessionClass: Sendable, Hashable, CustomStringConvertible {
    /// A normal user session.
    case user
    /// A user session started before the system finished booting (systemd 256 and later).
    case userEarly
    /// A user session not fully set up yet, such as one whose user lacks a home directory at login.
    case userIncomplete
    /// A user session that does not keep the user's service manager running.
    case userLight
    case userEarlyLight
    /// The display manager's login screen.
    case greeter
    /// A screen locker's session.
    case lockScreen
    /// A session without a person at the computer (cron, systemd-run).
    case background
    case backgroundLight
    /// The user's service manager.
    case manager
    case managerEarly
    /// logind's `none`.
    case unclassified
    /// A class this code does not know, as logind wrote it (also an older logind's empty string).
    case other(String)

    /// From logind's text.
    public init(_ text: String) {
        switch text {
        case "user": self = .user
        case "user-early": self = .userEarly
        case "user-incomplete": self = .userIncomplete
        case "user-light": self = .userLight
        case "user-early-light": self = .userEarlyLight
        case "greeter": self = .greeter
        case "lock-screen": self = .lockScreen
        case "background": self = .background
        case "background-light": self = .backgroundLight
        case "manager": self = .manager
        case "manager-early": self = .managerEarly
        case "none": self = .unclassified
        default: self = .other(text)
        }
    }

    /// As logind writes it.
    public var text: String {
        switch self {
        case .user: "user"
        case .userEarly: "user-early"
        case .userIncomplete: "user-incomplete"
        case .userLight: "user-light"
        case .userEarlyLight: "user-early-light"
        case .greeter: "greeter"
        case .lockScreen: "lock-screen"
        case .background: "background"
        case .backgroundLight: "background-light"
        case .manager: "manager"
        case .managerEarly: "manager-early"
        case .unclassified: "none"
        case .other(let text): text
        }
    }

    public var description: String { text }

    /// The same text is the same class, however it was made (`.other("user")` is `.user`).
    public static func == (lhs: SessionClass, rhs: SessionClass) -> Bool { lhs.text == rhs.text }

    public func hash(into hasher: inout Hasher) { hasher.combine(text) }
}
