import CurfewPOSIX
import CurfewCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where commands write: stdout for results, stderr for warnings and errors.
enum Output {
    /// Unbuffered writes to file descriptor 2 (the C `stderr` global is not concurrency-safe).
    static func writeError(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = valueOrErrno { bytes.withUnsafeMutableBytes { write(2, $0.baseAddress! + offset, $0.count - offset) } }
            guard case .success(let count) = written, count > 0 else { return }
            offset += count
        }
    }

    static func line(_ text: String = "") {
        print(text)
    }

    /// A command's `--json` output: `value` encoded, two-space indented, its fields in their order.
    static func json(_ value: some Encodable) {
        line(JSONValueEncoder().value(of: value).prettyString)
    }

    /// A line on stdout at once, unbuffered: for commands that wait after saying something (a pipe
    /// would otherwise hold the pairing code back until the command ends).
    static func lineNow(_ text: String) {
        fflush(nil)
        var bytes = Array((text + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let written = valueOrErrno { bytes.withUnsafeMutableBytes { write(1, $0.baseAddress! + offset, $0.count - offset) } }
            guard case .success(let count) = written, count > 0 else { return }
            offset += count
        }
    }

    static func warning(_ text: String) {
        writeError("curfew: warning: \(text)\n")
    }

    static func error(_ text: String) {
        writeError("curfew: \(text)\n")
    }

    /// Asks a yes/no question on stderr and reads the answer from stdin; only "y" or "yes" is yes.
    static func confirm(_ question: String) -> Bool {
        writeError("\(question) [y/N] ")
        guard let answer = readLine(strippingNewline: true)?.lowercased() else {
            writeError("\n")
            return false
        }
        return answer == "y" || answer == "yes"
    }
}

/// Left-aligned columns, padded to the widest cell of each column. Every cell is shown as
/// `UntrustedText.terminal` gives it: cells hold names and reasons that children and processes
/// chose, and a control character must neither reach the terminal nor start a fake row.
func table(_ rows: [[String]], indent: String = "  ") -> [String] {
    let rows = rows.map { $0.map(UntrustedText.terminal) }
    guard let columns = rows.map(\.count).max() else { return [] }
    var widths = [Int](repeating: 0, count: columns)
    for row in rows {
        for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
    }
    return rows.map { row in
        var line = indent
        for (index, cell) in row.enumerated() {
            line += cell
            if index < row.count - 1 { line += String(repeating: " ", count: widths[index] - cell.count + 2) }
        }
        return line
    }
}
