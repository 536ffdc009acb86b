import Foundation
import Glibc
import SystemPackage
import Synchronization
import Testing

@testable import CurfewLinux

/// Who gets a slot on the agent's socket: the rule on its own.
@Suite struct ConnectionAdmissionTests {
    let limits = PeerSocketServer.Limits(connectionsPerUID: 2, connections: 4, trustedUIDs: [0])

    @Test(arguments: [
        // (caller, open connections oldest first, verdict)
        (UInt32(1000), [UInt32](), ConnectionAdmission.Verdict.admit),
        (1000, [1000], .admit),
        (1000, [1000, 1000], .refuse),
        (1001, [1000, 1000], .admit),
        (0, [0, 0, 0], .admit),
        // The per-uid cap is not root's: root is served beside a child's full quota.
        (0, [1000, 1000], .admit),
        // Every slot taken: root takes the oldest child's, a child is turned away.
        (0, [0, 1000, 1001, 1000], .admitEvicting(1)),
        (0, [1001, 1000, 0, 1000], .admitEvicting(0)),
        (1002, [0, 1000, 1001, 1000], .refuse),
        // Only root holds slots: nobody is dropped for another root caller.
        (0, [0, 0, 0, 0], .refuse),
    ])
    func verdicts(caller: UInt32, open: [UInt32], expected: ConnectionAdmission.Verdict) {
        #expect(ConnectionAdmission.verdict(for: caller, open: open, limits: limits) == expected)
    }

    /// A subordinate uid (a user namespace's, `/etc/subuid`) counts as its owner: the child's user
    /// namespace shares the child's cap; root's subordinate uids are not root.
    @Test(arguments: [
        (UInt32(200_001), [UInt32](), ConnectionAdmission.Verdict.admit),
        (200_001, [1000], .admit),
        (200_001, [1000, 200_002], .refuse),
        (200_003, [200_001, 200_002], .refuse),
        (1000, [200_001, 200_002], .refuse),
        (1001, [200_001, 200_002], .admit),
        (300_000, [300_001, 300_002], .refuse),
        (300_000, [1000, 1001, 1002, 1003], .refuse),
    ])
    func subordinateUIDsCountAsTheirOwnerAndAreNeverTrusted(caller: UInt32, open: [UInt32], expected: ConnectionAdmission.Verdict) {
        let owner: (UInt32) -> UInt32 = { uid in
            switch uid {
            case 200_000..<210_000: 1000
            case 300_000..<310_000: 0
            default: uid
            }
        }
        #expect(ConnectionAdmission.verdict(for: caller, open: open, limits: limits, accountOf: owner) == expected)
    }
}

/// A real `PeerSocketServer` serving on a thread of its own, answering `<uid> <line>`.
final class ServingSocket {
    /// What the serving thread and the test share.
    final class Shared: Sendable {
        let stop = Mutex(false)
        let tally = Mutex(PeerSocketServer.Tally())
        let finished = DispatchSemaphore(value: 0)
    }

    let directory = ProcTestDirectory()
    let path: String
    let server: PeerSocketServer
    let shared = Shared()

    init(limits: PeerSocketServer.Limits) throws {
        chmod(directory.path, 0o755)
        path = directory.path + "/s.sock"
        server = try PeerSocketServer(path: path)
        let (server, shared) = (self.server, self.shared)
        Thread {
            server.serve(
                limits: limits, busyAnswer: "busy", reportInterval: .zero,
                report: { tally in
                    shared.tally.withLock {
                        $0.refused += tally.refused
                        $0.evicted += tally.evicted
                        $0.expired += tally.expired
                        $0.oversized += tally.oversized
                    }
                }, until: { shared.stop.withLock { $0 } }
            ) { line, caller in
                // `big N`: an answer of N bytes, more than a socket buffer holds.
                if line.hasPrefix("big "), let size = Int(line.dropFirst(4)) { return String(repeating: "y", count: size) }
                return "\(caller.uid) \(line)"
            }
            shared.finished.signal()
        }.start()
    }

