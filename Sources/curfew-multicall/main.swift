import CurfewCLI
import CurfewDaemon
import CurfewIndicator

#if canImport(Glibc)
    import Glibc
#endif

// One program for the package: installed as /usr/bin/curfew, with /usr/sbin/curfewd a link to it. The
// name it was started by chooses: `curfewd` is the agent, `curfew-indicator` the child's tray item
// (/usr/bin/curfew-indicator, a link too), anything else the command. One copy of the
// Swift runtime, Foundation and ICU on disk and in the page cache instead of two.
let name = CommandLine.arguments.first.map { $0.split(separator: "/").last.map(String.init) ?? $0 } ?? "curfew"
if name == "curfewd" {
    Curfewd.installExecutor()
    await Curfewd.start()
} else if name == "curfew-indicator" {
    IndicatorCommand.main(arguments: Array(CommandLine.arguments.dropFirst()))
} else {
    exit(Curfew.main(arguments: Array(CommandLine.arguments.dropFirst())))
}
