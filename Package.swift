// swift-tools-version:6.1
import PackageDescription

// Swift 6 language mode everywhere (the default for tools version 6.x); warnings fail `make test`
// (it greps the build log), not here, so dependencies still build. MemberImportVisibility makes a
// module that uses another without importing it (and so without declaring it) a build error;
// `make test` also runs Tests/check-imports.py, which fails on an import of a module (a target or a
// dependency's product) that the importing target does not declare.
let strictImports: [SwiftSetting] = [.enableUpcomingFeature("MemberImportVisibility")]

let package = Package(
    name: "Curfew",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "curfew", targets: ["curfew"]),
        .executable(name: "curfewd", targets: ["curfewd"]),
        .executable(name: "curfew-multicall", targets: ["curfew-multicall"]),
        .executable(name: "curfew-bench", targets: ["curfew-bench"]),
        .executable(name: "curfew-indicator", targets: ["curfew-indicator"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        // The rules, with no I/O.
        .target(name: "CurfewCore", swiftSettings: strictImports),
        // SQLite through GRDB over the system libsqlite3 (libsqlite3-dev).
        .target(
            name: "CurfewStore",
            dependencies: [
                "CurfewCore", "CurfewPOSIX", .product(name: "GRDB", package: "GRDB.swift"),
                // SHA-256 for the audit log's hash chain.
                .product(name: "Crypto", package: "swift-crypto"),
            ], swiftSettings: strictImports),
        // The one errno layer: libc and libsystemd return codes turned into swift-system's `Errno`
        // (EINTR retried in one place), and the clocks read with their result checked. Depends on
        // nothing of ours, so Sync and Linux both reach it without reaching each other.
        .target(
            name: "CurfewPOSIX",
            dependencies: [.product(name: "SystemPackage", package: "swift-system")],
            swiftSettings: strictImports),
        // The shared directory: records, signatures, keys; the parent's PIN hash (scrypt, from _CryptoExtras).
        .target(
            name: "CurfewSync",
            dependencies: [
                "CurfewCore", "CurfewPOSIX", .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: strictImports),
        // libsystemd (libsystemd-dev): sd-daemon, sd-journal, sd-login, sd-bus.
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // libc declarations the Glibc module lacks: pidfd_open, pidfd_send_signal (glibc 2.36, libc6-dev), accept4.
        .systemLibrary(name: "CLinux"),
        // The Swift runtime's global-executor hooks (the agent's own quiet executor, issue 13).
        .systemLibrary(name: "CSwiftRuntime"),
        // The machine: /proc, the process connector, pidfds, cgroups, logind, sd_notify, the journal.
        .target(
            name: "CurfewLinux",
            dependencies: [
                "CurfewCore", "CurfewPOSIX", "CSystemd", "CLinux", "CSwiftRuntime",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: strictImports),
        // Rendering of the report model: table, CSV, JSON and HTML, for the CLI and the tests alike.
        .target(name: "CurfewReports", dependencies: ["CurfewCore"], swiftSettings: strictImports),
        // The agent's services, wired from the parts above.
        .target(
            name: "CurfewAgent",
            dependencies: [
                "CurfewCore", "CurfewStore", "CurfewSync", "CurfewLinux", "CurfewPOSIX",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SystemPackage", package: "swift-system"),
            ], swiftSettings: strictImports),
        // The agent's command line (flags, logging, the ServiceGroup), for curfewd and the multi-call program.
        .target(
            name: "CurfewDaemon",
            dependencies: [
                "CurfewAgent", "CurfewCore", "CurfewLinux", "CurfewSync", "CurfewStore",
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ], swiftSettings: strictImports),
        .executableTarget(name: "curfewd", dependencies: ["CurfewDaemon"], swiftSettings: strictImports),
        // curfew, curfewd and curfew-indicator in one program, chosen by the name it is started by (the
        // Debian package's: one Swift runtime, Foundation and ICU on disk instead of three).
        .executableTarget(
            name: "curfew-multicall",
            dependencies: ["CurfewCLI", "CurfewDaemon", "CurfewIndicator"],
            swiftSettings: strictImports),
        // The commands; never the agent's code (what both need lives in Core, Store, Sync or Linux).
        .target(
            name: "CurfewCLI",
            dependencies: [
                "CurfewCore", "CurfewStore", "CurfewSync", "CurfewLinux", "CurfewReports", "CurfewPOSIX",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ], swiftSettings: strictImports),
        .executableTarget(name: "curfew", dependencies: ["CurfewCLI"], swiftSettings: strictImports),
        // The child's tray item: a StatusNotifierItem and its dbusmenu over sd-bus, fed by the agent's
        // watch; never the agent's code.
        .target(
            name: "CurfewIndicator",
            dependencies: [
                "CurfewCore", "CurfewLinux", "CLinux", "CurfewPOSIX", .product(name: "SystemPackage", package: "swift-system"),
            ], swiftSettings: strictImports),
        .executableTarget(name: "curfew-indicator", dependencies: ["CurfewIndicator"], swiftSettings: strictImports),
        .executableTarget(
            name: "curfew-bench",
            dependencies: [
                "CurfewCore", "CurfewStore", "CurfewSync", "CurfewLinux", "CurfewAgent", "CurfewReports", "CurfewPOSIX",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ], swiftSettings: strictImports),
        .testTarget(name: "CurfewCoreTests", dependencies: ["CurfewCore", "CurfewTestSupport"]),
        .testTarget(
            name: "CurfewStoreTests",
            dependencies: ["CurfewStore", "CurfewCore", "CurfewTestSupport", .product(name: "GRDB", package: "GRDB.swift")]),
        // The scan's record index lives in the store: the sync tests keep one, as the agent does.
        .testTarget(name: "CurfewSyncTests", dependencies: ["CurfewSync", "CurfewStore", "CurfewCore", "CurfewTestSupport"]),
        // Installs the system's tz database as the zone source of the test bundle before any test runs.
        .target(name: "CurfewTestZones", path: "Tests/CurfewTestZones"),
        // Test helpers shared by test targets: a private D-Bus with python-dbusmock's logind; the zone source.
        .target(
            name: "CurfewTestSupport", dependencies: ["CurfewLinux", "CSystemd", "CurfewCore", "CurfewSync", "CurfewTestZones"],
            path: "Tests/CurfewTestSupport"),
        .testTarget(
            name: "CurfewLinuxTests",
            dependencies: [
                "CurfewLinux", "CurfewCore", "CLinux", "CSystemd", "CurfewPOSIX", "CurfewTestSupport",
                .product(name: "Logging", package: "swift-log"), .product(name: "SystemPackage", package: "swift-system"),
            ]),
        .testTarget(
            name: "CurfewAgentTests",
            dependencies: [
                "CurfewAgent", "CurfewCore", "CurfewStore", "CurfewSync", "CurfewLinux", "CurfewReports", "CurfewTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]),
        // Runs the built binaries; depending on the executable makes `swift test` build it.
        .testTarget(
            name: "EndToEndTests", dependencies: [
                "CurfewCore", "CurfewSync", "CurfewLinux", "CLinux", "CurfewTestSupport", "curfew", "curfewd", "curfew-indicator",
            ]),
    ]
)