    var tally: PeerSocketServer.Tally { shared.tally.withLock { $0 } }

    func shutdown() {
        shared.stop.withLock { $0 = true }
        shared.finished.wait()
        server.shutdown()
    }
}

/// A raw client connection held open by the test.
final class RawConnection {
    let fd: Int32

    /// `nonBlocking`: connect fails with EAGAIN on a full backlog instead of waiting.
    init(_ path: String, nonBlocking: Bool = false) throws {
        let flags = nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | flags, 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
            raw[path.utf8.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            let error = errno
            close(fd)
            throw LinuxError(operation: "connect", errno: Errno(rawValue: error))
        }
    }

    func send(_ text: String) { _ = Array(text.utf8).withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }

    /// Everything the server sends until it closes the connection, or nil if it is still open after `seconds`.
    func readUntilClosed(within seconds: Double) -> String? {
        let deadline = Date().addingTimeInterval(seconds)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(left * 1000) + 1) > 0 else { continue }
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return String(decoding: bytes, as: UTF8.self) }
            bytes += chunk[0..<count]
        }
    }

    deinit { close(fd) }
}

@Suite(.serialized) struct PeerSocketServerTests {
    /// A slow caller (a byte at a time) and many idle ones do not delay anyone else; each is cut off
    /// at its deadline.
    @Test func slowAndIdleCallersDoNotHoldUpOthersAndAreCutOffAtTheDeadline() throws {
        let serving = try ServingSocket(limits: PeerSocketServer.Limits(requestDeadline: .milliseconds(600)))
        defer { serving.shutdown() }
        let slow = try RawConnection(serving.path)
        slow.send("{")
        let idle = try (0..<100).map { _ in try RawConnection(serving.path) }
        let started = Date()
        let answer = try PeerSocketClient.request(path: serving.path, line: "hello", timeout: .seconds(5))
        #expect(answer == "\(getuid()) hello")
        #expect(Date().timeIntervalSince(started) < 0.5, "answered behind a slow caller")
        usleep(300_000)
        slow.send("}")
        // Cut off at 600 ms from accept, without an answer: a byte now and then does not extend it.
        #expect(slow.readUntilClosed(within: 3) == "")
        let cutOff = Date().timeIntervalSince(started)
        #expect(cutOff >= 0.4 && cutOff < 1.5, "the slow caller was cut off after \(cutOff) s")
        for connection in idle { #expect(connection.readUntilClosed(within: 1) == "") }
        #expect(try PeerSocketClient.request(path: serving.path, line: "again") == "\(getuid()) again")
        #expect(pollUntil(seconds: 2) { serving.tally.expired == 101 }, "\(serving.tally)")
    }

    /// An answer the caller does not read is never waited for: others are served meanwhile, and the
    /// connection is dropped at the answer's deadline.
    @Test func aCallerWhoDoesNotReadTheAnswerIsDroppedAtTheDeadline() throws {
        // A deadline long enough that a loaded machine still answers the other caller well within it:
        // answered before the greedy caller is dropped means it did not wait for the greedy answer.
        let serving = try ServingSocket(limits: PeerSocketServer.Limits(requestDeadline: .seconds(3)))
        defer { serving.shutdown() }
        let greedy = try RawConnection(serving.path)
        let started = Date()
        greedy.send("big 8000000\n")
        usleep(100_000)
        #expect(try PeerSocketClient.request(path: serving.path, line: "meanwhile", timeout: .seconds(2)) == "\(getuid()) meanwhile")
        #expect(serving.tally.expired == 0, "the other caller was answered before the greedy one's deadline: \(serving.tally)")
        #expect(pollUntil(seconds: 6) { serving.tally.expired == 1 }, "\(serving.tally)")
        let dropped = Date().timeIntervalSince(started)
        #expect(dropped >= 2.9 && dropped < 5, "dropped after \(dropped) s")
        // What it reads now is the part the socket took, then the end: not 8 MB.
        let received = greedy.readUntilClosed(within: 2)
        #expect(received != nil && received!.utf8.count < 8_000_000)
    }

    /// Requests in pieces, and a request closed without its newline, are answered; a line over the cap
    /// closes the connection.
    @Test func linesArriveInPiecesAndOversizedOnesAreDropped() throws {
        let serving = try ServingSocket(limits: PeerSocketServer.Limits(maxLineBytes: 1_000))
        defer { serving.shutdown() }
        let pieces = try RawConnection(serving.path)
        pieces.send("{\"a\":")
        usleep(50_000)
        pieces.send("1}\nignored")
        #expect(pieces.readUntilClosed(within: 2) == "\(getuid()) {\"a\":1}\n")
        let unterminated = try RawConnection(serving.path)
        unterminated.send("last")
        shutdown(unterminated.fd, Int32(SHUT_WR))
        #expect(unterminated.readUntilClosed(within: 2) == "\(getuid()) last\n")
        let exact = try RawConnection(serving.path)
        exact.send(String(repeating: "x", count: 1_000) + "\n")
        #expect(exact.readUntilClosed(within: 2) == "\(getuid()) " + String(repeating: "x", count: 1_000) + "\n")
        let huge = try RawConnection(serving.path)
        huge.send(String(repeating: "x", count: 1_001))
        #expect(huge.readUntilClosed(within: 2) == "")
        #expect(pollUntil(seconds: 2) { serving.tally.oversized == 1 }, "\(serving.tally)")
    }

    /// The per-uid cap and the global cap, with a real second account (nobody) holding connections.
    @Test(.enabled(if: getuid() == 0, "needs root: connections from another account"))
    func anotherAccountIsCappedAndRootTakesItsSlotWhenAllAreFull() throws {
        let serving = try ServingSocket(
            limits: PeerSocketServer.Limits(requestDeadline: .seconds(30), connectionsPerUID: 3, connections: 3))
        defer { serving.shutdown() }
        let children = ProcChildren()
        // nobody opens 5 connections and reports, each second, which ones the server closed.
        let script = """
            import os, socket, sys, time
            held, states = [], []
            for i in range(5):
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.setblocking(False)
                held.append(s); states.append('open')
            while True:
                for i, s in enumerate(held):
                    if states[i] != 'open': continue
                    try:
                        states[i] = s.recv(100).decode().strip() or 'closed'
                    except BlockingIOError:
                        pass
                    except OSError:
                        states[i] = 'closed'
                with open(sys.argv[2] + '.tmp', 'w') as f: f.write(' '.join(states))
                os.rename(sys.argv[2] + '.tmp', sys.argv[2])
                time.sleep(0.05)
            """
        // Where nobody may write its report.
        let directory = serving.directory.path + "/nobody"
        mkdir(directory, 0o777)
        chmod(directory, 0o777)
        _ = try children.spawn("/usr/bin/python3", ["-c", script, serving.path, directory + "/held"], uid: 65534, gid: 65534)
        var states: [String] = []
        #expect(pollUntil(seconds: 5) {
            states = ((try? String(contentsOfFile: directory + "/held", encoding: .utf8)) ?? "").split(separator: " ").map(String.init)
            return states.count == 5 && states.filter { $0 == "open" }.count == 3
        }, "nobody's connections: \(states)")
        // Over the per-uid cap: refused at once, with the busy line.
        #expect(states.filter { $0 == "busy" }.count == 2, "\(states)")
        // Every slot is nobody's: root still gets an answer, in the place of nobody's oldest.
        #expect(try PeerSocketClient.request(path: serving.path, line: "root", timeout: .seconds(2)) == "0 root")
        #expect(pollUntil(seconds: 5) {
            states = ((try? String(contentsOfFile: directory + "/held", encoding: .utf8)) ?? "").split(separator: " ").map(String.init)
            return states.first == "closed"
        }, "nobody's oldest connection: \(states)")
        #expect(states.filter { $0 == "open" }.count == 2, "\(states)")
        #expect(pollUntil(seconds: 2) { serving.tally.refused == 2 && serving.tally.evicted == 1 }, "\(serving.tally)")
        // Root's answered connection freed its slot.
        #expect(try PeerSocketClient.request(path: serving.path, line: "root again", timeout: .seconds(2)) == "0 root again")
    }

    /// An account whose slots are all held open without asking still gets an answer to a request
    /// that is complete when it connects (as the clients send it): the held connections take slots,
    /// not the capacity to answer. An idle newcomer is still turned away.
    @Test func aCompleteRequestIsAnsweredWhenTheCallersSlotsAreTaken() throws {
        let serving = try ServingSocket(
            limits: PeerSocketServer.Limits(requestDeadline: .seconds(30), connectionsPerUID: 2, connections: 4, trustedUIDs: []))
        defer { serving.shutdown() }
        let held = [try RawConnection(serving.path), try RawConnection(serving.path)]
        #expect(held[0].readUntilClosed(within: 0.3) == nil && held[1].readUntilClosed(within: 0.3) == nil)
        let idle = try RawConnection(serving.path)
        #expect(idle.readUntilClosed(within: 2) == "busy\n")
        // A connect can reach the server a moment before its line: then it is turned away (the busy
        // line, or the connection closed under the send), and asked again, as `check-login` does.
        var answers: [String] = []
        var busy = 0
        while answers.count < 20 && busy < 200 {
            let answer: String
            do {
                answer = try PeerSocketClient.request(path: serving.path, line: "ask \(answers.count)", timeout: .seconds(2))
            } catch {
                #expect(error.errno == .brokenPipe || error.errno == .connectionReset, "\(error)")
                busy += 1
                continue
            }
            if answer == "busy" { busy += 1 } else { answers.append(answer) }
        }
        #expect(answers == (0..<20).map { "\(getuid()) ask \($0)" }, "\(answers), busy \(busy) times")
        #expect(busy < 200, "busy \(busy) times in 20 requests")
        print("20 complete requests with every slot held: turned away \(busy) times before the line arrived")
        // The held connections are still open, and still the caller's only slots.
        #expect(held[0].readUntilClosed(within: 0.1) == nil && held[1].readUntilClosed(within: 0.1) == nil)
    }

    /// The client's one deadline covers a connect that waits on a full backlog and an answer that never comes.
    @Test func theClientGivesUpAtItsDeadline() throws {
        let directory = ProcTestDirectory()
        let path = directory.path + "/stalled.sock"
        // Listening, never served: a stalled agent.
        let stalled = try PeerSocketServer(path: path, backlog: 1)
        defer { stalled.shutdown() }
        var started = Date()
        #expect(throws: LinuxError.self) { try PeerSocketClient.request(path: path, line: "x", timeout: .milliseconds(500)) }
        var elapsed = Date().timeIntervalSince(started)
        #expect(elapsed >= 0.45 && elapsed < 1.5, "gave up after \(elapsed) s with room in the backlog")
        // Fill the backlog; connect itself must now time out.
        var fillers: [RawConnection] = []
        while fillers.count < 10, let connection = try? RawConnection(path, nonBlocking: true) { fillers.append(connection) }
        #expect(fillers.count < 10, "the backlog never filled")
        started = Date()
        #expect(throws: LinuxError.self) { try PeerSocketClient.request(path: path, line: "x", timeout: .milliseconds(500)) }
        elapsed = Date().timeIntervalSince(started)
        #expect(elapsed >= 0.45 && elapsed < 1.5, "gave up after \(elapsed) s on a full backlog")
        // Nobody there at all: at once.
        stalled.shutdown()
        started = Date()
        #expect(throws: LinuxError.self) { try PeerSocketClient.request(path: path, line: "x", timeout: .seconds(5)) }
        #expect(Date().timeIntervalSince(started) < 0.5)
    }

}

