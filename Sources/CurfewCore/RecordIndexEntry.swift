/// The identity of a file as `stat` sees it. A record file whose identity is unchanged since it was
/// checked need not be read again: its name is the hash of its content, and any write to it changes
/// its ctime, which no unprivileged user can set.
public struct FileIdentity: Sendable, Equatable, Hashable {
    public var device: Int64
    public var inode: Int64
    public var size: Int64
    public var mtimeNanoseconds: Int64
    public var ctimeNanoseconds: Int64

    public init(device: Int64, inode: Int64, size: Int64, mtimeNanoseconds: Int64, ctimeNanoseconds: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
        self.mtimeNanoseconds = mtimeNanoseconds
        self.ctimeNanoseconds = ctimeNanoseconds
    }
}

/// What checking one record file found. Verdicts that depend on which keys are trusted are not
/// stored: `valid` means "correctly signed by `author`'s key", and trust is checked when folding.
public struct IndexedRecord: Sendable, Equatable {
    public enum Verdict: Sendable, Equatable {
        case valid(RecordSummary)
        /// A correctly signed grant of extra time.
        case validGrant(GrantSummary)
        /// Refused; `cause` says whether a young file may still be arriving (`.mayBeIncomplete`).
        case invalid(reason: String, cause: RejectionCause = .invalid)
    }

    public var name: String
    public var identity: FileIdentity
    public var verdict: Verdict

    public init(name: String, identity: FileIdentity, verdict: Verdict) {
        self.name = name
        self.identity = identity
        self.verdict = verdict
    }
}
