import Foundation
import Testing

/// An app name that carries a right-to-left override (a program a child named so that `game\u{202E}txt.exe`
/// reads as `gameexe.txt`) and other invisible format characters: no form of `curfew report` or
/// `curfew events` passes them on raw; each shows them escaped, `\u{202e}`.
@Suite struct ReportEscapingTests {
    static let hostileApp = "game\u{202E}txt.exe\u{2066}x\u{200B}"
    static let invisible: [Unicode.Scalar] = ["\u{202E}", "\u{2066}", "\u{200B}"]

    func containsInvisible(_ text: String) -> Bool { text.unicodeScalars.contains { Self.invisible.contains($0) } }

    @Test func aRightToLeftOverrideIsNeutralisedInEveryForm() throws {
        let runner = try ReportTests.reportRunner()
        defer { runner.cleanUp() }
        let sql = """
            INSERT INTO usage VALUES ('kid', '2026-11-20', 9, '', 3600000);
            INSERT INTO usage VALUES ('kid', '2026-11-20', 9, '\(Self.hostileApp)', 1800000);
            INSERT INTO events (time_ms, user, kind, message) VALUES (1795165200000, 'kid', 'app-stopped', '\(Self.hostileApp) was stopped: a parent blocked it');
            """
        #expect(try CurfewRunner.runTool("/usr/bin/sqlite3", ["\(runner.stateDir)/curfew.db", sql]) == 0)
        let period = ["--from", "2026-11-16", "--to", "2026-11-22"]
        let shown = "game\\u{202e}txt.exe\\u{2066}x\\u{200b}"
        let html = try runner.ok(["report", "kid"] + period + ["--format", "html"]).stdout
        #expect(!containsInvisible(html), "raw format characters in the HTML report")
        #expect(html.contains(shown), "the name is not shown escaped in the HTML report")
        let table = try runner.ok(["report", "kid", "--by", "app"] + period).stdout
        #expect(!containsInvisible(table) && table.contains(shown), "\(table)")
        let csv = try runner.ok(["report", "kid", "--by", "app"] + period + ["--format", "csv"]).stdout
        #expect(!containsInvisible(csv) && csv.contains(shown), "\(csv)")
        let json = try runner.ok(["report", "kid"] + period + ["--format", "json"]).stdout
        #expect(!containsInvisible(json) && json.contains("game\\u202etxt.exe\\u2066x\\u200b"), "\(json)")
        // JSON keeps the name exact for programs that read it.
        let decoded = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let apps = try #require(decoded["apps"] as? [[String: Any]])
        #expect(apps.contains { $0["app"] as? String == Self.hostileApp })
        let events = try runner.ok(["events", "kid"]).stdout
        #expect(!containsInvisible(events) && events.contains(shown), "\(events)")
        let eventsJSON = try runner.ok(["events", "kid", "--json"]).stdout
        #expect(!containsInvisible(eventsJSON), "\(eventsJSON)")
    }
}