/// Watches: a view sent again only when its key changes, one watch per group, and a watcher who
/// does not read dropped once its queue passes `watchOutputBytes`, while others are served.
@Suite(.serialized) struct PeerSocketWatchTests {
    final class Shared: Sendable {
        let stop = Mutex(false)
        let version = Mutex(0)
        let tally = Mutex(PeerSocketServer.Tally())
        let finished = DispatchSemaphore(value: 0)
        let wake = EventSignal()
    }

    /// `watch G`: a watch of group G whose view is `<version>` padded to `size` bytes (key: the version).
    static func serve(_ shared: Shared, path: String, limits: PeerSocketServer.Limits, size: Int) throws -> PeerSocketServer {
        let server = try PeerSocketServer(path: path)
        Thread {
            server.serve(
                limits: limits, reportInterval: .zero,
                report: { tally in
                    shared.tally.withLock {
                        $0.watchesRefused += tally.watchesRefused
                        $0.watchersDropped += tally.watchersDropped
                    }
                }, until: { shared.stop.withLock { $0 } }, watchRefusal: "refused", watchWake: shared.wake.descriptor
            ) { line, caller in
                guard line.hasPrefix("watch ") else { return PeerSocketAnswer(line: "\(caller.uid) \(line)") }
                func view() -> PeerSocketWatch.View {
                    let version = shared.version.withLock { $0 }
                    let text = "\(version) " + String(repeating: "x", count: max(0, size - 12))
                    return PeerSocketWatch.View(key: "\(version)", line: text)
                }
                return PeerSocketAnswer(
                    line: "unused", watch: PeerSocketWatch(group: String(line.dropFirst(6)), first: view(), current: view))
            }
            shared.finished.signal()
        }.start()
        return server
    }

