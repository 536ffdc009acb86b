import Testing

@testable import CurfewCore

@Suite("Untrusted text in each output form")
struct UntrustedTextTests {
    static let esc = "\u{1B}"
    static let bel = "\u{07}"

    @Test(
        "terminal: control characters shown escaped, a backslash doubled, everything else as is",
        arguments: [
            ("firefox", "firefox"),
            ("", ""),
            ("Größe 漢字 🎮", "Größe 漢字 🎮"),
            ("\(esc)[2J", "\\x1b[2J"),
            ("\(esc)]0;pwned\(bel)", "\\x1b]0;pwned\\x07"),
            ("homework\n7  kid  2h", "homework\\n7  kid  2h"),
            ("a\rb\tc", "a\\rb\\tc"),
            ("nul\u{0}", "nul\\x00"),
            ("del\u{7F}", "del\\x7f"),
            ("c1\u{85}\u{9B}31m", "c1\\u{85}\\u{9b}31m"),
            ("evil\u{202E}gpj.exe", "evil\\u{202e}gpj.exe"),
            ("line\u{2028}sep", "line\\u{2028}sep"),
            ("back\\slash", "back\\\\slash"),
            // What was escaped cannot pass for what was not.
            ("\\x1b", "\\\\x1b"),
            // A combining mark after ESC does not hide it.
            ("\(esc)\u{301}[2J", "\\x1b\u{301}[2J"),
        ])
    func terminal(input: String, expected: String) {
        #expect(UntrustedText.terminal(input) == expected)
        #expect(UntrustedText.escaped(input, for: .terminal) == expected)
        #expect(!UntrustedText.containsControlCharacters(UntrustedText.terminal(input)))
    }

    @Test(
        "csv: RFC 4180 quoting, and a leading ' before what a spreadsheet would take for a formula",
        arguments: [
            ("firefox", "firefox"),
            ("", ""),
            ("=HYPERLINK(\"http://x\",\"homework\")", "\"'=HYPERLINK(\"\"http://x\"\",\"\"homework\"\")\""),
            ("=1+2", "'=1+2"),
            ("+1", "'+1"),
            ("-5", "'-5"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\tcmd", "'\tcmd"),
            ("\rcmd", "\"'\rcmd\""),
            ("a,b", "\"a,b\""),
            ("say \"hi\"", "\"say \"\"hi\"\"\""),
            ("two\nlines", "\"two\nlines\""),
            ("a=1", "a=1"),
            ("\(esc)[2J", "\\x1b[2J"),
            // A quote with a combining mark is one Character but still a quote to a CSV reader.
            ("\"\u{301},x", "\"\"\"\u{301},x\""),
        ])
    func csv(input: String, expected: String) {
        #expect(UntrustedText.csvCell(input) == expected)
        #expect(UntrustedText.escaped(input, for: .csv) == expected)
    }

    @Test(
        "html: markup characters as references, control characters as U+FFFD",
        arguments: [
            ("firefox", "firefox"),
            ("<script>alert('x')</script>", "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"),
            ("a & \"b\"", "a &amp; &quot;b&quot;"),
            ("\(esc)[2J", "\u{FFFD}[2J"),
            ("tab\tand\nnewline", "tab\tand\nnewline"),
            ("c1\u{85}", "c1\u{FFFD}"),
        ])
    func html(input: String, expected: String) {
        #expect(UntrustedText.html(input) == expected)
        #expect(UntrustedText.escaped(input, for: .html) == expected)
    }

    @Test(
        "layout controls (bidi overrides, isolates, invisible format characters) are shown escaped in every form",
        arguments: [
            // (input, terminal and HTML, JSON for people)
            ("game\u{202E}txt.exe", "game\\u{202e}txt.exe", "\"game\\u202etxt.exe\""),
            ("\u{202A}\u{202B}\u{202C}\u{202D}", "\\u{202a}\\u{202b}\\u{202c}\\u{202d}", "\"\\u202a\\u202b\\u202c\\u202d\""),
            ("\u{2066}a\u{2067}b\u{2068}c\u{2069}", "\\u{2066}a\\u{2067}b\\u{2068}c\\u{2069}", "\"\\u2066a\\u2067b\\u2068c\\u2069\""),
            ("lrm\u{200E}rlm\u{200F}alm\u{061C}", "lrm\\u{200e}rlm\\u{200f}alm\\u{61c}", "\"lrm\\u200erlm\\u200falm\\u061c\""),
            ("zw\u{200B}sp\u{2060}bom\u{FEFF}shy\u{AD}", "zw\\u{200b}sp\\u{2060}bom\\u{feff}shy\\u{ad}", "\"zw\\u200bsp\\u2060bom\\ufeffshy\\u00ad\""),
            ("tag\u{E0041}", "tag\\u{e0041}", "\"tag\\udb40\\udc41\""),
            ("line\u{2028}para\u{2029}", "line\\u{2028}para\\u{2029}", "\"line\\u2028para\\u2029\""),
            // What joins without moving anything stays: emoji and scripts need it.
            ("👩\u{200D}💻 می\u{200C}خواهم", "👩\u{200D}💻 می\u{200C}خواهم", "\"👩\u{200D}💻 می\u{200C}خواهم\""),
            ("Größe 漢字 שלום", "Größe 漢字 שלום", "\"Größe 漢字 שלום\""),
        ])
    func layoutControls(input: String, shown: String, json: String) throws {
        #expect(UntrustedText.terminal(input) == shown)
        #expect(UntrustedText.html(input) == shown)
        #expect(UntrustedText.csvCell(input) == shown)
        #expect(ChildMessages.oneLine(input) == shown)
        #expect(JSONValue.string(input).prettyString == json)
        // The canonical form (signed bytes) keeps the text as it is, and both read back exact.
        #expect(JSONValue.string(input).canonicalString == "\"\(input)\"")
        #expect(try JSONValue.parse(Array(JSONValue.string(input).prettyString.utf8)) == .string(input))
    }

    @Test("control characters are C0, DEL and C1 only")
    func controls() {
        let controls = (0...0x10FFFF).compactMap(Unicode.Scalar.init).filter(UntrustedText.isControl).map(\.value)
        #expect(controls == Array(0...0x1F) + Array(0x7F...0x9F))
    }

    @Test("a prefix of at most N bytes of UTF-8 ends on a character boundary")
    func utf8Prefix() {
        #expect("abc".prefix(utf8Bytes: 5) == "abc")
        #expect("abcdef".prefix(utf8Bytes: 3) == "abc")
        #expect("aé".prefix(utf8Bytes: 2) == "a")
        #expect("🎮🎮".prefix(utf8Bytes: 7) == "🎮")
    }
}
