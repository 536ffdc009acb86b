import CurfewCore
import Foundation

/// What Curfew needs of a Syncthing instance's own `config.xml`: the GUI (REST API) address, its API
/// key and whether it uses TLS, and each folder's id, path, type and file watcher settings. The file is
/// written by Syncthing itself (attributes in double quotes, one element per line); this reads it
/// without an XML library, element by element, and does not change it.
public struct SyncthingConfig: Sendable, Equatable {
    public struct Folder: Sendable, Equatable {
        public var id: String
        public var path: String
        public var type: String
        public var watcherEnabled: Bool
        public var watcherDelaySeconds: Double
        public var rescanIntervalSeconds: Double
        public var ignorePermissions: Bool
        public var paused: Bool
        /// Device ids the folder is shared with (this device's own among them).
        public var devices: [String]

        /// How long after a change Syncthing sends it: the watcher's delay, or with the watcher off the
        /// full rescan interval.
        public var syncDelaySeconds: Double { watcherEnabled ? watcherDelaySeconds : rescanIntervalSeconds }
    }

    public var guiAddress: String
    public var guiTLS: Bool
    public var apiKey: String
    public var folders: [Folder]

    public static let folderID = "curfew"

    public func folder(_ id: String = SyncthingConfig.folderID) -> Folder? { folders.first { $0.id == id } }

    public struct ParseError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    public static func parse(_ text: String) throws(ParseError) -> SyncthingConfig {
        guard let gui = XMLElements.first("gui", in: text) else {
            throw ParseError(description: "Syncthing's config.xml has no <gui> element")
        }
        guard let address = XMLElements.first("address", in: gui.inner)?.text, !address.isEmpty else {
            throw ParseError(description: "Syncthing's config.xml has no GUI address")
        }
        guard let apiKey = XMLElements.first("apikey", in: gui.inner)?.text, !apiKey.isEmpty else {
            throw ParseError(description: "Syncthing's config.xml has no API key")
        }
        var folders: [Folder] = []
        for element in XMLElements.all("folder", in: text) {
            let attributes = element.attributes
            guard let id = attributes["id"], let path = attributes["path"] else { continue }
            folders.append(
                Folder(
                    id: id, path: path, type: attributes["type"] ?? "sendreceive",
                    watcherEnabled: attributes["fsWatcherEnabled"] != "false",
                    watcherDelaySeconds: attributes["fsWatcherDelayS"].flatMap(Double.init) ?? 10,
                    rescanIntervalSeconds: attributes["rescanIntervalS"].flatMap(Double.init) ?? 3600,
                    ignorePermissions: attributes["ignorePerms"] == "true",
                    paused: XMLElements.first("paused", in: element.inner)?.text == "true",
                    devices: XMLElements.all("device", in: element.inner).compactMap { $0.attributes["id"] }))
        }
        return SyncthingConfig(guiAddress: address, guiTLS: gui.attributes["tls"] == "true", apiKey: apiKey, folders: folders)
    }

    /// Where Syncthing keeps its configuration for a home directory: `$STHOME`-style `home` when given
    /// (`syncthing -home DIR`), else the places Syncthing uses for `user home` (1.19 and later ones).
    public static func candidatePaths(home: String?, userHome: String) -> [String] {
        if let home { return ["\(home)/config.xml"] }
        return ["\(userHome)/.local/state/syncthing/config.xml", "\(userHome)/.config/syncthing/config.xml"]
    }

    /// The first configuration that exists among `candidatePaths`, read and parsed; nil when none exists.
    public static func load(home: String?, userHome: String = "/root") throws -> (path: String, config: SyncthingConfig)? {
        for path in candidatePaths(home: home, userHome: userHome) where Files.exists(path) {
            let bytes = try Files.readRegularFile(path, maxBytes: 16 << 20)
            return (path, try parse(String(decoding: bytes, as: UTF8.self)))
        }
        return nil
    }
}

/// Just enough of XML for a file Syncthing wrote: elements by name, their attributes, their text.
enum XMLElements {
    struct Element {
        var attributes: [String: String]
        var inner: String
        var text: String { unescape(inner.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    static func all(_ name: String, in text: String) -> [Element] {
        var result: [Element] = []
        var rest = Substring(text)
        while let element = next(name, in: &rest) { result.append(element) }
        return result
    }

    static func first(_ name: String, in text: String) -> Element? {
        var rest = Substring(text)
        return next(name, in: &rest)
    }

    private static func next(_ name: String, in rest: inout Substring) -> Element? {
        while let open = rest.range(of: "<\(name)") {
            let after = rest[open.upperBound...]
            guard let first = after.first, first == ">" || first == " " || first == "/" || first == "\n" || first == "\t" else {
                rest = after
                continue
            }
            guard let close = after.firstIndex(of: ">") else { return nil }
            var head = after[..<close]
            let selfClosing = head.hasSuffix("/")
            if selfClosing { head = head.dropLast() }
            let attributes = parseAttributes(head)
            let bodyStart = after.index(after: close)
            if selfClosing {
                rest = after[bodyStart...]
                return Element(attributes: attributes, inner: "")
            }
            guard let end = after[bodyStart...].range(of: "</\(name)>") else { return nil }
            rest = after[end.upperBound...]
            return Element(attributes: attributes, inner: String(after[bodyStart..<end.lowerBound]))
        }
        return nil
    }

    private static func parseAttributes(_ head: Substring) -> [String: String] {
        var attributes: [String: String] = [:]
        var rest = head
        while let equals = rest.firstIndex(of: "=") {
            let key = rest[..<equals].trimmingCharacters(in: .whitespacesAndNewlines)
            let afterEquals = rest[rest.index(after: equals)...]
            guard let quote = afterEquals.firstIndex(where: { $0 == "\"" || $0 == "'" }) else { break }
            let quoteCharacter = afterEquals[quote]
            let valueStart = afterEquals.index(after: quote)
            guard let valueEnd = afterEquals[valueStart...].firstIndex(of: quoteCharacter) else { break }
            attributes[String(key)] = unescape(String(afterEquals[valueStart..<valueEnd]))
            rest = afterEquals[afterEquals.index(after: valueEnd)...]
        }
        return attributes
    }

    static func unescape(_ text: String) -> String {
        guard text.contains("&") else { return text }
        return text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&#39;", with: "'").replacingOccurrences(of: "&amp;", with: "&")
    }
}

