import SystemPackage
import CurfewPOSIX
import CSystemd
import Glibc
import CLinux
import Synchronization

/// One logind session, as the Session object's properties describe it.
public struct LoginSession: Sendable, Equatable {
    public var id: String
    public var objectPath: String
    public var uid: UInt32
    public var userName: String
    public var active: Bool
    public var lockedHint: Bool
    public var idleHint: Bool
    /// "tty", "x11", "wayland", "mir" or "unspecified".
    public var type: String
    /// logind's `Class`.
    public var sessionClass: SessionClass
    public var tty: String
    public var display: String
    public var remote: Bool
    /// The seat id, empty for sessions without a seat (ssh, cron).
    public var seat: String
    /// The PID of the process that registered the session.
    public var leader: UInt32
    /// "online", "active" or "closing".
    public var state: String

    public init(
        id: String, objectPath: String, uid: UInt32, userName: String, active: Bool, lockedHint: Bool,
        idleHint: Bool, type: String, sessionClass: SessionClass, tty: String, display: String, remote: Bool,
        seat: String, leader: UInt32, state: String
    ) {
        self.id = id
        self.objectPath = objectPath
        self.uid = uid
        self.userName = userName
        self.active = active
        self.lockedHint = lockedHint
        self.idleHint = idleHint
        self.type = type
        self.sessionClass = sessionClass
        self.tty = tty
        self.display = display
        self.remote = remote
        self.seat = seat
        self.leader = leader
        self.state = state
    }

    /// Screen time counts only for a foreground user session that is neither locked nor idle; greeter and
    /// lock-screen sessions never count.
    public var counts: Bool { active && !lockedHint && !idleHint && sessionClass == .user }

    /// Whether LockSession can lock it: a graphical session (x11, wayland, mir), whose desktop runs a
    /// screen locker. A text console or an ssh login (type tty or unspecified) has none.
    public var canBeLocked: Bool { ["x11", "wayland", "mir"].contains(type) }

    /// From the `a{sv}` of `org.freedesktop.DBus.Properties.GetAll` on `org.freedesktop.login1.Session`.
    /// Properties an older logind lacks read as empty, false or 0.
    init(objectPath: String, properties: [String: SDBusValue]) {
        func string(_ name: String) -> String { properties[name]?.stringValue ?? "" }
        func flag(_ name: String) -> Bool { properties[name]?.boolValue ?? false }
        let id = string("Id")
        self.init(
            id: id.isEmpty ? String(objectPath.split(separator: "/").last ?? "") : id,
            objectPath: objectPath,
            uid: properties["User"]?.structureFields?.first?.uint32Value ?? 0,
            userName: string("Name"),
            active: flag("Active"),
            lockedHint: flag("LockedHint"),
            idleHint: flag("IdleHint"),
            type: string("Type"),
            sessionClass: SessionClass(string("Class")),
            tty: string("TTY"),
            display: string("Display"),
            remote: flag("Remote"),
            seat: properties["Seat"]?.structureFields?.first?.stringValue ?? "",
            leader: properties["Leader"]?.uint32Value ?? 0,
            state: string("State"))
    }
}

/// A change logind announced. Property changes carry only the object path: read the session again.
public enum LogindEvent: Sendable, Equatable {
    case sessionNew(id: String, objectPath: String)
    case sessionRemoved(id: String, objectPath: String)
    case propertiesChanged(objectPath: String)
    /// true before suspend, false after resume.
    case prepareForSleep(Bool)
}

/// systemd-logind over D-Bus (`org.freedesktop.login1`).
///
/// Two connections: one for method calls, one that receives logind's signals, so that a thread blocked in
/// `nextEvents` never delays `lockSession` on another thread. Each sits behind its own `Mutex`.
public final class LogindClient: Sendable {
    static let busName = "org.freedesktop.login1"
    static let managerPath = "/org/freedesktop/login1"
    static let managerInterface = "org.freedesktop.login1.Manager"
    static let sessionInterface = "org.freedesktop.login1.Session"
    static let sessionPathPrefix = "/org/freedesktop/login1/session/"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"

    private let calls: Mutex<SDBus>
    private let events: Mutex<SignalConnection>

    /// Connects twice to the bus at `busAddress`, or to the system bus when nil, and subscribes to
    /// SessionNew, SessionRemoved, PrepareForSleep and PropertiesChanged of session objects.
    public init(busAddress: String? = nil) throws {
        calls = Mutex(try SDBus.open(address: busAddress))
        events = Mutex(try SignalConnection(bus: SDBus.open(address: busAddress)))
    }

    /// True when the machine runs systemd and logind: `sd_booted()` (which checks /run/systemd/system)
    /// and logind's seat directory /run/systemd/seats (`access(2)`).
    public static func isAvailable() -> Bool {
        sd_booted() > 0 && access("/run/systemd/seats", F_OK) == 0
    }

