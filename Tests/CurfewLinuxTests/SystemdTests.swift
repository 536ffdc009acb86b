import Foundation
import Glibc
import Logging
import Testing

@testable import CurfewLinux

/// sd_notify, the watchdog, and the log handlers. Serialized because the notify and watchdog tests set
/// process-wide environment variables (NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID).
@Suite(.serialized)
struct SystemdTests {
    // MARK: sd_notify and the watchdog

    @Test func notifySendsStatesToTheNotifySocket() throws {
        let socketPath = "/tmp/curfew-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(fd >= 0)
        defer {
            close(fd)
            unlink(socketPath)
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in socketPath.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(bound == 0)

        try withEnvironment(["NOTIFY_SOCKET": socketPath]) {
            #expect(SystemdNotify.send("READY=1"))
            let ready = try receiveDatagram(fd)
            #expect(ready == "READY=1")
            #expect(SystemdNotify.send("STATUS=tracking 2 users\nWATCHDOG=1"))
            let status = try receiveDatagram(fd)
            #expect(status == "STATUS=tracking 2 users\nWATCHDOG=1")
        }
    }

    @Test func notifyWithoutNotifySocketReturnsFalse() throws {
        try withEnvironment(["NOTIFY_SOCKET": nil]) {
            #expect(!SystemdNotify.send("READY=1"))
        }
        // A socket that is not there: the send fails, still no crash and false.
        try withEnvironment(["NOTIFY_SOCKET": "/nonexistent/curfew-notify"]) {
            #expect(!SystemdNotify.send("READY=1"))
        }
    }

    @Test func watchdogIntervalFollowsWatchdogUsecAndPid() throws {
        try withEnvironment(["WATCHDOG_USEC": "2500000", "WATCHDOG_PID": "\(getpid())"]) {
            #expect(SystemdNotify.watchdogInterval() == .milliseconds(2500))
        }
        try withEnvironment(["WATCHDOG_USEC": "2500000", "WATCHDOG_PID": nil]) {
            #expect(SystemdNotify.watchdogInterval() == .milliseconds(2500))
        }
        // Meant for another process.
        try withEnvironment(["WATCHDOG_USEC": "2500000", "WATCHDOG_PID": "\(getpid() + 1)"]) {
            #expect(SystemdNotify.watchdogInterval() == nil)
        }
        try withEnvironment(["WATCHDOG_USEC": nil, "WATCHDOG_PID": nil]) {
            #expect(SystemdNotify.watchdogInterval() == nil)
        }
    }

    // MARK: The journal

    @Test(arguments: [
        ("uid", "UID"),
        ("record.id", "RECORD_ID"),
        ("app-name", "APP_NAME"),
        ("Mixed Case", "MIXED_CASE"),
        ("_SYSTEMD_UNIT", "SYSTEMD_UNIT"),
        ("__uid", "UID"),
        ("2fa", "META_2FA"),
        ("_9", "META_9"),
        ("message", "META_MESSAGE"),
        ("priority", "META_PRIORITY"),
        ("code_line", "META_CODE_LINE"),
        ("Ünïcode", "N_CODE"),
        ("errno", "ERRNO"),
        (String(repeating: "a", count: 100), String(repeating: "A", count: 64)),
    ])
    func metadataKeysBecomeJournalFieldNames(key: String, field: String) {
        #expect(JournalLogHandler.journalFieldName(key) == field)
    }

    @Test func keysWithNothingUsableAreDropped() {
        #expect(JournalLogHandler.journalFieldName("") == nil)
        #expect(JournalLogHandler.journalFieldName("___") == nil)
    }

    @Test func journalEntriesCarryMessagePriorityCodeLocationAndMetadata() {
        var handler = JournalLogHandler(label: "tracker", metadataProvider: .init { ["session": "c1", "uid": "0"] })
        handler[metadataKey: "uid"] = "1000"
        let event = LogEvent(
            level: .warning, message: "limit reached", error: TestError(),
            metadata: ["app.id": "firefox", "message": "x"], source: "CurfewAgent", file: "CurfewAgent/Tracker.swift",
            function: "tick()", line: 42)

        let fields = handler.fields(for: event).map { "\($0.name)=\($0.value)" }

        #expect(
            fields == [
                "MESSAGE=limit reached", "PRIORITY=4", "SYSLOG_IDENTIFIER=curfewd",
                "CODE_FILE=CurfewAgent/Tracker.swift", "CODE_LINE=42", "CODE_FUNC=tick()", "LOGGER=tracker",
                "ERROR=TestError()", "APP_ID=firefox", "META_MESSAGE=x", "SESSION=c1",
                // The provider's value wins over the handler's, as in swift-log's own handlers.
                "UID=0",
            ])
        #expect(
            [Logger.Level.trace, .debug, .info, .notice, .warning, .error, .critical].map(JournalLogHandler.priority)
                == [7, 7, 6, 5, 4, 3, 2])
    }

    @Test func loggingWithoutJournaldDoesNotCrash() {
        let journalSocketExists = access("/run/systemd/journal/socket", F_OK) == 0
        #expect(JournalLogHandler.journalIsAvailable() == journalSocketExists)
        var logger = Logger(label: "curfew.test") { JournalLogHandler(label: $0) }
        logger.logLevel = .trace
        logger.info("hello from the tests", metadata: ["uid": "1000", "multi": "line\nvalue"])
        logger.debug("binary \u{0} and newline\n")
        if !journalSocketExists {
            // libsystemd drops the entry and reports success when journald is absent.
            #expect(JournalLogHandler.send([("MESSAGE", "dropped"), ("PRIORITY", "6")]) == 0)
        }
    }

    // MARK: Standard error

    @Test func stderrLinesAreLevelMessageAndSortedMetadata() {
        let line = StderrLogHandler.formatLine(
            level: .warning, message: "over limit\nnow",
            metadata: ["uid": "1000", "app": "firefox web", "empty": "", "quote": "say \"hi\"", "path": "/a=b"])
        #expect(line == #"WARNING over limit\nnow app="firefox web" empty="" path="/a=b" quote="say \"hi\"" uid=1000"#)
    }

    @Test func stderrHandlerWritesOneLinePerMessage() throws {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        try #require(socketpair(AF_UNIX, type, 0, &fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        var logger = Logger(label: "curfew.test") { StderrLogHandler(label: $0, fileDescriptor: fds[1]) }
        logger[metadataKey: "uid"] = "1000"
        logger.info("first", metadata: ["app": "firefox"])
        logger.debug("not shown at the default level")
        logger.error("second")

        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(fds[0], &buffer, buffer.count)
        try #require(count > 0)
        #expect(
            String(decoding: buffer.prefix(count), as: UTF8.self)
                == "INFO first app=firefox uid=1000\nERROR second uid=1000\n")
    }
}

private struct TestError: Error {}

/// Sets (or, for nil, unsets) environment variables around `body` and restores the previous values.
private func withEnvironment(_ values: [String: String?], _ body: () throws -> Void) throws {
    var saved: [String: String?] = [:]
    for (name, value) in values {
        saved[name] = getenv(name).map { String(cString: $0) }
        if let value { setenv(name, value, 1) } else { unsetenv(name) }
    }
    defer {
        for (name, value) in saved {
            if let value { setenv(name, value, 1) } else { unsetenv(name) }
        }
    }
    try body()
}

/// One datagram from `fd`, waiting up to five seconds.
private func receiveDatagram(_ fd: Int32) throws -> String? {
    var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    let deadline = ContinuousClock.now + .seconds(5)
    while ContinuousClock.now < deadline {
        let ready = poll(&poller, 1, 100)
        if ready > 0 {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, 0)
            return count >= 0 ? String(decoding: buffer.prefix(count), as: UTF8.self) : nil
        }
    }
    return nil
}
