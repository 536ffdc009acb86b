import CurfewPOSIX
import CurfewCore
import CLinux
import Glibc

/// The system's desktop entries (`*.desktop` files), read once: which entry starts which program, so
/// a desktop app started from a terminal or a launcher without a scope is still reported by its
/// entry. Entries that run in a terminal (`Terminal=true`, such as `htop`) and hidden ones are left
/// out: those programs count as `terminal`. The children's own directories are not read (a child
/// could name any tool).
public enum DesktopEntries {
    public static let directories = [
        "/usr/share/applications", "/usr/local/share/applications", "/var/lib/flatpak/exports/share/applications",
    ]
    /// At most this many files are read, each up to 64 KiB.
    static let maxFiles = 4096

    /// Program file name → desktop entry id (the file name without `.desktop`); the first entry in
    /// directory and name order wins.
    public static func load(directories: [String] = directories) -> [String: String] {
        var programs: [String: String] = [:]
        var read = 0
        let reader = ProcReader(capacity: 64 * 1024)
        for directory in directories {
            for name in list(directory).sorted() where name.hasSuffix(".desktop") && !name.hasPrefix(".") {
                guard read < maxFiles else { return programs }
                read += 1
                guard let bytes = reader.read("\(directory)/\(name)", in: AT_FDCWD),
                    let program = program(of: String(decoding: bytes, as: UTF8.self))
                else { continue }
                if programs[program] == nil { programs[program] = String(name.dropLast(".desktop".count)) }
            }
        }
        return programs
    }

    /// The names in `directory` (readdir), at most `maxFiles`; none if it cannot be read.
    static func list(_ directory: String) -> [String] {
        guard var stream = try? DirectoryStream(path: directory) else { return [] }
        var names: [String] = []
        while names.count < maxFiles, let entry = stream.next() { names.append(entry.name) }
        return names
    }

    /// The program the `[Desktop Entry]` group's `Exec` starts; nil for terminal, hidden and
    /// non-application entries.
    static func program(of text: String) -> String? {
        var inEntry = false
        var exec: String?
        for line in text.split(separator: "\n") {
            if line.hasPrefix("[") {
                inEntry = line == "[Desktop Entry]"
                continue
            }
            guard inEntry, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingTrailingSpaces
            let value = String(line[line.index(after: equals)...].drop { $0 == " " })
            switch key {
            case "Exec": exec = value
            case "Terminal", "NoDisplay", "Hidden": if value == "true" { return nil }
            case "Type": if value != "Application" { return nil }
            default: break
            }
        }
        return exec.flatMap(AppCatalog.desktopExecProgram)
    }
}

extension Substring {
    fileprivate var trimmingTrailingSpaces: Substring {
        var copy = self
        while copy.last == " " { copy = copy.dropLast() }
        return copy
    }
}
