import SystemPackage
import CurfewPOSIX
import CLinux
import Glibc

/// The few calls to systemd's manager (org.freedesktop.systemd1) that the belt needs: when a unit
/// became active, and setting its `RuntimeMaxUSec` so systemd itself stops it at a deadline.
///
/// Not thread-safe: one owner (the enforcer thread).
public final class SystemdUnits {
    static let busName = "org.freedesktop.systemd1"
    static let managerPath = "/org/freedesktop/systemd1"
    static let managerInterface = "org.freedesktop.systemd1.Manager"
    static let unitInterface = "org.freedesktop.systemd1.Unit"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"
    /// The drop-in written when systemd refuses the property at run time (the name sorts late, so it
    /// wins over a packager's drop-ins).
    public static let dropInName = "50-curfew-runtime-max.conf"

    let bus: SDBus
    /// Where runtime drop-ins go (`/run/systemd/system`); tests may point it elsewhere.
    public let runtimeUnitDirectory: String
    /// Set once systemd refused `RuntimeMaxUSec` through SetUnitProperties (systemd 252, bookworm:
    /// "Cannot set property RuntimeMaxUSec, or unknown property"): drop-ins from then on.
    public private(set) var usesDropIns = false

    /// Connects to the bus at `busAddress`, or to the system bus when nil.
    public init(busAddress: String? = nil, runtimeUnitDirectory: String = "/run/systemd/system") throws {
        bus = try SDBus.open(address: busAddress)
        self.runtimeUnitDirectory = runtimeUnitDirectory
    }

    /// A unit name safe to use as a path component and on the bus (`session-12.scope`), or nil.
    public static func sessionScope(sessionID: String) -> String? {
        guard !sessionID.isEmpty, sessionID.count <= 64,
            sessionID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) })
        else { return nil }
        return "session-\(sessionID).scope"
    }

    /// CLOCK_MONOTONIC microseconds at which `unit` last became active
    /// (Manager.GetUnit, then the unit's `ActiveEnterTimestampMonotonic`); nil when it is not loaded.
    public func activeSinceMonotonicMicroseconds(unit: String) throws -> UInt64? {
        let path: String
        do {
            let reply = try bus.callMethod(
                destination: Self.busName, path: Self.managerPath, interface: Self.managerInterface, member: "GetUnit",
                arguments: [.string(unit)])
            guard let object = reply.first?.stringValue else { return nil }
            path = object
        } catch {
            if error.busErrorName == "org.freedesktop.systemd1.NoSuchUnit" { return nil }
            throw error
        }
        let reply = try bus.callMethod(
            destination: Self.busName, path: path, interface: Self.propertiesInterface, member: "Get",
            arguments: [.string(Self.unitInterface), .string("ActiveEnterTimestampMonotonic")])
        guard case .variant(.uint64(let since))? = reply.first else {
            throw LinuxSystemdError(operation: "parse ActiveEnterTimestampMonotonic of \(unit)", errno: .badMessage)
        }
        return since == 0 ? nil : since
    }

    /// Makes systemd stop `unit` once it has been active `microseconds` (nil: never). Tries
    /// Manager.SetUnitProperties(unit, runtime = true, [("RuntimeMaxUSec", t)]); where systemd refuses to
    /// change the property of a running unit (252 does, for scopes), writes the runtime drop-in
    /// `<runtimeUnitDirectory>/<unit>.d/50-curfew-runtime-max.conf` (`[Scope] RuntimeMaxSec=`) and asks
    /// for a reload (Manager.Reload), which is what `systemctl set-property` would have done.
    public func setRuntimeMax(unit: String, microseconds: UInt64?) throws {
        // systemd's "infinity" is UINT64_MAX.
        let value = microseconds ?? UInt64.max
        if !usesDropIns {
            do {
                _ = try bus.callMethod(
                    destination: Self.busName, path: Self.managerPath, interface: Self.managerInterface,
                    member: "SetUnitProperties",
                    arguments: [
                        .string(unit), .bool(true),
                        .array(elementSignature: "(sv)", [.structure([.string("RuntimeMaxUSec"), .variant(.uint64(value))])]),
                    ])
                return
            } catch {
                guard error.busErrorName == "org.freedesktop.DBus.Error.PropertyReadOnly" else { throw error }
                usesDropIns = true
            }
        }
        try writeDropIn(unit: unit, text: "[Scope]\nRuntimeMaxSec=\(microseconds.map { "\($0)us" } ?? "infinity")\n")
        _ = try bus.callMethod(
            destination: Self.busName, path: Self.managerPath, interface: Self.managerInterface, member: "Reload",
            timeout: .seconds(60))
    }

    /// Whether Curfew's drop-in for `unit` exists (an agent before this one capped it).
    public static func hasDropIn(unit: String, runtimeUnitDirectory: String = "/run/systemd/system") -> Bool {
        access("\(runtimeUnitDirectory)/\(unit).d/\(dropInName)", F_OK) == 0
    }

    /// Removes Curfew's drop-ins for session scopes not in `keeping` (sessions that ended): their unit
    /// is gone, so no reload is needed. Returns the units whose drop-in was removed.
    @discardableResult
    public func removeDropIns(exceptFor keeping: Set<String>) -> [String] {
        var names: [String] = []
        do {
            var directory = try DirectoryStream(path: runtimeUnitDirectory)
            while let entry = directory.next() {
                let name = entry.name
                if name.hasPrefix("session-") && name.hasSuffix(".scope.d") { names.append(String(name.dropLast(2))) }
            }
        } catch {
            return []
        }
        var removed: [String] = []
        for unit in names where !keeping.contains(unit) {
            let directory = "\(runtimeUnitDirectory)/\(unit).d"
            if unlink("\(directory)/\(Self.dropInName)") == 0 {
                rmdir(directory)
                removed.append(unit)
            }
        }
        return removed
    }

    private func writeDropIn(unit: String, text: String) throws {
        let directory = "\(runtimeUnitDirectory)/\(unit).d"
        for created in [runtimeUnitDirectory, directory] {
            if case .failure(let error) = valueOrErrno({ mkdir(created, 0o755) }), error != .fileExists {
                throw LinuxSystemdError(operation: "mkdir \(created)", errno: error)
            }
        }
        // Written beside and renamed: systemd never reads half a file.
        let path = "\(directory)/\(Self.dropInName)"
        let temporary = path + ".tmp"
        let fd: FileDescriptor
        switch valueOrErrno({ open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644) }) {
        case .success(let opened): fd = FileDescriptor(rawValue: opened)
        case .failure(let error): throw LinuxSystemdError(operation: "open \(temporary)", errno: error)
        }
        let bytes = Array(text.utf8)
        let written = valueOrErrno { bytes.withUnsafeBytes { write(fd.rawValue, $0.baseAddress, $0.count) } }
        try? fd.close()
        var failure: LinuxSystemdError?
        switch written {
        case .failure(let error): failure = LinuxSystemdError(operation: "write \(temporary)", errno: error)
        case .success(let count) where count != bytes.count: failure = LinuxSystemdError(operation: "write \(temporary)", errno: .ioError)
        case .success:
            if case .failure(let error) = valueOrErrno({ rename(temporary, path) }) {
                failure = LinuxSystemdError(operation: "rename \(temporary)", errno: error)
            }
        }
        if let failure {
            unlink(temporary)
            throw failure
        }
    }
}
