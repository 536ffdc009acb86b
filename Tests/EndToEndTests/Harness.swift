import Foundation
import Testing

/// `HH:MM` in UTC of an instant (the accounts in these tests live on UTC).
func utcClock(_ instant: Int64) -> String {
    let minutes = Int(((instant % 86_400) + 86_400) % 86_400) / 60
    return String(format: "%02d:%02d", minutes / 60, minutes % 60)
}

/// An instant as the child is told it on UTC from `now`: `HH:MM` today, `tomorrow at HH:MM` after
/// midnight (a test run in the hours before midnight meets the second).
func utcWhen(_ instant: Int64, now: Int64 = Int64(Date().timeIntervalSince1970)) -> String {
    instant / 86_400 > now / 86_400 ? "tomorrow at \(utcClock(instant))" : utcClock(instant)
}

/// Runs the built `curfew` binary in a private state directory.
struct CurfewRunner {
    struct Result: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
    }

    let root: URL
    var catalogDirectory = CurfewRunner.repositoryRoot.appendingPathComponent("policies/apps").path
    var stateDir: String { root.appendingPathComponent("state").path }
    var sharedDir: String { root.appendingPathComponent("state/shared").path }

    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The directory of the test binary, where SwiftPM also puts the executables.
    static let binDirectory: URL = {
        if let override = ProcessInfo.processInfo.environment["CURFEW_BIN_DIR"] {
            return URL(fileURLWithPath: override)
        }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var url = URL(fileURLWithPath: exe).deletingLastPathComponent()
        // XCTest bundles on Linux are plain executables; on macOS they are bundles.
        while url.pathExtension == "xctest" || url.lastPathComponent == "MacOS" || url.lastPathComponent == "Contents" {
            url = url.deletingLastPathComponent()
        }
        return url
    }()

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    func cleanUp() { try? FileManager.default.removeItem(at: root) }

    @discardableResult
    func run(
        _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:], stateDir: String? = nil,
        asUser user: String? = nil
    ) throws -> Result {
        let process = Process()
        let binary = CurfewRunner.binDirectory.appendingPathComponent("curfew")
        if let user {
            // runuser keeps the environment, so the child sees the same state directory.
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            process.arguments = ["-u", user, "--", binary.path] + arguments
        } else {
            process.executableURL = binary
            process.arguments = arguments
        }
        var env = ProcessInfo.processInfo.environment
        env["CURFEW_STATE_DIR"] = stateDir ?? self.stateDir
        env.removeValue(forKey: "CURFEW_SHARED_DIR")
        env["CURFEW_CATALOG_DIRS"] = catalogDirectory
        env["TZ"] = "UTC"
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        let input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        let stderrData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
            stderr: String(decoding: stderrData, as: UTF8.self))
    }

    /// Runs and expects exit 0.
    @discardableResult
    func ok(_ arguments: [String], stdin: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws -> Result {
        let result = try run(arguments, stdin: stdin)
        #expect(result.status == 0, "curfew \(arguments.joined(separator: " ")): \(result)", sourceLocation: sourceLocation)
        return result
    }

    /// Every file under the state directory with its mode and bytes, to prove a command changed nothing.
    func snapshot() throws -> [String: String] {
        var files: [String: String] = [:]
        let base = root.path
        guard let enumerator = FileManager.default.enumerator(atPath: base) else { return files }
        while let relative = enumerator.nextObject() as? String {
            let path = "\(base)/\(relative)"
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            let mode = (attributes[.posixPermissions] as? Int).map { String($0, radix: 8) } ?? "?"
            if (attributes[.type] as? FileAttributeType) == .typeDirectory {
                files[relative] = "dir \(mode)"
            } else {
                let data = try Data(contentsOf: URL(fileURLWithPath: path))
                files[relative] = "file \(mode) \(data.base64EncodedString())"
            }
        }
        return files
    }

    /// Runs a system tool to completion; its exit status.
    static func runTool(_ path: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Runs a system tool and returns what it printed on stdout.
    static func capture(_ path: String, _ arguments: [String], asUser user: String? = nil) throws -> String {
        let process = Process()
        if let user {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            process.arguments = ["-u", user, "--", path] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = arguments
        }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    func recordFiles() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: "\(sharedDir)/records").filter { $0.hasSuffix(".json") }.sorted()
    }
}
