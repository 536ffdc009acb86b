/// `<state-dir>/managed-users`: the names of the users this computer enforces a policy for, one per
/// line, written by the agent whenever that set changes. It lives outside the database so the PAM
/// login check can still tell "a managed user whose state cannot be read" (refused unless the
/// installation fails open) from "a user Curfew never managed" (always let in) when the database or
/// the shared directory is damaged or missing.
public enum ManagedUsers {
    public static let fileName = "managed-users"

    public static func read(stateDirectory: String) -> Set<String>? {
        guard let bytes = try? Files.readRegularFile("\(stateDirectory)/\(fileName)", maxBytes: 1 << 20) else { return nil }
        return Set(String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init))
    }

    public static func write(_ users: Set<String>, stateDirectory: String) throws(FileError) {
        let text = users.sorted().map { $0 + "\n" }.joined()
        _ = try Files.writeAtomically(Array(text.utf8), directory: stateDirectory, name: fileName, mode: 0o600)
    }
}
