import CurfewIndicator
import Foundation

// curfew-indicator [--socket PATH]: started in every graphical login (/etc/xdg/autostart); exits 0,
// quietly, for an account Curfew does not manage.
var arguments = Array(CommandLine.arguments.dropFirst())
var socket = ProcessInfo.processInfo.environment["CURFEW_SOCKET"].flatMap { $0.isEmpty ? nil : $0 } ?? "/run/curfew/curfewd.sock"
while let first = arguments.first {
    arguments.removeFirst()
    switch first {
    case "--socket" where !arguments.isEmpty:
        socket = arguments.removeFirst()
    case "--version":
        print("curfew-indicator 0.1.0")
        exit(0)
    case "--help", "-h":
        print("usage: curfew-indicator [--socket PATH]\nShows the time left in the panel (a StatusNotifierItem) for a child Curfew manages.")
        exit(0)
    default:
        FileHandle.standardError.write(Data("curfew-indicator: unknown argument \(first) (usage: curfew-indicator [--socket PATH])\n".utf8))
        exit(64)
    }
}
switch Indicator(socketPath: socket).run() {
case .notManaged:
    exit(0)
case .failed(let reason):
    FileHandle.standardError.write(Data("curfew-indicator: \(reason)\n".utf8))
    exit(1)
}
