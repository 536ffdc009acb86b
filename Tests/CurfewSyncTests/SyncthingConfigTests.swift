import Foundation
import Testing

@testable import CurfewSync

@Suite struct SyncthingConfigTests {
    /// The shape of the file Debian's Syncthing 1.19 writes (`syncthing -generate`), with a folder
    /// `curfew` added by the REST API.
    static let sample = """
        <configuration version="36">
            <folder id="default" label="Default Folder" path="/root/Sync" type="sendreceive" rescanIntervalS="3600" fsWatcherEnabled="true" fsWatcherDelayS="10" ignorePerms="false" autoNormalize="true">
                <filesystemType>basic</filesystemType>
                <device id="KYNLP5O-4XU6PSD-HS3FOUR-BG7N6JN-XSH2WF4-DR7BAMJ-M5KBNHL-4LMRLQU" introducedBy="">
                    <encryptionPassword></encryptionPassword>
                </device>
                <paused>false</paused>
            </folder>
            <folder id="curfew" label="Curfew" path="/srv/curfew &amp; co" type="sendreceive" rescanIntervalS="60" fsWatcherEnabled="true" fsWatcherDelayS="1" ignorePerms="false" autoNormalize="true">
                <device id="AAAAAAA-BBBBBBB" introducedBy=""></device>
                <device id="CCCCCCC-DDDDDDD" introducedBy=""></device>
                <paused>true</paused>
            </folder>
            <folder id="slow" path="/srv/slow" type="sendonly" rescanIntervalS="120" fsWatcherEnabled="false" fsWatcherDelayS="10" ignorePerms="true"></folder>
            <device id="KYNLP5O-4XU6PSD-HS3FOUR-BG7N6JN-XSH2WF4-DR7BAMJ-M5KBNHL-4LMRLQU" name="vm" compression="metadata">
                <address>dynamic</address>
            </device>
            <gui enabled="true" tls="false" debugging="false">
                <address>127.0.0.1:8384</address>
                <apikey>jQiaiENJW2czQ6rtYX79wu2XjDniZ4XC</apikey>
                <theme>default</theme>
            </gui>
        </configuration>
        """

    @Test func theGUIAndEveryFolderAreRead() throws {
        let config = try SyncthingConfig.parse(Self.sample)
        #expect(config.guiAddress == "127.0.0.1:8384" && !config.guiTLS && config.apiKey == "jQiaiENJW2czQ6rtYX79wu2XjDniZ4XC")
        #expect(config.folders.map(\.id) == ["default", "curfew", "slow"])
        let curfew = try #require(config.folder())
        #expect(curfew.path == "/srv/curfew & co" && curfew.type == "sendreceive" && curfew.paused)
        #expect(curfew.watcherEnabled && curfew.watcherDelaySeconds == 1 && curfew.syncDelaySeconds == 1 && !curfew.ignorePermissions)
        #expect(curfew.devices == ["AAAAAAA-BBBBBBB", "CCCCCCC-DDDDDDD"])
        #expect(config.folder("default")?.syncDelaySeconds == 10 && config.folder("default")?.paused == false)
        // With the watcher off, a change waits for the next full scan.
        let slow = try #require(config.folder("slow"))
        #expect(!slow.watcherEnabled && slow.syncDelaySeconds == 120 && slow.ignorePermissions && slow.devices.isEmpty)
    }

    @Test func aConfigurationWithoutTheGUIsKeyIsRefused() {
        #expect(throws: SyncthingConfig.ParseError.self) { try SyncthingConfig.parse("<configuration></configuration>") }
        #expect(throws: SyncthingConfig.ParseError.self) {
            try SyncthingConfig.parse("<gui tls=\"false\"><address>127.0.0.1:8384</address></gui>")
        }
    }

    @Test func theFileIsLookedForWhereSyncthingKeepsIt() throws {
        #expect(SyncthingConfig.candidatePaths(home: "/tmp/st", userHome: "/root") == ["/tmp/st/config.xml"])
        #expect(
            SyncthingConfig.candidatePaths(home: nil, userHome: "/root")
                == ["/root/.local/state/syncthing/config.xml", "/root/.config/syncthing/config.xml"])
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-st-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: home) }
        #expect(try SyncthingConfig.load(home: home) == nil)
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        try Self.sample.write(toFile: "\(home)/config.xml", atomically: true, encoding: .utf8)
        #expect(try SyncthingConfig.load(home: home)?.config.folder()?.watcherDelaySeconds == 1)
    }
}
