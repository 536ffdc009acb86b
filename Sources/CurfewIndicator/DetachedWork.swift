import CurfewLinux
import CurfewPOSIX
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Work on a thread of its own whose text the indicator's loop reads when it is done: the PIN dialog
/// waits for a person for up to a minute per question, and meanwhile the tray must go on answering
/// the panel and the watch must go on being read (an agent drops a watch that is not read).
///
/// The thread writes its text into a socket pair (`LinuxError.socketPair`: close-on-exec) and
/// closes its end; `descriptor` turns readable then, so the loop polls it with the bus and
/// the watch, never a timer.
final class DetachedWork {
    /// The loop's end: readable once the work wrote its text (and at its end); closed with this.
    let descriptor: FileDescriptor
    private var received: [UInt8] = []

    private init(descriptor: FileDescriptor) { self.descriptor = descriptor }

    deinit { try? descriptor.close() }

    /// Starts `body` on a detached thread. Throws when no pipe or no thread can be had.
    static func start(_ body: @escaping @Sendable () -> String) throws(Errno) -> DetachedWork {
        let ends: (ours: FileDescriptor, theirs: FileDescriptor)
        do { ends = try LinuxError.socketPair("socketpair") } catch { throw error.errno }
        let loopEnd = ends.ours
        // The thread's end: closed by the thread once it wrote its text, or here if there is no thread.
        let workEnd = ends.theirs
        do {
            // The loop's end never blocks: it reads what came and goes back to polling.
            let flags = try Errno.check { fcntl(loopEnd.rawValue, F_GETFL) }
            try Errno.check { fcntl(loopEnd.rawValue, F_SETFL, flags | O_NONBLOCK) }
            try POSIXThread.detach {
                let bytes = Array(body().utf8)
                _ = try? workEnd.closeAfter {
                    var written = 0
                    while written < bytes.count {
                        let sent = valueOrErrno {
                            bytes.withUnsafeBytes { send(workEnd.rawValue, $0.baseAddress! + written, $0.count - written, Int32(MSG_NOSIGNAL)) }
                        }
                        guard case .success(let count) = sent, count > 0 else { break }
                        written += count
                    }
                }
            }
        } catch {
            try? loopEnd.close()
            try? workEnd.close()
            throw error
        }
        return DetachedWork(descriptor: loopEnd)
    }

    /// Reads what is there; the text once the work closed its end, nil while it has not.
    func readResult() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor.rawValue, $0.baseAddress, $0.count) }
            if count > 0 {
                received += buffer[0..<count]
                continue
            }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && errno == EAGAIN { return nil }
            // 0: the end (or an error reading our own socket: take what came).
            return String(decoding: received, as: UTF8.self)
        }
    }
}
