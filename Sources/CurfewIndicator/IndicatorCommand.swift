#if canImport(Glibc)
    import Glibc
#endif

/// `curfew-indicator [--socket PATH] [--config FILE]`: started in every graphical login (/etc/xdg/autostart); exits 0,
/// quietly, for an account Curfew does not manage. No Foundation: it stays resident all day. A function
/// of the library so that the package's one program (Sources/curfew-multicall) runs it by that name.
public enum IndicatorCommand {
    public static func main(arguments: [String]) -> Never {
        var arguments = arguments
        var socket = getenv("CURFEW_SOCKET").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/run/curfew/curfewd.sock"
        var configuration = Pinentry.systemConfiguration
        let usage = "usage: curfew-indicator [--socket PATH] [--config FILE]"
        while let first = arguments.first {
            arguments.removeFirst()
            switch first {
            case "--socket" where !arguments.isEmpty:
                socket = arguments.removeFirst()
            case "--config" where !arguments.isEmpty:
                // Read only when root owns it alone (`Pinentry.untrusted`): the child cannot name a dialog.
                configuration = arguments.removeFirst()
            case "--version":
                print("curfew-indicator 0.1.0")
                exit(0)
            case "--help", "-h":
                print("\(usage)\nShows the time left in the panel (a StatusNotifierItem) for a child Curfew manages.")
                exit(0)
            default:
                fail("unknown argument \(first) (\(usage))", 64)
            }
        }
        switch Indicator(socketPath: socket, configurationPath: configuration).run() {
        case .notManaged:
            exit(0)
        case .failed(let reason):
            fail(reason, 1)
        }
    }

    static func fail(_ text: String, _ status: Int32) -> Never {
        let line = Array("curfew-indicator: \(text)\n".utf8)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        exit(status)
    }
}
