import CurfewCLI

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

exit(Curfew.main(arguments: Array(CommandLine.arguments.dropFirst())))