    @Test func changedViewsAreSentAndASecondWatchOfAGroupIsRefused() throws {
        let directory = ProcTestDirectory()
        chmod(directory.path, 0o755)
        let path = directory.path + "/w.sock"
        let shared = Shared()
        let server = try Self.serve(shared, path: path, limits: PeerSocketServer.Limits(), size: 20)
        defer {
            shared.stop.withLock { $0 = true }
            shared.wake.signal()
            shared.finished.wait()
            server.shutdown()
        }
        let stream = try PeerSocketStream(path: path, line: "watch session-1")
        func lines(within seconds: Double) -> [String] {
            var poller = pollfd(fd: stream.descriptor.rawValue, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(seconds * 1000)) > 0 else { return [] }
            usleep(50_000)
            return stream.readLines().lines
        }
        #expect(lines(within: 5).map { $0.prefix(2) } == ["0 "])
        // A wake with nothing changed sends nothing; a new version is sent once.
        shared.wake.signal()
        #expect(lines(within: 0.5).isEmpty)
        shared.version.withLock { $0 = 1 }
        shared.wake.signal()
        #expect(lines(within: 5).map { $0.prefix(2) } == ["1 "])
        #expect(try PeerSocketClient.request(path: path, line: "watch session-1") == "refused")
        #expect(try PeerSocketClient.request(path: path, line: "hello") == "\(getuid()) hello")
    }

