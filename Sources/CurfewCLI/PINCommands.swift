import ArgumentParser
import CurfewCore
import CurfewSync
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// `curfew pin set` and `curfew pin clear`: the parent's PIN, with which a parent approves extra time
/// on the child's own screen (the indicator's "A parent approves … here…").
struct PINCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Set or clear the parent's PIN, with which a parent approves extra time on the child's screen.",
        discussion: """
            With a PIN set, the child's panel item (curfew-indicator) offers "A parent approves 15 min / 30 min / \
            1 hour here…": it files a request, opens the system's PIN dialog (the pinentry named in \
            /etc/default/curfew, never one from the child's environment), and a parent standing by types the PIN. \
            The PIN answers that one request, once: the agent gives at most what it asked, and at most the \
            day's maximum (pin set --max-per-day, 1h unless set) in any 24 hours, as curfew approve would (a grant \
            signed with this computer's parent key, so other computers and the audit log see it); curfew requests \
            shows the request answered by the PIN. Each child may try at most \(PINRules.maxTries) times in \
            \(PINRules.tryWindowSeconds / 60) minutes, then ever more slowly (the wait doubles with each wrong try in \
            a row), and at most \(PINRules.maxWrongPerDay) wrong tries in 24 hours; every try, right or wrong, and \
            every approval is an event (curfew events), never the PIN.
            """,
        subcommands: [PINSet.self, PINClear.self])
}

struct PINSet: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Set the parent's PIN (root only); asked twice on the terminal, never on the command line.",
        discussion: """
            \(PINRules.rule.prefix(1).uppercased() + PINRules.rule.dropFirst()). The PIN is read from the terminal \
            with echo off (or, when standard input is not a terminal, as two lines from it) and kept as a salted \
            scrypt hash in <state-dir>/\(ParentPINHash.fileName), mode 0600, replacing any PIN before, with \
            --max-per-day: the most the PIN may approve in any 24 hours (1h unless given). Exit status 64 when the \
            two entries differ, the PIN breaks the rule or the maximum is not a duration from 1m to 8h, 77 when not \
            run as root.
            """)

    @OptionGroup var location: LocationOptions

    @Option(name: .customLong("max-per-day"), help: "The most the PIN may approve in any 24 hours, like 30m or 1h (default 1h).")
    var maxPerDay: String?

    func run() throws {
        guard geteuid() == 0 else {
            throw CLIError("only a parent may set the PIN (run as root: sudo curfew pin set)", .notPermitted)
        }
        let range = PINRules.maxMinutesPerDay
        let maxMinutes = try maxPerDay.map { text in
            let minutes = try? TimeAllowance.parseMinutes(text)
            guard let minutes, range.contains(minutes) else {
                throw CLIError(
                    "--max-per-day must be a duration from \(TimeAllowance.format(minutes: range.lowerBound)) to "
                        + "\(TimeAllowance.format(minutes: range.upperBound)) like 30m or 1h, got \(quoted(text)); nothing changed",
                    .invalidArguments)
            }
            return minutes
        } ?? PINRules.defaultMaxMinutesPerDay
        let workspace = Workspace(location)
        // Approvals are grants signed with this computer's parent key: without it a PIN could never work.
        _ = try workspace.requireParentKey()
        let reader = try SecretReader()
        let pin = try reader.read(prompt: "New parent PIN (\(PINRules.minDigits)-\(PINRules.maxDigits) digits): ")
        try PINRules.validate(pin)
        let again = try reader.read(prompt: "The same PIN again: ")
        guard again == pin else { throw CLIError("the two PINs differ; nothing changed", .invalidArguments) }
        let hash = try ParentPINHash.make(pin: pin, maxMinutesPerDay: maxMinutes)
        let file = ParentPINFile(stateDirectory: workspace.stateDirectory)
        try file.store(hash)
        Output.line("parent PIN set (\(file.path)); a parent can now approve extra time on a child's screen")
        if maxPerDay != nil {
            Output.line("the PIN approves at most \(TimeAllowance.format(minutes: maxMinutes)) in any 24 hours")
        }
    }
}

struct PINClear: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clear",
        abstract: "Remove the parent's PIN (root only): approving on the child's screen stops working.")

    @OptionGroup var location: LocationOptions

    func run() throws {
        guard geteuid() == 0 else {
            throw CLIError("only a parent may clear the PIN (run as root: sudo curfew pin clear)", .notPermitted)
        }
        let workspace = Workspace(location)
        try workspace.requireStateDirectory()
        let file = ParentPINFile(stateDirectory: workspace.stateDirectory)
        let removed = try file.remove()
        Output.line(removed ? "parent PIN removed" : "no parent PIN was set")
    }
}

/// The terminal's settings while echo is off, for the signal handler that puts them back.
nonisolated(unsafe) private var terminalBeforeSecret: (descriptor: FileDescriptor, settings: termios)?

/// Reads secrets line by line: from the controlling terminal with echo off when standard input is a
/// terminal (the prompt goes there too), else from standard input without a prompt (scripts, tests).
/// Never from the command line, where other users could read it in /proc.
struct SecretReader: ~Copyable {
    /// The controlling terminal, opened here and closed with the reader; or standard input (borrowed).
    let descriptor: FileDescriptor
    let isTerminal: Bool
    static let maxBytes = 256

    init() throws {
        if isatty(0) == 1 {
            let terminal = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
            descriptor = terminal >= 0 ? FileDescriptor(rawValue: terminal) : .standardInput
            isTerminal = true
        } else {
            descriptor = .standardInput
            isTerminal = false
        }
    }

    deinit {
        if descriptor != .standardInput { try? descriptor.close() }
    }

    /// One line without its newline; fails (64) at end of input.
    func read(prompt: String) throws -> String {
        guard isTerminal else { return try readLine() }
        write(prompt)
        var settings = termios()
        guard tcgetattr(descriptor.rawValue, &settings) == 0 else { return try readLine() }
        var quiet = settings
        quiet.c_lflag &= ~tcflag_t(ECHO | ECHONL)
        terminalBeforeSecret = (descriptor, settings)
        // Ctrl-C while echo is off must not leave the terminal silent.
        let previous = signal(SIGINT) { _ in
            if let saved = terminalBeforeSecret {
                var settings = saved.settings
                tcsetattr(saved.descriptor.rawValue, TCSAFLUSH, &settings)
            }
            _exit(130)
        }
        tcsetattr(descriptor.rawValue, TCSAFLUSH, &quiet)
        defer {
            tcsetattr(descriptor.rawValue, TCSAFLUSH, &settings)
            terminalBeforeSecret = nil
            signal(SIGINT, previous)
            write("\n")
        }
        return try readLine()
    }

    private func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(descriptor == .standardInput ? 2 : descriptor.rawValue, $0.baseAddress, $0.count) }
    }

    /// Reads byte by byte up to a newline, so the second line stays for the second call.
    private func readLine() throws -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = Glibc.read(descriptor.rawValue, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 {
                if bytes.isEmpty { throw CLIError("no PIN was typed (end of input); nothing changed", .invalidArguments) }
                break
            }
            if byte == 0x0A { break }
            guard bytes.count < Self.maxBytes else {
                throw CLIError("\(PINRules.rule), got more than \(Self.maxBytes) characters", .invalidArguments)
            }
            bytes.append(byte)
        }
        if bytes.last == 0x0D { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
