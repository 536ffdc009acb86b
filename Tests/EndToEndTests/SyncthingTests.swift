import CurfewCore
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `curfew sync setup --syncthing`, `curfew pair` and `curfew join` with real Syncthing instances
/// (Debian's `syncthing`), each with its own home, on the loopback.
@Suite(
    .serialized,
    .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/syncthing"), "needs root and syncthing"))
struct SyncthingTests {
    /// A refused setup changes nothing: not in the state directory, not the folder, not systemd's.
    @Test func setupRefusesWithoutARootSyncthingAndChangesNothing() throws {
        let runner = try CurfewRunner()
        defer { runner.cleanUp() }
        try runner.ok(["init"])
        let folder = runner.root.appendingPathComponent("folder").path
        let systemd = runner.root.appendingPathComponent("systemd").path
        let before = try runner.snapshot()
        let home = runner.root.appendingPathComponent("no-such-home").path
        let refused = try runner.run(
            ["sync", "setup", "--syncthing", "--folder", folder, "--syncthing-home", home], environment: ["CURFEW_SYSTEMD_DIR": systemd])
        #expect(refused.status == 69, "\(refused)")
        #expect(refused.stderr == "curfew: no Syncthing runs as root with home \(home) (syncthing -home \(home)); nothing changed\n")
        let relative = try runner.run(["sync", "setup", "--syncthing", "--folder", "relative/dir"])
        #expect(relative.status == 64 && relative.stderr == "curfew: the folder must be an absolute path, got \"relative/dir\"\n", "\(relative)")
        let noTool = try runner.run(["sync", "setup", "--folder", folder])
        #expect(noTool.status == 64 && noTool.stderr == "curfew: sync setup needs --syncthing (the only sync tool it sets up)\n")
        #expect(try runner.snapshot() == before)
    }
}
