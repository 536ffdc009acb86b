#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif
import CurfewPOSIX
import SystemPackage
import CurfewCore

/// What `curfew sync prune` removes from the shared directory: confirmations of records that are no
/// longer there, record files that can never be used (malformed, tampered, forged), and temporary files
/// a writer left behind, each only once it is older than `minimumAge` (a sync tool may deliver a
/// confirmation before its record, or a record a while after its name). Records of keys this computer
/// does not trust, or revoked, are never removed: another computer may trust them.
public struct PrunePlan: Sendable, Equatable {
    public struct Item: Sendable, Equatable {
        public var path: String
        public var reason: String
    }

    public var items: [Item]

    public static let minimumAge: Int64 = 86400
}

extension SharedDirectory {
    public func prunePlan(trusted: [String: PublicKey], now: Instant, minimumAge: Int64 = PrunePlan.minimumAge) -> PrunePlan {
        var items: [PrunePlan.Item] = []
        func isOld(_ path: String) -> Bool {
            guard let (identity, _) = try? Files.identity(path) else { return false }
            return now.seconds - identity.mtimeNanoseconds / 1_000_000_000 >= minimumAge
        }
        let recordNames = (try? Files.list(recordsPath)) ?? []
        let records = Set(recordNames.filter(SharedDirectory.isRecordName))
        for name in recordNames.sorted() {
            let path = "\(recordsPath)/\(name)"
            if name.hasPrefix(".tmp-") {
                if isOld(path) { items.append(.init(path: path, reason: "a temporary file left by an interrupted write")) }
                continue
            }
            guard SharedDirectory.isRecordName(name), isOld(path), let (_, isRegular) = try? Files.identity(path) else { continue }
            if case .rejected(let reason, _, let cause) = RecordVerifier.check(path: path, name: name, isRegular: isRegular, trusted: trusted),
                cause != .transient
            {
                items.append(.init(path: path, reason: "rejected: \(reason)"))
            }
        }
        for machine in ((try? Files.list(confirmationsPath)) ?? []).sorted() where MachineID.isValid(machine) {
            let directory = confirmationsPath(of: machine)
            for name in ((try? Files.list(directory)) ?? []).sorted() {
                let path = "\(directory)/\(name)"
                if name.hasPrefix(".tmp-") {
                    if isOld(path) { items.append(.init(path: path, reason: "a temporary file left by an interrupted write")) }
                } else if RecordFormat.isRecordID(name), !records.contains(name), isOld(path) {
                    items.append(.init(path: path, reason: "confirms record \(name.prefix(12)), which is no longer in records/"))
                }
            }
        }
        return PrunePlan(items: items)
    }

    /// Removes the plan's files (not following symlinks: each is unlinked by name); returns the paths
    /// that could not be removed, with why.
    public func prune(_ plan: PrunePlan) -> [(path: String, error: FileError)] {
        var failed: [(String, FileError)] = []
        for item in plan.items {
            if case .failure(let error) = valueOrErrno({ unlink(item.path) }), error != .noSuchFileOrDirectory {
                failed.append((item.path, FileError(.remove, item.path, errno: error)))
            }
        }
        return failed
    }
}
