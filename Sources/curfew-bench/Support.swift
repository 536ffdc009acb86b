import SystemPackage
import CurfewLinux
import CurfewPOSIX
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// Timing, statistics, child processes and paths shared by the benchmark sections.

let clock = ContinuousClock()

/// `Swift.print`, then flushed: progress shows at once when the output is a pipe (`make bench | tee`).
func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    Swift.print(items.map { "\($0)" }.joined(separator: separator), terminator: terminator)
    fflush(nil)
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

func format(_ value: Double) -> String { String(format: "%.2f", value) }

/// Three decimals, for figures well under a millisecond.
func format3(_ value: Double) -> String { String(format: "%.3f", value) }

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction + 0.5))]
}

/// CPU time of the calling thread in milliseconds (CLOCK_THREAD_CPUTIME_ID: user + system, ns resolution).
func threadCPUMilliseconds() -> Double {
    Double(SystemClock.nanoseconds(CLOCK_THREAD_CPUTIME_ID)) / 1e6
}

/// Wall and CPU time of one call.
struct Timing {
    var wall: Double
    var cpu: Double
}

func timed<Result>(_ body: () throws -> Result) rethrows -> (Result, Timing) {
    let cpuStart = threadCPUMilliseconds()
    let start = clock.now
    let result = try body()
    let wall = milliseconds(clock.now - start)
    return (result, Timing(wall: wall, cpu: threadCPUMilliseconds() - cpuStart))
}

/// Median, p90 and max of wall and CPU times.
struct Summary {
    var count: Int
    var wallMedian, wallP90, wallMax: Double
    var cpuMedian, cpuP90, cpuMax: Double

    init(_ timings: [Timing]) {
        let walls = timings.map(\.wall)
        let cpus = timings.map(\.cpu)
        count = timings.count
        wallMedian = percentile(walls, 0.5)
        wallP90 = percentile(walls, 0.9)
        wallMax = walls.max() ?? 0
        cpuMedian = percentile(cpus, 0.5)
        cpuP90 = percentile(cpus, 0.9)
        cpuMax = cpus.max() ?? 0
    }

    var text: String {
        "median \(format3(wallMedian)) ms wall, \(format3(cpuMedian)) ms CPU; p90 \(format3(wallP90)) ms wall, "
            + "\(format3(cpuP90)) ms CPU; max \(format3(wallMax)) ms wall, \(format3(cpuMax)) ms CPU"
    }
}

/// posix_spawn with an empty signal mask and default handlers for the signals the benchmark
/// handles or a caller may have ignored, so a child can always be stopped with SIGTERM. Output goes
/// to `output` (appended) or /dev/null; the caller reaps the child.
///
/// `processGroup`: nil to stay in ours, 0 for a new group led by the child, else the group to join.
/// `input`: a descriptor to become the child's standard input instead of /dev/null.
func spawnChild(
    _ path: String, _ arguments: [String], environment: [String: String], output: String? = nil,
    processGroup: pid_t? = nil, input: Int32? = nil
) -> Result<pid_t, LaunchError> {
    do {
        let options = SpawnOptions(
            environment: environment, output: output ?? "/dev/null", input: input, processGroup: processGroup)
        return .success(try spawnProcess(path, arguments, options: options))
    } catch {
        return .failure(LaunchError(path: path, errno: error.errno))
    }
}

struct LaunchError: Error, CustomStringConvertible {
    var path: String
    var errno: Errno
    var description: String { "cannot start \(path): \(errno)" }
}

/// Waits for `pid` (EINTR retried); returns its exit status, 128 + signal if killed, -1 if not a child.
@discardableResult
func waitForExit(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    guard case .success = valueOrErrno({ waitpid(pid, &status, 0) }) else { return -1 }
    return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
}

/// The benchmark's environment with `overrides` set and `unset` removed.
func childEnvironment(_ overrides: [String: String] = [:], unset: [String] = []) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment.merging(overrides) { $1 }
    for key in unset { environment.removeValue(forKey: key) }
    return environment
}

/// Runs a binary to completion (posix_spawn: Foundation's Process adds ~30 ms of its own), with the
/// benchmark's environment plus `environment`; returns its exit status. Output goes to `output` or
/// is discarded.
func run(_ path: String, _ arguments: [String], environment: [String: String] = [:], output: String? = nil) -> Int32 {
    run(path, arguments, fullEnvironment: childEnvironment(environment), output: output)
}

/// `run` with exactly `fullEnvironment`.
func run(_ path: String, _ arguments: [String], fullEnvironment: [String: String], output: String? = nil) -> Int32 {
    switch spawnChild(path, arguments, environment: fullEnvironment, output: output) {
    case .success(let pid): return waitForExit(pid)
    case .failure: return -1
    }
}

/// Runs a binary and returns its standard output (and error) as text, with its exit status.
func capture(_ path: String, _ arguments: [String], fullEnvironment: [String: String], in directory: String)
    -> (status: Int32, output: String)
{
    let file = "\(directory)/capture-\(UUID().uuidString.prefix(8)).txt"
    defer { unlink(file) }
    let status = run(path, arguments, fullEnvironment: fullEnvironment, output: file)
    let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
    return (status, text)
}

/// The directory of this executable, where `swift build` also puts `curfew` and `curfewd`.
let binDirectory = URL(
    fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
).deletingLastPathComponent().path

/// The package root: from this source file's location when it still exists (a build on this
/// machine), else the working directory (`make bench` runs there).
let packageRoot: String = {
    let fromSource = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    if FileManager.default.fileExists(atPath: "\(fromSource)/Package.swift") { return fromSource }
    return FileManager.default.currentDirectoryPath
}()

/// Reads a whole file, also one under /proc (which reports size 0); nil if it cannot be read.
func readText(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        guard case .success(let count) = valueOrErrno({ buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) } }) else { return nil }
        if count == 0 { break }
        bytes += buffer[0..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// A number from a one-value file such as /proc/sys/kernel/pid_max.
func readNumber(_ path: String) -> Int? {
    readText(path).flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
}
