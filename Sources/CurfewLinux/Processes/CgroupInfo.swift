import CurfewCore

/// Where a process sits in the cgroup tree, and the app ids systemd, flatpak and snapd encode in the
/// unit names there (docs/design.md, "Apps": systemd scope, flatpak and snap application ids).
public struct CgroupInfo: Sendable, Equatable {
    /// The cgroup path, e.g. `/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-steam-4242.scope`;
    /// empty when the file names none.
    public var path: String
    /// The innermost component that is a scope or service, e.g. `app-gnome-steam-4242.scope`.
    public var systemdUnit: String?
    /// From `app-flatpak-<id>-<pid>.scope` (flatpak escapes the id the systemd way, `-` as `\x2d`).
    public var flatpakId: String?
    /// From `snap.<name>.<app>-<uuid>.scope`, `snap.<name>.<app>.<uuid>.scope`, `snap.<name>.hook.<hook>-<uuid>.scope`
    /// or `snap.<name>.<app>.service`; a parallel install's instance key (`firefox_beta`) is dropped.
    public var snapName: String?

    public init(path: String, systemdUnit: String? = nil, flatpakId: String? = nil, snapName: String? = nil) {
        self.path = path
        self.systemdUnit = systemdUnit
        self.flatpakId = flatpakId
        self.snapName = snapName
    }

    /// Reads `/proc/PID/cgroup` contents: lines `hierarchy-id:controllers:path`. The unified
    /// hierarchy's `0::` line is used; on a cgroup v1 (legacy) system, or a hybrid one where the
    /// unified line is only `/`, the `name=systemd` line is.
    public static func parse(_ contents: String) -> CgroupInfo {
        var unified: Substring?
        var systemd: Substring?
        for line in contents.split(separator: "\n", omittingEmptySubsequences: true) {
            // The path may itself contain ':', so split off only the first two fields.
            guard let first = line.firstIndex(of: ":") else { continue }
            let rest = line[line.index(after: first)...]
            guard let second = rest.firstIndex(of: ":") else { continue }
            let hierarchy = line[..<first]
            let controllers = rest[..<second]
            let path = rest[rest.index(after: second)...]
            if hierarchy == "0" && controllers.isEmpty {
                unified = path
            } else if controllers.split(separator: ",").contains("name=systemd") {
                systemd = path
            }
        }
        let chosen: Substring
        if let unified, unified != "/" || systemd == nil {
            chosen = unified
        } else {
            chosen = systemd ?? unified ?? ""
        }
        return CgroupInfo(path: String(chosen))
            .withUnit(chosen.split(separator: "/").last { $0.hasSuffix(".scope") || $0.hasSuffix(".service") })
    }

    private func withUnit(_ unit: Substring?) -> CgroupInfo {
        var info = self
        guard let unit else { return info }
        info.systemdUnit = String(unit)
        info.flatpakId = Self.flatpakId(unit: unit)
        info.snapName = Self.snapName(unit: unit)
        return info
    }

    /// `app-flatpak-org.mozilla.firefox-12345.scope` → `org.mozilla.firefox`.
    static func flatpakId(unit: Substring) -> String? {
        let prefix = "app-flatpak-"
        let suffix = ".scope"
        guard unit.hasPrefix(prefix), unit.hasSuffix(suffix) else { return nil }
        let middle = unit.dropFirst(prefix.count).dropLast(suffix.count)
        // The last `-` separates the launcher's pid; the id's own dashes are escaped as \x2d.
        guard let dash = middle.lastIndex(of: "-") else { return nil }
        let number = middle[middle.index(after: dash)...]
        guard !number.isEmpty, number.allSatisfy(\.isASCIIDigit) else { return nil }
        let id = AppCatalog.unescapeUnit(middle[..<dash])
        return id.isEmpty ? nil : id
    }

    /// `snap.firefox.firefox-2b3c….scope` → `firefox`.
    static func snapName(unit: Substring) -> String? {
        guard unit.hasPrefix("snap."), unit.hasSuffix(".scope") || unit.hasSuffix(".service") else { return nil }
        let parts = unit.split(separator: ".", omittingEmptySubsequences: false)
        // snap, name, app (or "hook"), ..., scope|service
        guard parts.count >= 4 else { return nil }
        let instance = parts[1]
        let name = instance.split(separator: "_", maxSplits: 1, omittingEmptySubsequences: false)[0]
        guard !name.isEmpty else { return nil }
        return String(name)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isWholeNumber }
}
