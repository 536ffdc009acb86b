import CurfewCore
import CurfewSync

/// The exit codes of docs/design.md ("Exit codes").
public enum ExitStatus: Int32, Sendable {
    case success = 0
    case failure = 1
    case invalidArguments = 64
    case badInputData = 65
    case unavailable = 69
    case notConfirmed = 75
    case notPermitted = 77
}

/// An error for people: one line, and the exit code docs/design.md gives for it.
public struct CLIError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var status: ExitStatus

    public init(_ message: String, _ status: ExitStatus) {
        self.message = message
        self.status = status
    }

    public var description: String { message }

    static func invalid(_ error: PolicyError) -> CLIError { CLIError(error.message, .invalidArguments) }

    static func file(_ error: FileError) -> CLIError {
        CLIError(error.description, error.isPermissionDenied ? .notPermitted : .failure)
    }

    static func key(_ error: KeyError) -> CLIError {
        switch error {
        case .noSigningKey(let path):
            CLIError("no parent signing key at \(path) (run curfew init, or use a computer that holds one)", .notPermitted)
        case .unreadable(let fileError):
            fileError.isPermissionDenied
                ? CLIError("\(fileError.description) (only a parent may do this; try sudo)", .notPermitted)
                : CLIError(fileError.description, .failure)
        case .malformed(let path):
            CLIError("the key file \(path) is damaged", .failure)
        }
    }
}

extension CLIError {
    /// The line and exit status of an error as people see it: a `CLIError` as it is, and the library's
    /// own errors (a broken policy rule 64, a file 1 or 77 when permission was denied, a key 77 or 1);
    /// nil for any other error, which `Curfew.main` leaves to ArgumentParser (its message's first line,
    /// exit 1; usage errors 64, help and version 0).
    init?(translating error: any Error) {
        switch error {
        case let error as CLIError: self = error
        case let error as PolicyError: self = .invalid(error)
        case let error as FileError: self = .file(error)
        case let error as KeyError: self = .key(error)
        default: return nil
        }
    }
}