    /// Every session (Manager.ListSessions, then Properties.GetAll on each). A session that ends between
    /// the two calls is left out.
    public func sessions() throws -> [LoginSession] {
        try calls.withLock { bus throws(LinuxSystemdError) -> [LoginSession] in
            let reply = try bus.callMethod(
                destination: Self.busName, path: Self.managerPath, interface: Self.managerInterface,
                member: "ListSessions")
            guard case .array(_, let rows)? = reply.first else {
                throw LinuxSystemdError(operation: "parse ListSessions reply", errno: .badMessage)
            }
            var sessions: [LoginSession] = []
            for row in rows {
                // (session id, uid, user name, seat id, object path)
                guard let fields = row.structureFields, fields.count == 5, let path = fields[4].stringValue else {
                    throw LinuxSystemdError(operation: "parse ListSessions reply", errno: .badMessage)
                }
                if let session = try Self.readSession(bus, objectPath: path) { sessions.append(session) }
            }
            return sessions
        }
    }

    /// The session at `objectPath`, or nil when logind has no such session.
    public func session(objectPath: String) throws -> LoginSession? {
        try calls.withLock { bus throws(LinuxSystemdError) -> LoginSession? in
            try Self.readSession(bus, objectPath: objectPath)
        }
    }

    /// Asks the session to show its screen lock (Manager.LockSession).
    public func lockSession(_ id: String) throws {
        try callManager("LockSession", [.string(id)])
    }

    /// Ends the session and kills its processes (Manager.TerminateSession).
    public func terminateSession(_ id: String) throws {
        try callManager("TerminateSession", [.string(id)])
    }

    /// Sends `signal` to every process of the session (Manager.KillSession with who = "all").
    public func killSession(_ id: String, signal: Int32) throws {
        try callManager("KillSession", [.string(id), .string("all"), .int32(signal)])
    }

    /// Sends `signal` to every process of the user (Manager.KillUser; signature "ui": it always means all
    /// of the user's processes).
    public func killUser(_ uid: UInt32, signal: Int32) throws {
        try ignoringNoSuchUser { try callManager("KillUser", [.uint32(uid), .int32(signal)]) }
    }

    /// Ends every session of the user and stops their service manager, `user@UID.service`, with all
    /// it started, lingering services included (Manager.TerminateUser). Nothing to do when logind
    /// knows no such user (no session and no linger).
    public func terminateUser(_ uid: UInt32) throws {
        try ignoringNoSuchUser { try callManager("TerminateUser", [.uint32(uid)]) }
    }

    /// Turns the user's linger on or off (Manager.SetUserLinger(uid, enable, interactive = false);
    /// root may do it for anyone).
    public func setUserLinger(_ uid: UInt32, enabled: Bool) throws {
        try callManager("SetUserLinger", [.uint32(uid), .bool(enabled), .bool(false)])
    }

    /// Whether the user lingers: logind keeps one file per lingering user in `/var/lib/systemd/linger`
    /// (and has no user object for a user who lingers with no manager running, so the file is the truth).
    public static func lingers(userName: String, directory: String = "/var/lib/systemd/linger") -> Bool {
        !userName.isEmpty && !userName.contains("/") && access("\(directory)/\(userName)", F_OK) == 0
    }

    private func ignoringNoSuchUser(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as LinuxSystemdError where error.busErrorName == "org.freedesktop.login1.NoSuchUser" {
            return
        }
    }

    /// Waits up to `timeoutMilliseconds` (negative: forever) for logind's signals and returns those that
    /// arrived: runs `sd_bus_process` until idle and, when that found nothing, `sd_bus_wait` once and
    /// processes again. An empty result means a timeout or only unrelated traffic; call again.
    /// Meant for one dedicated thread; throws when the bus connection is lost. It also returns (with
    /// what arrived, maybe nothing) as soon as one of `descriptors` is readable: the caller's stop.
    public func nextEvents(timeoutMilliseconds: Int32, orUntilReadable descriptors: [FileDescriptor?] = []) throws -> [LogindEvent] {
        try events.withLock { connection throws(LinuxSystemdError) -> [LogindEvent] in
            try connection.nextEvents(
                timeout: timeoutMilliseconds < 0 ? nil : .milliseconds(Int64(timeoutMilliseconds)), orUntilReadable: descriptors)
        }
    }

    /// The unique bus name of the signal connection (tests send it unicast signals).
    func signalConnectionUniqueName() throws -> String {
        try events.withLock { connection throws(LinuxSystemdError) -> String in try connection.bus.uniqueName() }
    }

    private func callManager(_ member: String, _ arguments: [SDBusValue]) throws {
        try calls.withLock { bus throws(LinuxSystemdError) in
            _ = try bus.callMethod(
                destination: Self.busName, path: Self.managerPath, interface: Self.managerInterface,
                member: member, arguments: arguments)
        }
    }

