/// The uid ranges `/etc/subuid` gives users (subuid(5): `owner:start:count`, the owner a login name
/// or a uid). A child's processes in a user namespace (`unshare --map-auto`, rootless podman) run
/// under these uids on the host, and belong to the child.
public struct SubordinateRange: Sendable, Equatable {
    /// A login name or a decimal uid, as the file has it.
    public var owner: String
    public var start: UInt32
    public var count: UInt32

    public init(owner: String, start: UInt32, count: UInt32) {
        self.owner = owner
        self.start = start
        self.count = count
    }

    public func contains(_ uid: UInt32) -> Bool { uid >= start && uid - start < count }

    /// At most this many lines are read.
    public static let maxRanges = 4096

    /// Parses the file; malformed lines, empty ranges, ranges past the last uid and ranges that hold
    /// uid 0 are skipped.
    public static func parse(_ text: String) -> [SubordinateRange] {
        var ranges: [SubordinateRange] = []
        for line in text.split(separator: "\n") where ranges.count < maxRanges {
            let fields = line.split(separator: ":", omittingEmptySubsequences: false)
            guard fields.count == 3, !fields[0].isEmpty, let start = UInt32(fields[1]), let count = UInt32(fields[2]),
                count > 0, start > 0, UInt64(start) + UInt64(count) <= UInt64(UInt32.max)
            else { continue }
            ranges.append(SubordinateRange(owner: String(fields[0]), start: start, count: count))
        }
        return ranges
    }
}

/// A managed user's subordinate uid range and the uid of the user it belongs to (the range's
/// `owner`, a name or a uid as the file has it, resolved).
public struct OwnedSubordinateRange: Sendable, Equatable {
    public var range: SubordinateRange
    public var ownerUID: UInt32

    public init(range: SubordinateRange, ownerUID: UInt32) {
        self.range = range
        self.ownerUID = ownerUID
    }
}
