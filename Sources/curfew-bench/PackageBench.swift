import CurfewCore
import Foundation

// The package's figures (docs/performance.md): the .deb's size and its Installed-Size, and the time-zone rules
// (the system's TZif files, read by CurfewCore) against Foundation's ICU-backed TimeZone for the
// same lookups. The agent's RSS at 2,000 processes is the tracking section's ("agent at 2000
// processes"). What is left in the program by library: packaging/deb/size-by-library.py, run here.

/// `$CURFEW_DEB`, else the newest .build/deb/curfew_*.deb (`make deb`).
func packageUnderBench() -> String? {
    if let given = ProcessInfo.processInfo.environment["CURFEW_DEB"], !given.isEmpty { return given }
    let directory = ".build/deb"
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    return names.filter { $0.hasPrefix("curfew_") && $0.hasSuffix(".deb") }.sorted().last.map { "\(directory)/\($0)" }
}

/// What `path` with `arguments` writes on its standard output, once it has exited.
func standardOutput(_ path: String, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return output
}

func runPackageBenchmarks() throws {
    print("package and time zones")
    if let deb = packageUnderBench(), let size = try? FileManager.default.attributesOfItem(atPath: deb)[.size] as? Int {
        let output = try standardOutput("/usr/bin/dpkg-deb", ["-f", deb, "Installed-Size"])
        let installedKiB = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        print(
            "\(deb): \(format(Double(size) / 1_048_576)) MiB to download (target < 20 MB), "
                + "installed \(format(Double(installedKiB) / 1024)) MiB (target < 75 MB)")
    } else {
        print("no .deb (make deb, or CURFEW_DEB=path): package sizes not measured")
    }
    // What is left in the package's one program, by library (its unstripped build, `make static`).
    let program = ".build/container-static/release/curfew-multicall"
    if FileManager.default.isExecutableFile(atPath: program) {
        let output = try standardOutput("/usr/bin/python3", ["packaging/deb/size-by-library.py", program])
        print("\(program) by library (packaging/deb/size-by-library.py):")
        for line in output.split(separator: "\n") { print("  \(line)") }
    } else {
        print("no \(program) (make static): its size by library not measured")
    }

    // The offset at an instant, a year of hours across DST changes, in the zone a policy names.
    guard let zone = ZoneRules(identifier: "Europe/Berlin"), let icu = TimeZone(identifier: "Europe/Berlin") else {
        throw BenchFailure("Europe/Berlin is missing from the tz database")
    }
    let start: Int64 = 1_767_225_600  // 2026-01-01
    let lookups = 365 * 24 * 20
    var sum: Int64 = 0
    let ownStart = clock.now
    for index in 0..<lookups { sum &+= zone.offset(at: start + Int64(index) * 180) }
    let own = milliseconds(clock.now - ownStart)
    var icuSum: Int64 = 0
    let icuStart = clock.now
    for index in 0..<lookups {
        icuSum &+= Int64(icu.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(start + Int64(index) * 180))))
    }
    let foundation = milliseconds(clock.now - icuStart)
    guard sum == icuSum else { throw BenchFailure("the TZif rules and ICU's disagree about Europe/Berlin in 2026") }
    print(
        "zone offset, \(lookups) lookups: TZif rules \(format(own * 1_000_000 / Double(lookups))) ns each, "
            + "Foundation's TimeZone (ICU) \(format(foundation * 1_000_000 / Double(lookups))) ns each")
    // Wall time to instant, as every bedtime and window edge is computed.
    let first = LocalDate(year: 2026, month: 1, day: 1)!
    let wallStart = clock.now
    var instants: Int64 = 0
    for day in 0..<365 {
        for minute in stride(from: 0, to: 1440, by: 30) {
            instants &+= zone.instant(first.adding(days: day), ClockTime(hour: minute / 60, minute: minute % 60)).seconds
        }
    }
    let wall = milliseconds(clock.now - wallStart)
    print("local time to instant, \(365 * 48) times: \(format(wall * 1_000_000 / Double(365 * 48))) ns each (\(instants % 7))")
}
