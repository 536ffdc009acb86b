import CurfewCore

/// Where app catalogs live on a computer and how they are read from disk.
public enum CatalogFiles {
    /// `/etc/curfew/apps` (a parent's own definitions) before `/usr/share/curfew/apps` (shipped);
    /// `$CURFEW_CATALOG_DIRS` (colon-separated) replaces both.
    public static func directories(environment: [String: String]) -> [String] {
        if let list = environment["CURFEW_CATALOG_DIRS"], !list.isEmpty {
            return list.split(separator: ":").map(String.init)
        }
        return ["/etc/curfew/apps", "/usr/share/curfew/apps"]
    }

    /// Reads every `*.json` of each directory. A definition in an earlier directory replaces one of
    /// the same name in a later directory; within one directory a name may appear once. Missing
    /// directories are skipped. Interpreter lists (`interpreters.json`) of every directory add up.
    public static func load(directories: [String]) throws -> AppCatalog {
        var definitions: [AppDefinition] = []
        var interpreters = InterpreterSet()
        var names = Set<String>()
        for directory in directories {
            guard let entries = try? Files.list(directory) else { continue }
            var files: [(name: String, bytes: [UInt8])] = []
            for name in entries where name.hasSuffix(".json") && !name.hasPrefix(".") {
                files.append((name: "\(directory)/\(name)", bytes: try Files.readRegularFile("\(directory)/\(name)", maxBytes: 1 << 20)))
            }
            let catalog = try AppCatalog.decode(files: files)
            for definition in catalog.definitions where names.insert(definition.name).inserted {
                definitions.append(definition)
            }
            // Interpreter and loader lists add up across directories.
            interpreters.interpreters += catalog.interpreters.interpreters.filter { !interpreters.interpreters.contains($0) }
            interpreters.loaders += catalog.interpreters.loaders.filter { !interpreters.loaders.contains($0) }
        }
        return AppCatalog(definitions, interpreters: interpreters)
    }
}
