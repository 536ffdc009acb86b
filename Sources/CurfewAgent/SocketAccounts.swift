import CurfewCore
import CurfewLinux
import Foundation

/// The account a caller of the agent's socket counts as: their own uid, or, for a subordinate uid of
/// a user namespace (`/etc/subuid`), the user it belongs to. A child who maps 40 subordinate uids with
/// `unshare --map-auto` holds connections as one account, under one account's cap, not 40.
///
/// Every user's ranges count, managed or not (a flood needs no policy). Used on the socket's thread
/// only; the file is read again at most every 30 s, when a caller connects.
final class SocketAccounts {
    let file: String
    let clock: () -> Int64
    /// The ranges, sorted by start, with their owners resolved; at most `SubordinateRange.maxRanges`.
    private(set) var ranges: [OwnedSubordinateRange] = []
    private var readAt: Int64? = nil

    init(file: String = "/etc/subuid", clock: @escaping () -> Int64 = { ClockReading.now().monotonic }) {
        self.file = file
        self.clock = clock
    }

    /// `uid`'s account: the owner of the subordinate range holding it, else itself.
    func account(of uid: UInt32) -> UInt32 {
        refreshIfDue()
        // The last range starting at or below uid (ranges of different users do not overlap in a sane
        // file; where they do, the one starting last wins).
        var low = 0
        var high = ranges.count
        while low < high {
            let middle = (low + high) / 2
            if ranges[middle].range.start <= uid { low = middle + 1 } else { high = middle }
        }
        guard low > 0, ranges[low - 1].range.contains(uid) else { return uid }
        return ranges[low - 1].ownerUID
    }

    private func refreshIfDue() {
        let now = clock()
        guard readAt.map({ now - $0 > 30_000 }) ?? true else { return }
        readAt = now
        let bytes = (try? Data(contentsOf: URL(fileURLWithPath: file)).prefix(1 << 20)) ?? Data()
        var owners: [String: UInt32?] = [:]
        ranges = SubordinateRange.parse(String(decoding: bytes, as: UTF8.self)).compactMap { range in
            let owner: UInt32?
            if let known = owners[range.owner] {
                owner = known
            } else {
                owner = UInt32(range.owner) ?? Accounts.account(named: range.owner)?.uid
                owners[range.owner] = owner
            }
            return owner.map { OwnedSubordinateRange(range: range, ownerUID: $0) }
        }.sorted { $0.range.start < $1.range.start }
    }
}
