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
