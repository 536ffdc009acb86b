/// Text that a child or a process controls (a request's reason, a program's file name, a host name
/// from the shared directory), made safe for each form it is written in. This is the one place that
/// knows how: table and line output, CSV and HTML all call it; JSON keeps the text exact, and its
/// pretty form for people (`JSONValue.prettyString`) writes control and layout characters as `\u`
/// escapes.
public enum UntrustedText {
    public enum Form: Sendable, CaseIterable {
        /// Table and line output for a terminal: no control character reaches it.
        case terminal
        /// One CSV cell (RFC 4180) that a spreadsheet never takes for a formula.
        case csv
        /// HTML text or an attribute value in double quotes.
        case html
    }

    public static func escaped(_ text: String, for form: Form) -> String {
        switch form {
        case .terminal: terminal(text)
        case .csv: csvCell(text)
        case .html: html(text)
        }
    }

    /// C0 (U+0000-U+001F, ESC and newlines included), DEL and C1 (U+0080-U+009F): what a terminal
    /// may act on instead of showing.
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// Invisible characters that reorder, hide or break what is shown: the bidirectional marks,
    /// embeddings, overrides and isolates ("Trojan Source": U+061C, U+200E, U+200F, U+202A-U+202E,
    /// U+2066-U+2069), every other invisible format character (Unicode general category Cf: soft
    /// hyphen, zero-width space, word joiner, byte order mark, tags, ...) but the zero-width joiner and
    /// non-joiner (U+200C, U+200D), which emoji and several scripts need and which move nothing, and the
    /// Unicode line and paragraph separators.
    public static func isLayoutControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0xAD, 0x200C, 0x200D: false
        case 0x2028, 0x2029: true
        default: scalar.properties.generalCategory == .format
        }
    }

    /// `\u{202e}`: how a layout control is shown in every form but JSON.
    static func shown(_ scalar: Unicode.Scalar) -> String { "\\u{" + hex(scalar.value, digits: 1) + "}" }

    public static func containsControlCharacters(_ text: String) -> Bool {
        text.unicodeScalars.contains(where: isControl)
    }

    /// For table and line output: `\n`, `\r`, `\t`, other C0 and DEL as `\x1b`, C1 and layout
    /// controls as `\u{85}`, and a backslash as `\\`, so what is shown is unambiguous and one line.
    public static func terminal(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { isControl($0) || isLayoutControl($0) || $0 == "\\" }) else { return text }
        var output = ""
        output.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    output += "\\x" + hex(scalar.value, digits: 2)
                } else if isControl(scalar) || isLayoutControl(scalar) {
                    output += shown(scalar)
                } else {
                    output.unicodeScalars.append(scalar)
                }
            }
        }
        return output
    }

    /// One CSV cell: a cell that begins with `=`, `+`, `-`, `@`, tab or carriage return gets a
    /// leading `'` (OWASP's rule against formula injection); other control characters than tab,
    /// CR and LF are written as in `terminal` (a CSV file is often printed to a terminal); then a
    /// cell holding `,`, `"`, CR or LF is quoted with `"` doubled (RFC 4180).
    ///
    /// Only for text: numbers the program writes itself (such as `-5`) are not passed through here.
    public static func csvCell(_ text: String) -> String {
        var cell = ""
        cell.reserveCapacity(text.utf8.count + 2)
        if let first = text.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) { cell = "'" }
        for scalar in text.unicodeScalars {
            if scalar != "\t" && scalar != "\r" && scalar != "\n" && (isControl(scalar) || isLayoutControl(scalar)) {
                cell += terminal(String(scalar))
            } else {
                cell.unicodeScalars.append(scalar)
            }
        }
        guard cell.unicodeScalars.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return cell }
        var quoted = "\""
        for scalar in cell.unicodeScalars {
            // Scalars, not Characters: a quote followed by a combining mark is one Character.
            if scalar == "\"" { quoted += "\"\"" } else { quoted.unicodeScalars.append(scalar) }
        }
        return quoted + "\""
    }

    /// HTML text and double- or single-quoted attribute values: `&<>"'` as character references;
    /// control characters (other than tab and newline), DEL and C1, which HTML does not allow, as
    /// U+FFFD; layout controls (a right-to-left override, a zero-width space) shown as in `terminal`,
    /// `\u{202e}`, so they neither reorder nor hide what the page shows.
    public static func html(_ text: String) -> String {
        var output = ""
        output.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": output += "&amp;"
            case "<": output += "&lt;"
            case ">": output += "&gt;"
            case "\"": output += "&quot;"
            case "'": output += "&#39;"
            case "\t", "\n": output.unicodeScalars.append(scalar)
            default:
                if isControl(scalar) {
                    output += "\u{FFFD}"
                } else if isLayoutControl(scalar) {
                    output += shown(scalar)
                } else {
                    output.unicodeScalars.append(scalar)
                }
            }
        }
        return output
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}

extension String {
    /// The longest prefix of at most `maxBytes` UTF-8 bytes that ends on a character boundary.
    public func prefix(utf8Bytes maxBytes: Int) -> String {
        guard utf8.count > maxBytes else { return self }
        var output = ""
        var count = 0
        for character in self {
            let size = character.utf8.count
            if count + size > maxBytes { break }
            output.append(character)
            count += size
        }
        return output
    }
}
