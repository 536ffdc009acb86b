import CurfewPOSIX
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Work on a thread of its own whose text the indicator's loop reads when it is done: the PIN dialog
/// waits for a person for up to a minute per question, and meanwhile the tray must go on answering
/// the panel and the watch must go on being read (an agent drops a watch that is not read).
///
/// The thread writes its text into a socket pair (it takes SOCK_CLOEXEC; Swift does not import
/// pipe2) and closes its end; `descriptor` turns readable then, so the loop polls it with the bus and
/// the watch, never a timer.
final class DetachedWork {
    /// The loop's end: readable once the work wrote its text (and at its end).
    let descriptor: Int32
    private var received: [UInt8] = []

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    /// Starts `body` on a detached thread. Throws when no pipe or no thread can be had.
    static func start(_ body: @escaping @Sendable () -> String) throws(Errno) -> DetachedWork {
        var ends: [Int32] = [-1, -1]
        try Errno.check { socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) }
        // The loop's end never blocks: it reads what came and goes back to polling.
        _ = fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK)
        final class Job: @unchecked Sendable {
            let body: @Sendable () -> String
            let output: Int32
            init(body: @escaping @Sendable () -> String, output: Int32) {
                self.body = body
                self.output = output
            }
        }
        let job = Unmanaged.passRetained(Job(body: body, output: ends[1]))
        var thread = pthread_t()
        let status = pthread_create(
            &thread, nil,
            { context in
                let job = Unmanaged<Job>.fromOpaque(context!).takeRetainedValue()
                let bytes = Array(job.body().utf8)
                var written = 0
                while written < bytes.count {
                    let count = bytes.withUnsafeBytes { send(job.output, $0.baseAddress! + written, $0.count - written, Int32(MSG_NOSIGNAL)) }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { break }
                    written += count
                }
                close(job.output)
                return nil
            }, job.toOpaque())
        guard status == 0 else {
            job.release()
            close(ends[0])
            close(ends[1])
            throw Errno(rawValue: status)
        }
        pthread_detach(thread)
        return DetachedWork(descriptor: ends[0])
    }

    /// Reads what is there; the text once the work closed its end, nil while it has not.
    func readResult() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
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
