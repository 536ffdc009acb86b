import CurfewIndicator

// The indicator on its own, for development and the tests; the package runs it as the multi-call
// program (Sources/curfew-multicall) under the name curfew-indicator.
IndicatorCommand.main(arguments: Array(CommandLine.arguments.dropFirst()))
