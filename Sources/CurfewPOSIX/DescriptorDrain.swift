#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif
import SystemPackage

extension FileDescriptor {
    /// Reads what is there now from this non-blocking descriptor (borrowed: it stays open) and appends
    /// it to `bytes`, keeping at most `limit` bytes in all; the rest is read and dropped, so a chatty
    /// writer never blocks on a full pipe. False at end of file or on an error other than "try again".
    /// read(2), in chunks of `chunk` bytes.
    @discardableResult
    public func drainAvailable(into bytes: inout [UInt8], keeping limit: Int, chunk: Int = 16_384) -> Bool {
        var buffer = [UInt8](repeating: 0, count: chunk)
        while true {
            let count: Int
            switch valueOrErrno(retryOnInterrupt: false, { Glibc.read(rawValue, &buffer, buffer.count) }) {
            case .success(0): return false
            case .success(let read): count = read
            case .failure(let error): return error.isTemporary
            }
            if bytes.count < limit { bytes += buffer.prefix(min(count, limit - bytes.count)) }
        }
    }
}
