import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Timekpr-nExT's PlayTime scanner, run by `Tests/Bench/timekpr_playtime.py` under Debian's
/// /usr/bin/python3 (the script downloads and unpacks the `timekpr-next` package and imports it).
struct TimekprProbe {
    struct Figures {
        var version: String
        var coldWall, coldCPU: Double
        var medianWall, p90Wall, maxWall: Double
        var medianCPU: Double
        var scans: Int
        /// Processes in its cache, and those of the bench account.
        var cachedProcesses: Int
        var userProcesses: Int
        var matchedProcesses: Int
    }

    static let python = "/usr/bin/python3"
    let script = "\(packageRoot)/Tests/Bench/timekpr_playtime.py"
    let workDirectory: String

    /// Downloads and unpacks the package once; returns its version.
    func prepare() throws -> String {
        guard access(Self.python, X_OK) == 0 else { throw BenchFailure("\(Self.python) not found (apt-get install python3)") }
        guard access(script, R_OK) == 0 else { throw BenchFailure("\(script) not found") }
        let object = try invoke(["--prepare-only"])
        return object["version"] as? String ?? "?"
    }

    /// One cold scan, then `scans` more, over the live process table; `masks` are the PlayTime
    /// activities of `uid`.
    func measure(uid: UInt32, masks: [String], scans: Int) throws -> Figures {
        let object = try invoke(["--uid", "\(uid)", "--scans", "\(scans)"] + masks.flatMap { ["--mask", $0] })
        func number(_ key: String) -> Double { (object[key] as? NSNumber)?.doubleValue ?? .nan }
        return Figures(
            version: object["version"] as? String ?? "?",
            coldWall: number("cold_ms"), coldCPU: number("cold_cpu_ms"),
            medianWall: number("median_ms"), p90Wall: number("p90_ms"), maxWall: number("max_ms"),
            medianCPU: number("median_cpu_ms"), scans: Int(number("scans")),
            cachedProcesses: Int(number("cached_processes")), userProcesses: Int(number("user_processes")),
            matchedProcesses: Int(number("matched_processes")))
    }

    private func invoke(_ arguments: [String]) throws -> [String: Any] {
        // Debian's interpreter, isolated (-I) from the caller's Python settings: a pyenv build may be
        // first on PATH and PYTHONPATH may point at it.
        let result = capture(
            Self.python, ["-I", "-B", script, "--work-dir", workDirectory, "--json"] + arguments,
            fullEnvironment: childEnvironment(unset: ["PYTHONPATH", "PYTHONHOME"]), in: workDirectory)
        let line = result.output.split(separator: "\n").last(where: { $0.hasPrefix("{") }).map(String.init) ?? ""
        guard let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] else {
            throw BenchFailure("timekpr_playtime.py failed (exit \(result.status)): \(result.output.suffix(400))")
        }
        if let error = object["error"] as? String { throw BenchFailure(error) }
        return object
    }
}
