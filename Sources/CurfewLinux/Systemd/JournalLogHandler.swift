import CurfewPOSIX
import CSystemd
import Glibc
import CLinux
import Logging

/// A swift-log handler that writes structured entries to the systemd journal (`sd_journal_sendv`).
///
/// Each entry carries MESSAGE, PRIORITY (syslog level), SYSLOG_IDENTIFIER, CODE_FILE, CODE_LINE,
/// CODE_FUNC, LOGGER (the logger's label), ERROR when the event has one, and every metadata key as its
/// own field, upper-cased and reduced to `[A-Z0-9_]` (see `journalFieldName`).
///
/// When journald is absent `sd_journal_sendv` drops the entry and still returns 0, so `main` should check
/// `journalIsAvailable()` and use `StderrLogHandler` otherwise.
public struct JournalLogHandler: LogHandler {
    public var label: String
    public var identifier: String
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public var logLevel: Logger.Level = .info

    public init(label: String, identifier: String = "curfewd", metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.identifier = identifier
        self.metadataProvider = metadataProvider
    }

    /// Whether journald's native socket, /run/systemd/journal/socket, exists (`stat(2)`).
    public static func journalIsAvailable() -> Bool {
        var info = stat()
        return stat("/run/systemd/journal/socket", &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        Self.send(fields(for: event))
    }

    /// The journal fields for `event`, in the order they are sent.
    func fields(for event: LogEvent) -> [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = [
            ("MESSAGE", event.message.description),
            ("PRIORITY", String(Self.priority(event.level))),
            ("SYSLOG_IDENTIFIER", identifier),
            ("CODE_FILE", event.file),
            ("CODE_LINE", String(event.line)),
            ("CODE_FUNC", event.function),
            ("LOGGER", label),
        ]
        if let error = event.error { fields.append(("ERROR", String(describing: error))) }
        let merged = mergedMetadata(handler: metadata, provider: metadataProvider, event: event.metadata)
        for key in merged.keys.sorted() {
            guard let name = Self.journalFieldName(key), let value = merged[key] else { continue }
            fields.append((name, value.description))
        }
        return fields
    }

    /// Fields this handler sets itself; a metadata key that maps onto one is prefixed with META_.
    static let reservedFieldNames: Set<String> = [
        "MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "CODE_FILE", "CODE_LINE", "CODE_FUNC", "LOGGER", "ERROR",
    ]

    /// A metadata key as a journal field name: ASCII letters upper-cased, anything outside `[A-Z0-9_]`
    /// replaced by `_`, leading underscores dropped (those fields are journald's own, trusted ones), a
    /// leading digit or a clash with a field this handler sets prefixed with `META_`, at most 64
    /// characters. Nil when nothing is left.
    static func journalFieldName(_ key: String) -> String? {
        var name = ""
        for scalar in key.unicodeScalars {
            switch scalar {
            case "A"..."Z", "0"..."9", "_": name.unicodeScalars.append(scalar)
            case "a"..."z": name.unicodeScalars.append(Unicode.Scalar(scalar.value - 32)!)
            default: name.append("_")
            }
        }
        while name.first == "_" { name.removeFirst() }
        guard let first = name.first else { return nil }
        if first.isASCII && first.isNumber || reservedFieldNames.contains(name) { name = "META_" + name }
        return String(name.prefix(64))
    }

    /// The syslog priority journald expects in PRIORITY.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7  // LOG_DEBUG
        case .info: 6  // LOG_INFO
        case .notice: 5  // LOG_NOTICE
        case .warning: 4  // LOG_WARNING
        case .error: 3  // LOG_ERR
        case .critical: 2  // LOG_CRIT
        }
    }

    /// Sends one entry (`sd_journal_sendv`, one iovec of "NAME=value" per field; values may hold newlines
    /// or any bytes). Returns sd_journal_sendv's result: 0, or a negative errno.
    @discardableResult
    static func send(_ fields: [(name: String, value: String)]) -> Int32 {
        var buffer: [UInt8] = []
        var ranges: [(start: Int, count: Int)] = []
        for field in fields {
            let start = buffer.count
            buffer.append(contentsOf: field.name.utf8)
            buffer.append(UInt8(ascii: "="))
            buffer.append(contentsOf: field.value.utf8)
            ranges.append((start, buffer.count - start))
        }
        return buffer.withUnsafeMutableBytes { bytes -> Int32 in
            guard let base = bytes.baseAddress else { return -EINVAL }
            let vectors = ranges.map { iovec(iov_base: base + $0.start, iov_len: $0.count) }
            return vectors.withUnsafeBufferPointer { sd_journal_sendv($0.baseAddress, Int32($0.count)) }
        }
    }
}

/// A swift-log handler writing one line per message to standard error: `LEVEL message key=value ...`,
/// metadata sorted by key, values quoted when they hold spaces, quotes, `=` or control characters.
public struct StderrLogHandler: LogHandler {
    public var label: String
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public var logLevel: Logger.Level = .info
    private let fileDescriptor: Int32

    public init(label: String, metadataProvider: Logger.MetadataProvider? = nil) {
        self.init(label: label, fileDescriptor: STDERR_FILENO, metadataProvider: metadataProvider)
    }

    /// Writes to `fileDescriptor` instead of standard error (tests).
    init(label: String, fileDescriptor: Int32, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.fileDescriptor = fileDescriptor
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = mergedMetadata(handler: metadata, provider: metadataProvider, event: event.metadata)
        if let error = event.error { merged["error"] = "\(String(describing: error))" }
        let line = Self.formatLine(level: event.level, message: event.message.description, metadata: merged)
        var bytes = Array(line.utf8)
        bytes.append(UInt8(ascii: "\n"))
        // One write(2) per line where possible, so lines from several threads do not interleave.
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                guard case .success(let written) = valueOrErrno({ write(fileDescriptor, raw.baseAddress! + offset, raw.count - offset) }) else {
                    return
                }
                offset += written
            }
        }
    }

    static func formatLine(level: Logger.Level, message: String, metadata: Logger.Metadata) -> String {
        var line = level.rawValue.uppercased() + " " + escaped(message, quoteWhenNeeded: false)
        for key in metadata.keys.sorted() {
            guard let value = metadata[key] else { continue }
            line += " " + escaped(key, quoteWhenNeeded: false) + "=" + escaped(value.description, quoteWhenNeeded: true)
        }
        return line
    }

    /// Control characters become escapes so that a message stays on one line; with `quoteWhenNeeded`, an
    /// empty value or one with a space, `"`, `=` or `\` is quoted.
    static func escaped(_ text: String, quoteWhenNeeded: Bool) -> String {
        var needsQuotes = quoteWhenNeeded && text.isEmpty
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case "\"", "\\":
                if quoteWhenNeeded {
                    needsQuotes = true
                    result += "\\" + String(scalar)
                } else {
                    result.unicodeScalars.append(scalar)
                }
            case " ", "=":
                needsQuotes = needsQuotes || quoteWhenNeeded
                result.unicodeScalars.append(scalar)
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    result += "\\u{" + String(scalar.value, radix: 16) + "}"
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return needsQuotes ? "\"" + result + "\"" : result
    }
}

/// swift-log's precedence: the handler's metadata, then the provider's, then the call's.
private func mergedMetadata(
    handler: Logger.Metadata, provider: Logger.MetadataProvider?, event: Logger.Metadata?
) -> Logger.Metadata {
    var merged = handler
    if let provider { merged.merge(provider.get()) { _, new in new } }
    if let event { merged.merge(event) { _, new in new } }
    return merged
}
