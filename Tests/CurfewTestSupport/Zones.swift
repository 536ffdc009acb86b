import CurfewCore
import CurfewSync
import Foundation

/// Called by Tests/CurfewTestZones' constructor when the test bundle loads.
@_cdecl("curfew_install_system_zones")
public func installSystemZones() {
    if ZoneDatabase.source == nil { SystemZones.install() }
}

public struct TestZoneError: Error, CustomStringConvertible { public var description: String }

/// A temporary zoneinfo directory with zones compiled by `zic` from tz source text.
public struct CompiledZones {
    public let directory: String

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-tz-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    public func compile(_ source: String) throws {
        let file = "\(directory)/.source-\(UUID().uuidString)"
        try source.write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        _ = try CompiledZones.runProgram("/usr/sbin/zic", ["-d", directory, file])
    }

    public func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// Runs a program and returns its standard output (standard error is passed through).
    public static func runProgram(_ path: String, _ arguments: [String], environment: [String: String]? = nil) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestZoneError(description: "\(path) \(arguments.prefix(3)) exited with \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}
