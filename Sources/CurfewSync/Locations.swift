import CurfewCore

/// Where Curfew keeps things, as docs/design.md gives the defaults: a flag wins, then the environment
/// variable (when not empty), then the default. The CLI and the agent resolve them the same way.
public enum Locations {
    public static func stateDirectory(_ flag: String?, environment: [String: String]) -> String {
        flag ?? nonEmpty(environment["CURFEW_STATE_DIR"]) ?? "/var/lib/curfew"
    }

    public static func sharedDirectory(_ flag: String?, stateDirectory: String, environment: [String: String]) -> String {
        flag ?? nonEmpty(environment["CURFEW_SHARED_DIR"]) ?? "\(stateDirectory)/shared"
    }

    /// The agent's socket.
    public static func socket(_ flag: String?, environment: [String: String]) -> String {
        flag ?? nonEmpty(environment["CURFEW_SOCKET"]) ?? "/run/curfew/curfewd.sock"
    }

    private static func nonEmpty(_ value: String?) -> String? { value?.isEmpty == false ? value : nil }
}

/// `/etc/default/curfew` (a conffile of the package): the administrator's settings, read by the agent
/// (systemd also passes it as its EnvironmentFile) and by `check-login`, which PAM runs without that
/// environment. `CURFEW_DEFAULTS_FILE` names another file (tests).
public enum DefaultsFile {
    public static let path = "/etc/default/curfew"

    /// What the file sets: `KEY=value` lines as systemd's EnvironmentFile reads them (blank lines and
    /// `#` comments skipped, a value in single or double quotes unquoted). At most 64 KiB are read.
    public static func parse(_ text: String) -> [String: String] {
        var values: [String: String] = [:]
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = rawLine.drop { $0 == " " || $0 == "\t" }
            guard !line.isEmpty, line.first != "#", line.first != ";", let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingSpaces
            var value = line[line.index(after: equals)...].trimmingSpaces
            if value.count >= 2, let first = value.first, first == "\"" || first == "'", value.last == first {
                value = value.dropFirst().dropLast()
            }
            guard !key.isEmpty, key.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else { continue }
            values[String(key)] = String(value)
        }
        return values
    }

    /// The file's settings, or none when it is missing or unreadable.
    public static func read(environment: [String: String]) -> [String: String] {
        let file = environment["CURFEW_DEFAULTS_FILE"].flatMap { $0.isEmpty ? nil : $0 } ?? path
        guard let bytes = try? Files.readRegularFile(file, maxBytes: 64 * 1024) else { return [:] }
        return parse(String(decoding: bytes, as: UTF8.self))
    }

    public enum FailMode: String, Sendable {
        case open, closed
    }

    /// `CURFEW_FAIL_MODE` from the environment when set, else from the file; `closed` by default.
    /// Anything but `open` or `closed` is an error naming the value (the caller keeps `closed`).
    public static func failMode(environment: [String: String]) -> (mode: FailMode, error: String?) {
        let value = environment["CURFEW_FAIL_MODE"].flatMap { $0.isEmpty ? nil : $0 }
            ?? read(environment: environment)["CURFEW_FAIL_MODE"] ?? "closed"
        guard let mode = FailMode(rawValue: value) else {
            return (.closed, "CURFEW_FAIL_MODE must be open or closed, got \(quoted(value)); failing closed")
        }
        return (mode, nil)
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        let start = drop { $0 == " " || $0 == "\t" }
        var end = start
        while let last = end.last, last == " " || last == "\t" || last == "\r" { end = end.dropLast() }
        return end
    }
}