    /// D-Bus errors that mean "no such session", from logind (UnknownObject, NoSuchSession) and from other
    /// implementations of the interface (UnknownMethod, UnknownInterface).
    private static let missingSessionErrors: Set<String> = [
        "org.freedesktop.DBus.Error.UnknownObject",
        "org.freedesktop.DBus.Error.UnknownMethod",
        "org.freedesktop.DBus.Error.UnknownInterface",
        "org.freedesktop.login1.NoSuchSession",
    ]

    private static func readSession(_ bus: SDBus, objectPath: String) throws(LinuxSystemdError) -> LoginSession? {
        let reply: [SDBusValue]
        do {
            reply = try bus.callMethod(
                destination: busName, path: objectPath, interface: propertiesInterface, member: "GetAll",
                arguments: [.string(sessionInterface)])
        } catch {
            if let name = error.busErrorName, missingSessionErrors.contains(name) { return nil }
            throw error
        }
        guard let properties = reply.first?.stringKeyedDictionary else {
            throw LinuxSystemdError(operation: "parse GetAll reply for \(objectPath)", errno: .badMessage)
        }
        return LoginSession(objectPath: objectPath, properties: properties)
    }
}

/// The connection that receives logind's signals, and what its match handlers collected.
private final class SignalConnection {
    /// A signal as received, before its sender is checked.
    struct Received {
        var event: LogindEvent
        var sender: String?
    }

    let bus: SDBus
    /// Filled by the match handlers while `process()` runs, emptied by `nextEvents`.
    private var received: [Received] = []
    /// The unique name that owns org.freedesktop.login1, as last looked up.
    private var logindOwner: String?

    init(bus: SDBus) throws(LinuxSystemdError) {
        self.bus = bus
        let sender = "sender='\(LogindClient.busName)'"
        let manager = "\(sender),path='\(LogindClient.managerPath)',interface='\(LogindClient.managerInterface)'"
        // The handlers capture the connection weakly: the bus (and so the handlers) is owned by it.
        try bus.addMatch("type='signal',\(manager),member='SessionNew'") { [weak self] message in
            guard let (id, path) = Self.idAndPath(message) else { return }
            self?.received.append(Received(event: .sessionNew(id: id, objectPath: path), sender: message.sender))
        }
        try bus.addMatch("type='signal',\(manager),member='SessionRemoved'") { [weak self] message in
            guard let (id, path) = Self.idAndPath(message) else { return }
            self?.received.append(Received(event: .sessionRemoved(id: id, objectPath: path), sender: message.sender))
        }
        try bus.addMatch("type='signal',\(manager),member='PrepareForSleep'") { [weak self] message in
            guard let start = (try? message.readAll())?.first?.boolValue else { return }
            self?.received.append(Received(event: .prepareForSleep(start), sender: message.sender))
        }
        try bus.addMatch(
            "type='signal',\(sender),interface='\(LogindClient.propertiesInterface)',member='PropertiesChanged',"
                + "path_namespace='/org/freedesktop/login1/session',arg0='\(LogindClient.sessionInterface)'"
        ) { [weak self] message in
            guard let path = message.path, path.hasPrefix(LogindClient.sessionPathPrefix) else { return }
            self?.received.append(Received(event: .propertiesChanged(objectPath: path), sender: message.sender))
        }
    }

    func nextEvents(timeout: Duration?, orUntilReadable descriptors: [FileDescriptor?] = []) throws(LinuxSystemdError) -> [LogindEvent] {
        try bus.processUntilIdle()
        if received.isEmpty {
            if descriptors.isEmpty { try bus.wait(timeout: timeout) } else { try bus.wait(timeout: timeout, orUntilReadable: descriptors) }
            try bus.processUntilIdle()
        }
        let batch = received
        received.removeAll()
        var events: [LogindEvent] = []
        for item in batch where try isFromLogind(item.sender) { events.append(item.event) }
        return events
    }

    /// The bus daemon routes broadcast signals by the sender named in the match rule, but sd-bus accepts
    /// any unique-name sender locally, and a unicast signal addressed to this connection bypasses the
    /// rules. Only the current owner of org.freedesktop.login1 may move the clock (PrepareForSleep).
    private func isFromLogind(_ sender: String?) throws(LinuxSystemdError) -> Bool {
        guard let sender else { return false }
        if sender == logindOwner { return true }
        // logind may have restarted under a new unique name: look again.
        do {
            let reply = try bus.callMethod(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "GetNameOwner",
                arguments: [.string(LogindClient.busName)])
            logindOwner = reply.first?.stringValue
        } catch {
            guard error.busErrorName == "org.freedesktop.DBus.Error.NameHasNoOwner" else { throw error }
            logindOwner = nil
        }
        return sender == logindOwner
    }

    private static func idAndPath(_ message: SDBusMessage) -> (String, String)? {
        guard let values = try? message.readAll(), values.count == 2,
            let id = values[0].stringValue, let path = values[1].stringValue
        else { return nil }
        return (id, path)
    }
}

@available(*, unavailable, message: "used only behind LogindClient's Mutex")
extension SignalConnection: Sendable {}
