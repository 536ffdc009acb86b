#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif
import CurfewCore

/// The folder Syncthing shares between the family's computers, as Curfew needs it: root's alone
/// (0700: Syncthing does not sync the folder's own mode, so each computer sets it), with Syncthing's
/// folder marker `.stfolder` and a `.stignore` that keeps Curfew's temporary names out of the sync.
public enum SyncthingFolder {
    /// Curfew writes every file of the shared directory as `.tmp-<name>-<pid>-<random>` and renames it.
    public static let ignoreText = """
        // Curfew (curfew sync setup): temporary names of files being written are never synced.
        .tmp-*

        """

    public static let marker = ".stfolder"

    /// Why a folder cannot be used.
    public struct Problem: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Owner and mode of `path` (not following a symlink), or nil when it does not exist.
    public static func ownerAndMode(_ path: String) -> (uid: uid_t, mode: mode_t, isDirectory: Bool)? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return (info.st_uid, info.st_mode & 0o7777, (info.st_mode & S_IFMT) == S_IFDIR)
    }

    /// Checks that `path` can become the folder: absent, or a directory of root.
    public static func check(_ path: String) throws(Problem) {
        guard path.hasPrefix("/") else { throw Problem(description: "the folder must be an absolute path, got \(quoted(path))") }
        guard let (uid, _, isDirectory) = ownerAndMode(path) else { return }
        guard isDirectory else { throw Problem(description: "the folder \(path) exists and is not a directory") }
        guard uid == 0 else { throw Problem(description: "the folder \(path) must belong to root, got uid \(uid)") }
    }

    /// Makes `path` root's 0700 directory with `.stfolder` and `.stignore`; returns what it changed.
    public static func prepare(_ path: String) throws(FileError) -> [String] {
        var changes: [String] = []
        if ownerAndMode(path) == nil {
            try Files.makeDirectories(path, mode: 0o700)
            changes.append("created \(path) (root, 0700)")
        }
        if let (_, mode, _) = ownerAndMode(path), mode != 0o700 {
            _ = try Files.check(.setMode, path) { chmod(path, 0o700) }
            changes.append("made \(path) 0700 (was \(octal(mode)))")
        }
        let markerPath = "\(path)/\(marker)"
        if ownerAndMode(markerPath) == nil {
            try Files.makeDirectories(markerPath, mode: 0o700)
            changes.append("created \(markerPath)")
        }
        let ignorePath = "\(path)/.stignore"
        let existing = (try? Files.readRegularFile(ignorePath, maxBytes: 1 << 20)).map { String(decoding: $0, as: UTF8.self) }
        if existing?.contains(".tmp-*") != true {
            try Files.writeAtomically(Array(((existing ?? "") + ignoreText).utf8), directory: path, name: ".stignore", mode: 0o600)
            changes.append("wrote \(ignorePath) (Curfew's temporary names are not synced)")
        }
        return changes
    }

    /// The warnings `curfew sync status` shows about the folder: wrong owner or mode.
    public static func warnings(_ path: String) -> [String] {
        guard let (uid, mode, isDirectory) = ownerAndMode(path), isDirectory else { return [] }
        var warnings: [String] = []
        if uid != 0 { warnings.append("the shared folder \(path) belongs to uid \(uid), not root (a child may be able to change it)") }
        if mode & 0o077 != 0 {
            warnings.append("the shared folder \(path) has mode \(octal(mode)), not 0700 (Syncthing does not sync the folder's mode: chmod 0700 \(path))")
        }
        return warnings
    }
}
