import ArgumentParser
import CurfewCore
import CurfewSync

/// SPEC.md's exit codes.
public enum ExitStatus: Int32, Sendable {
    case success = 0
    case failure = 1
    case invalidArguments = 64
    case badInputData = 65
    case unavailable = 69
    case notConfirmed = 75
    case notPermitted = 77
}

/// An error for people: one line, and the exit code SPEC.md gives for it.
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

/// Runs a body, turning the library's error types into `CLIError`s.
func translatingErrors<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as CLIError {
        throw error
    } catch let error as PolicyError {
        throw CLIError.invalid(error)
    } catch let error as FileError {
        throw CLIError.file(error)
    } catch let error as KeyError {
        throw CLIError.key(error)
    } catch let error as ExitCode {
        throw error
    } catch {
        throw CLIError("\(error)", .failure)
    }
}
