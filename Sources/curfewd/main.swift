import CurfewDaemon

// The agent on its own, for development (`swift run curfewd`) and the tests; the package installs the
// multi-call program (Sources/curfew-multicall) as curfewd.
Curfewd.installExecutor()
await Curfewd.start()
