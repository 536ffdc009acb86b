import SystemPackage
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import CurfewCore
import CurfewPOSIX
import Synchronization

/// The system's tz database as CurfewCore's zone source: `<directory>/<name>` (Debian's `tzdata`,
/// `/usr/share/zoneinfo`, or `$TZDIR`), read as TZif and kept per zone. A zone's file is looked at
/// again (stat: device, inode, size, mtime, ctime) at most once per `recheckSeconds` when the zone is
/// asked for, and read again when it changed: a tzdata upgrade reaches a running agent within a
/// minute, without a restart, and a steady agent costs one stat per zone and minute.
public final class SystemZones: ZoneSource, Sendable {
    public let directory: String
    public let recheckSeconds: Int64
    /// `TZ` as the program started with it (nil: unset), for the computer's own zone.
    let tzVariable: String?
    let localtimePath: String

    private struct Entry {
        var zone: ZoneRules?
        var identity: FileIdentity?
        var checked: Int64
    }

    private let cache = Mutex<[String: Entry]>([:])

    public init(
        directory: String? = nil, recheckSeconds: Int64 = 60, tz: String? = SystemZones.environment("TZ"),
        localtime: String = "/etc/localtime"
    ) {
        let tzdir = SystemZones.environment("TZDIR")
        self.directory = directory ?? (tzdir.map { $0.isEmpty ? nil : $0 } ?? nil) ?? "/usr/share/zoneinfo"
        self.recheckSeconds = recheckSeconds
        self.tzVariable = tz
        self.localtimePath = localtime
    }

    /// Installs the system's database as the zone source of this program (once, at start-up).
    public static func install() { ZoneDatabase.install(SystemZones()) }

    public static func environment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        return String(cString: value)
    }

    public func zone(named name: String) -> ZoneRules? {
        guard ZoneRules.isValidName(name) else { return nil }
        return cached(key: name, path: "\(directory)/\(name)", identifier: name)
    }

    /// `TZ` if it names a zone of the database (`Europe/Berlin` or `:Europe/Berlin`) or a file, else
    /// `/etc/localtime` (named by its link's path under a `zoneinfo` directory), else UTC.
    public func systemZone() -> ZoneRules {
        if var name = tzVariable, !name.isEmpty {
            if name.hasPrefix(":") { name.removeFirst() }
            if let zone = zone(named: name) { return zone }
            if name.hasPrefix("/"), let zone = cached(key: "\0tz", path: name, identifier: name) { return zone }
        }
        // The zone /etc/localtime is, named as it links (read with the file, not on every call): its
        // own bytes, even when TZDIR points elsewhere.
        let path = localtimePath
        let name = {
            SystemZones.readLink(path).flatMap(SystemZones.nameAfterZoneinfo).flatMap { ZoneRules.isValidName($0) ? $0 : nil }
        }
        return cached(key: "\0localtime", path: path, identifier: name() ?? "localtime") ?? .utc
    }

    private func cached(key: String, path: String, identifier: @autoclosure () -> String) -> ZoneRules? {
        let now = SystemZones.monotonicSeconds()
        if let entry = cache.withLock({ $0[key] }), now - entry.checked < recheckSeconds { return entry.zone }
        let identity = SystemZones.identity(path)
        if let entry = cache.withLock({ $0[key] }), entry.identity == identity, identity != nil {
            cache.withLock { $0[key]?.checked = now }
            return entry.zone
        }
        var zone: ZoneRules?
        if identity != nil, let bytes = SystemZones.readFile(path), let data = try? ZoneData.parse(bytes) {
            zone = ZoneRules(identifier: identifier(), data: data)
        }
        cache.withLock { $0[key] = Entry(zone: zone, identity: identity, checked: now) }
        return zone
    }

    /// Forgets every zone (tests).
    public func flush() { cache.withLock { $0.removeAll() } }

    static func monotonicSeconds() -> Int64 { SystemClock.monotonicNanoseconds() / 1_000_000_000 }

    /// The file's identity, following links (tzdata's zones are often links), nil if it is not a
    /// regular file.
    static func identity(_ path: String) -> FileIdentity? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return FileIdentity(
            device: Int64(info.st_dev), inode: Int64(info.st_ino), size: Int64(info.st_size),
            mtimeNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
            ctimeNanoseconds: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
    }

    /// A regular file of at most 1 MiB (real zones are a few KiB), without blocking on a FIFO.
    static func readFile(_ path: String) -> [UInt8]? {
        let opened = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard opened >= 0 else { return nil }
        let file = FileDescriptor(rawValue: opened)
        defer { try? file.close() }
        let fd = file.rawValue
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= 1 << 20 else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var total = 0
        while total < bytes.count {
            guard case .success(let count) = valueOrErrno({ bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + total, $0.count - total) } }),
                count > 0
            else { return nil }
            total += count
        }
        return bytes
    }

    /// `Europe/Berlin` from `../usr/share/zoneinfo/Europe/Berlin`.
    static func nameAfterZoneinfo(_ path: String) -> String? {
        let components = path.split(separator: "/")
        guard let index = components.lastIndex(of: "zoneinfo"), index + 1 < components.count else { return nil }
        return components[(index + 1)...].joined(separator: "/")
    }

    static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
