#if canImport(Glibc)
    import Glibc
#endif

/// `<state-dir>/managed-users`: the names of the users this computer enforces a policy for, one per
/// line, written by the agent whenever that set changes. It lives outside the database so the PAM
/// login check can still tell "a managed user whose state cannot be read" (refused unless the
/// installation fails open) from "a user Curfew never managed" (always let in) when the database or
/// the shared directory is damaged or missing.
///
/// The agent also publishes the same names next to its socket (`published`, `/run/curfew/managed-users`,
/// root's, readable by everyone), for the one check that runs without root and without an answer: a
/// screen locker's `check-login` of its own user while the agent is stopped, frozen or flooded. A child
/// cannot read the state directory; without this list their own check could not tell that they are
/// managed, and would let them in.
public enum ManagedUsers {
    public static let fileName = "managed-users"

    public static func read(stateDirectory: String) -> Set<String>? {
        guard let bytes = try? Files.readRegularFile("\(stateDirectory)/\(fileName)", maxBytes: 1 << 20) else { return nil }
        return parse(bytes)
    }

    public static func write(_ users: Set<String>, stateDirectory: String) throws(FileError) {
        _ = try Files.writeAtomically(bytes(users), directory: stateDirectory, name: fileName, mode: 0o600)
    }

    /// The published list's path for the agent whose socket is `socketPath`: beside it.
    public static func published(socketPath: String) -> String {
        "\(Files.parentDirectory(of: socketPath))/\(fileName)"
    }

    /// Publishes `users` beside the socket (mode 0644; the directory is made 0755 if missing).
    public static func publish(_ users: Set<String>, socketPath: String) throws(FileError) {
        let directory = Files.parentDirectory(of: socketPath)
        try Files.makeDirectories(directory, mode: 0o755)
        _ = try Files.writeAtomically(bytes(users), directory: directory, name: fileName, mode: 0o644)
    }

    /// The published list, when it can be trusted: a regular file (no symlink followed) owned by root
    /// and writable by nobody else, in a directory owned by root and writable by nobody else. Anything
    /// else is nil: nobody but root can have written it.
    public static func readPublished(socketPath: String) -> Set<String>? {
        let directory = Files.parentDirectory(of: socketPath)
        var info = stat()
        guard lstat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == 0, info.st_mode & 0o022 == 0
        else { return nil }
        let path = published(socketPath: socketPath)
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == 0, info.st_mode & 0o022 == 0,
            let bytes = try? Files.readRegularFile(path, maxBytes: 1 << 20)
        else { return nil }
        return parse(bytes)
    }

    static func parse(_ bytes: [UInt8]) -> Set<String> {
        Set(String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init))
    }

    static func bytes(_ users: Set<String>) -> [UInt8] {
        Array(users.sorted().map { $0 + "\n" }.joined().utf8)
    }
}