    @Test func aWatcherWhoDoesNotReadIsDroppedAndOthersAreServed() throws {
        let directory = ProcTestDirectory()
        chmod(directory.path, 0o755)
        let path = directory.path + "/w.sock"
        let shared = Shared()
        let limits = PeerSocketServer.Limits(watchOutputBytes: 200_000)
        let server = try Self.serve(shared, path: path, limits: limits, size: 60_000)
        defer {
            shared.stop.withLock { $0 = true }
            shared.wake.signal()
            shared.finished.wait()
            server.shutdown()
        }
        let greedy = try RawConnection(path)
        greedy.send("watch session-2\n")
        // 60 kB views, one per change: the socket's buffer fills, then the queue, and the watcher goes.
        var dropped = false
        for version in 1...200 where !dropped {
            shared.version.withLock { $0 = version }
            shared.wake.signal()
            #expect(try PeerSocketClient.request(path: path, line: "ping \(version)", timeout: .seconds(5)) == "\(getuid()) ping \(version)")
            dropped = shared.tally.withLock { $0.watchersDropped } > 0
        }
        #expect(dropped, "the watcher who never reads was dropped")
        // It is closed: what it reads ends (the views queued in the socket, then end of file).
        #expect(greedy.readUntilClosed(within: 10) != nil)
    }
}
