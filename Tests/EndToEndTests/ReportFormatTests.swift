import Foundation
import Testing

/// `curfew report` in its four forms over one week of usage put into a real database: the HTML page
/// rendered by headless Chromium (Debian's `chromium`, which `make test` installs), the CSV read back,
/// and both compared with the JSON report.
@Suite struct ReportFormatTests {
    static let period = ["--from", "2026-11-16", "--to", "2026-11-22"]
    static let oddApp = "tux \"racer\", deluxe"
    static let markupApp = "<b>bold</b>&co"

    /// A week (mon 16 to sun 22 November 2026, UTC): limit 2h, 3h on saturdays; one day over, one day
    /// with nothing; four apps, two with names that need quoting in CSV and escaping in HTML; six events.
    func prepared() throws -> CurfewRunner {
        let runner = try ReportTests.reportRunner()
        func usage(_ day: String, _ hour: Int, _ app: String, _ ms: Int) -> String {
            "INSERT INTO usage VALUES ('kid', '\(day)', \(hour), '\(app.replacingOccurrences(of: "'", with: "''"))', \(ms));"
        }
        let day = 86_400_000
        let monday = 1_794_787_200_000  // 2026-11-16T00:00:00Z
        func event(_ offset: Int, _ kind: String, _ message: String) -> String {
            "INSERT INTO events (time_ms, user, kind, message) VALUES (\(monday + offset), 'kid', '\(kind)', '\(message)');"
        }
        let sql = [
            usage("2026-11-16", 16, "", 3_600_000), usage("2026-11-16", 17, "", 1_800_000),
            usage("2026-11-16", 16, "minecraft", 3_000_000), usage("2026-11-16", 17, Self.oddApp, 900_000),
            usage("2026-11-17", 9, "", 2_400_400), usage("2026-11-17", 9, "firefox", 2_400_400),
            usage("2026-11-19", 19, "", 3_599_000), usage("2026-11-19", 19, Self.markupApp, 600_000),
            usage("2026-11-20", 15, "", 3_600_000), usage("2026-11-20", 16, "", 3_600_000), usage("2026-11-20", 17, "", 1_800_000),
            usage("2026-11-20", 15, "minecraft", 7_200_000), usage("2026-11-20", 17, "firefox", 1_500_000),
            usage("2026-11-21", 10, "", 3_000_000), usage("2026-11-21", 10, "minecraft", 2_000_000),
            usage("2026-11-22", 8, "", 60_000),
            usage("2026-11-23", 8, "", 60_000), usage("2026-11-15", 8, "", 60_000),
            "INSERT INTO usage VALUES ('teen', '2026-11-20', 9, '', 999000);",
            event(4 * day + 16 * 3_600_000, "warning", "5 minutes left"),
            event(4 * day + 17 * 3_600_000, "lockout", "no time left: sessions ended"),
            event(4 * day + 17 * 3_600_000 + 60_000, "login-refused", "no time left"),
            event(day + 9 * 3_600_000, "app-stopped", "steam is blocked"),
            event(2 * day, "extra-time-granted", "30m extra on 2026-11-18"),
            event(5 * day, "policy-loaded", "policy version 2 is in force"),
            "INSERT INTO events (time_ms, user, kind, message) VALUES (\(monday + 3 * day), 'teen', 'warning', 'not kid');",
        ].joined(separator: "\n")
        #expect(try CurfewRunner.runTool("/usr/bin/sqlite3", ["\(runner.stateDir)/curfew.db", sql]) == 0)
        return runner
    }

    func jsonReport(_ runner: CurfewRunner, _ extra: [String] = []) throws -> [String: Any] {
        let result = try runner.ok(["report", "kid"] + Self.period + ["--format", "json"] + extra)
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    @Test func jsonHasTheWeeksFigures() throws {
        let runner = try prepared()
        defer { runner.cleanUp() }
        let json = try jsonReport(runner)
        let days = try #require(json["days"] as? [[String: Any]])
        #expect(days.map { $0["screenSeconds"] as? Int } == [5400, 2400, 0, 3599, 9000, 3000, 60])
        #expect(days.map { $0["limitMinutes"] as? Int } == [120, 120, 120, 120, 120, 180, 120])
        #expect(days.map { $0["overLimit"] as? Bool } == [false, false, false, false, true, false, false])
        #expect(json["screenSeconds"] as? Int == 23459)
        #expect(json["daysOverLimit"] as? Int == 1)
        let apps = try #require(json["apps"] as? [[String: Any]])
        #expect(apps.map { $0["app"] as? String } == ["minecraft", "firefox", Self.oddApp, Self.markupApp])
        #expect(apps.map { $0["seconds"] as? Int } == [12200, 3900, 900, 600])
        let counts = try #require(json["eventCounts"] as? [String: Int])
        #expect(counts == ["warning": 1, "lockout": 1, "login-refused": 1, "app-stopped": 1, "grant": 1, "policy": 1])
        let events = try #require(json["events"] as? [[String: Any]])
        #expect(events.map { $0["kind"] as? String } == ["app-stopped", "extra-time-granted", "warning", "lockout", "login-refused", "policy-loaded"])
        #expect(events.first?["time"] as? String == "2026-11-17T09:00:00+00:00")
    }

    /// A minimal RFC 4180 reader: quoted fields with doubled quotes and commas.
    static func parseCSV(_ text: String) -> [[String]] {
        var rows: [[String]] = []
        var row: [String] = []
        var field = ""
        var quoted = false
        var characters = Array(text)[...]
        while let character = characters.popFirst() {
            if quoted {
                if character == "\"" {
                    if characters.first == "\"" {
                        field.append("\"")
                        characters.removeFirst()
                    } else {
                        quoted = false
                    }
                } else {
                    field.append(character)
                }
            } else if character == "\"" {
                quoted = true
            } else if character == "," {
                row.append(field)
                field = ""
            } else if character == "\n" {
                row.append(field)
                rows.append(row)
                row = []
                field = ""
            } else {
                field.append(character)
            }
        }
        #expect(row.isEmpty && field.isEmpty, "CSV ends with a line end")
        return rows
    }

    @Test func csvReadBackEqualsTheJSON() throws {
        let runner = try prepared()
        defer { runner.cleanUp() }
        let json = try jsonReport(runner)
        let days = try #require(json["days"] as? [[String: Any]])

        let byDay = Self.parseCSV(try runner.ok(["report", "kid"] + Self.period + ["--format", "csv"]).stdout)
        #expect(byDay.first == ["date", "screen_seconds", "limit_minutes"])
        let dayRows = byDay.dropFirst().map { [$0[0], $0[1], $0[2]] }
        let jsonDays = days.map { day in
            ["\(day["date"]!)", "\(day["screenSeconds"]!)", (day["limitMinutes"] as? Int).map(String.init) ?? ""]
        }
        #expect(dayRows == jsonDays)

        let byApp = Self.parseCSV(try runner.ok(["report", "kid"] + Self.period + ["--format", "csv", "--by", "app"]).stdout)
        #expect(byApp.first == ["date", "app", "seconds"])
        let jsonApps = days.flatMap { day in
            (day["apps"] as! [[String: Any]]).map { ["\(day["date"]!)", $0["app"] as! String, "\($0["seconds"]!)"] }
        }
        #expect(Array(byApp.dropFirst()) == jsonApps)
        #expect(byApp.contains(["2026-11-16", Self.oddApp, "900"]))

        let byHour = Self.parseCSV(try runner.ok(["report", "kid"] + Self.period + ["--format", "csv", "--by", "hour"]).stdout)
        #expect(byHour.first == ["date", "hour", "screen_seconds"])
        let jsonHours = days.flatMap { day in
            (day["hours"] as! [[String: Any]]).map { ["\(day["date"]!)", "\($0["hour"]!)", "\($0["screenSeconds"]!)"] }
        }
        #expect(byHour.count == 1 + 7 * 24)
        #expect(Array(byHour.dropFirst()) == jsonHours)
    }

    @Test func tableHasBarsAlignedColumnsAndNoColourInAPipe() throws {
        let runner = try prepared()
        defer { runner.cleanUp() }
        let result = try runner.ok(["report", "kid"] + Self.period)
        #expect(!result.stdout.contains("\u{1B}["))
        #expect(
            result.stdout == """
                kid: 2026-11-16 to 2026-11-22 (UTC)
                  DATE        DAY  SCREEN  LIMIT  
                  2026-11-16  mon  1h30m   2h     ###############.....
                  2026-11-17  tue  40m     2h     #######.............
                  2026-11-18  wed  0       2h     ....................
                  2026-11-19  thu  59m     2h     ##########..........
                  2026-11-20  fri  2h30m   2h     #################### !
                  2026-11-21  sat  50m     3h     ######..............
                  2026-11-22  sun  1m      2h     #...................
                  extra time:
                    2026-11-18 00:00  30m extra on 2026-11-18
                  total 6h30m in 7 days, 1 day over the limit

                """)
        let apps = try runner.ok(["report", "kid", "--by", "app"] + Self.period)
        #expect(apps.stdout.split(separator: "\n").dropFirst(2).first == "  minecraft            3h23m  ####################")
    }

    @Test func colourOnlyOnATerminalAndNotWithNoColor() throws {
        let runner = try prepared()
        defer { runner.cleanUp() }
        // script(1) gives the command a pseudo-terminal as its standard output.
        let binary = CurfewRunner.binDirectory.appendingPathComponent("curfew").path
        let command = "\(binary) report kid --state-dir \(runner.stateDir) " + Self.period.joined(separator: " ")
        // The test's own environment may say NO_COLOR or TERM=dumb: each run sets both.
        let onTerminal = try CurfewRunner.capture("/usr/bin/env", ["-u", "NO_COLOR", "TERM=xterm", "/usr/bin/script", "-qec", command, "/dev/null"])
        #expect(onTerminal.contains("\u{1B}[31m#################### !\u{1B}[0m"))
        #expect(onTerminal.contains("\u{1B}[32m###############.....\u{1B}[0m"))
        let noColour = try CurfewRunner.capture("/usr/bin/env", ["TERM=xterm", "NO_COLOR=1", "/usr/bin/script", "-qec", command, "/dev/null"])
        #expect(noColour.contains("2026-11-20  fri  2h30m   2h     #################### !"))
        #expect(!noColour.contains("\u{1B}["))
    }

    @Test func htmlIsOneFileWithNothingToFetch() throws {
        let runner = try prepared()
        defer { runner.cleanUp() }
        let file = runner.root.appendingPathComponent("report.html").path
        let written = try runner.ok(["report", "kid"] + Self.period + ["--format", "html", "--output", file])
        #expect(written.stdout.isEmpty)
        let html = try String(contentsOfFile: file, encoding: .utf8)
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        for outside in ["<script", "<link", "<img", "@import", "url(", "http://", "https://", "src="] {
            #expect(!html.contains(outside), "the page refers to something outside it: \(outside)")
        }
        // Names from processes are text, never markup.
        #expect(html.contains("&lt;b&gt;bold&lt;/b&gt;&amp;co"))
        #expect(!html.contains(Self.markupApp))
        #expect(html.contains("@media print"))
        let stdout = try runner.ok(["report", "kid"] + Self.period + ["--format", "html"]).stdout
        #expect(stdout == html)
        let bad = try runner.run(["report", "kid", "--format", "html", "--output", ""])
        #expect(bad.status == 64)
        #expect(bad.stderr == "curfew: output must name a file, got \"\"\n")
        let nowhere = try runner.run(["report", "kid", "--format", "html", "--output", "/nonexistent/dir/report.html"])
        #expect(nowhere.status == 1)
        #expect(nowhere.stderr.hasPrefix("curfew: cannot write /nonexistent/dir/report.html"))
    }

    /// Every `<tag ...>` of a kind in the DOM, as attribute dictionaries (Chromium writes attributes
    /// with double quotes, and `"` inside values as `&quot;`).
    static func elements(_ tag: String, withClass wanted: String? = nil, in dom: String) throws -> [[String: String]] {
        let tagPattern = try NSRegularExpression(pattern: "<\(tag)\\b([^>]*)>")
        let attributePattern = try NSRegularExpression(pattern: "([a-zA-Z-]+)=\"([^\"]*)\"")
        let text = dom as NSString
        return tagPattern.matches(in: dom, range: NSRange(location: 0, length: text.length)).compactMap { match in
            let body = text.substring(with: match.range(at: 1))
            var attributes: [String: String] = [:]
            for pair in attributePattern.matches(in: body, range: NSRange(location: 0, length: (body as NSString).length)) {
                attributes[(body as NSString).substring(with: pair.range(at: 1))] = unescape(
                    (body as NSString).substring(with: pair.range(at: 2)))
            }
            if let wanted, !(attributes["class"] ?? "").split(separator: " ").contains(Substring(wanted)) { return nil }
            return attributes
        }
    }

    static func unescape(_ text: String) -> String {
        text.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&lt;", with: "<")
            .replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&#39;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }

    /// The rows of a table in the DOM: each row's cells' `data-seconds` / `data-minutes` values.
    static func tableSection(_ id: String, in dom: String) throws -> String {
        let start = try #require(dom.range(of: "<table id=\"\(id)\""))
        let end = try #require(dom.range(of: "</table>", range: start.upperBound..<dom.endIndex))
        return String(dom[start.lowerBound..<end.upperBound])
    }

    @Test func chromiumDrawsTheChartsAndThePageHasTheJSONsNumbers() throws {
        let runner = try prepared()
        defer { runner.cleanUp() }
        let chromium = "/usr/bin/chromium"
        try #require(FileManager.default.isExecutableFile(atPath: chromium), "Debian's chromium is missing (make test installs it)")
        let json = try jsonReport(runner)
        let file = runner.root.appendingPathComponent("report.html").path
        try runner.ok(["report", "kid"] + Self.period + ["--format", "html", "--output", file])
        let profile = runner.root.appendingPathComponent("chromium-profile").path
        let common = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--user-data-dir=\(profile)", "--window-size=1000,1400", "--hide-scrollbars",
        ]
        let png = runner.root.appendingPathComponent("report.png").path
        #expect(try CurfewRunner.runTool(chromium, common + ["--screenshot=\(png)", "file://\(file)"]) == 0)
        let dom = try CurfewRunner.capture(chromium, common + ["--dump-dom", "file://\(file)"])
        #expect(dom.contains("<svg id=\"daily-chart\""))

        // The charts: one bar per day with a height for each day used, one per app, one mark per event.
        let days = try #require(json["days"] as? [[String: Any]])
        let dayBars = try Self.elements("rect", withClass: "day-bar", in: dom)
        #expect(dayBars.count == 7)
        #expect(dayBars.map { $0["data-date"] } == days.map { $0["date"] as? String })
        #expect(dayBars.map { $0["data-seconds"].flatMap { Int($0) } } == days.map { $0["screenSeconds"] as? Int })
        for (bar, day) in zip(dayBars, days) {
            let height = try #require(bar["height"].flatMap { Double($0) })
            #expect((height > 0) == ((day["screenSeconds"] as? Int ?? 0) > 0), "bar of \(bar["data-date"] ?? "?")")
        }
        #expect(dayBars.filter { ($0["class"] ?? "").contains("over") }.map { $0["data-date"] } == ["2026-11-20"])
        let limits = try Self.elements("line", withClass: "limit", in: dom)
        #expect(limits.map { $0["data-minutes"].flatMap { Int($0) } } == days.map { $0["limitMinutes"] as? Int })
        let apps = try #require(json["apps"] as? [[String: Any]])
        let appBars = try Self.elements("rect", withClass: "app-bar", in: dom)
        #expect(appBars.map { $0["data-app"] } == apps.map { $0["app"] as? String })
        #expect(appBars.map { $0["data-seconds"].flatMap { Int($0) } } == apps.map { $0["seconds"] as? Int })
        #expect(appBars.allSatisfy { ($0["width"].flatMap { Double($0) } ?? 0) > 0 })
        let cells = try Self.elements("rect", withClass: "cell", in: dom)
        #expect(cells.count == 7 * 24)
        let usedCells = cells.compactMap { $0["data-seconds"].flatMap { Int($0) } }
        let jsonCells = days.flatMap { ($0["hours"] as! [[String: Any]]).compactMap { $0["screenSeconds"] as? Int }.filter { $0 > 0 } }
        #expect(usedCells == jsonCells)
        let marks = try Self.elements("circle", withClass: "event", in: dom)
        let events = try #require(json["events"] as? [[String: Any]])
        #expect(marks.map { $0["data-kind"] } == events.map { $0["kind"] as? String })
        for svg in try Self.elements("svg", in: dom) {
            #expect(svg["role"] == "img")
            #expect(svg["aria-labelledby"] != nil)
        }

        // The numbers in the page are the JSON's.
        let total = try #require(try Self.elements("dd", in: dom).first { $0["id"] == "total" })
        #expect(total["data-seconds"].flatMap { Int($0) } == json["screenSeconds"] as? Int)
        let daysTable = try Self.tableSection("days-table", in: dom)
        let rows = try Self.elements("tr", in: daysTable).compactMap { $0["data-date"] }
        #expect(rows == days.map { $0["date"] as? String })
        let secondsCells = try Self.elements("td", in: daysTable).compactMap { $0["data-seconds"].flatMap { Int($0) } }
        #expect(secondsCells == days.map { $0["screenSeconds"] as! Int } + [json["screenSeconds"] as! Int])
        let minuteCells = try Self.elements("td", in: daysTable).compactMap { $0["data-minutes"].flatMap { Int($0) } }
        #expect(minuteCells == days.map { $0["limitMinutes"] as! Int })
        #expect(daysTable.contains(">2h30m</td>"))
        let appSeconds = try Self.elements("td", in: try Self.tableSection("apps-table", in: dom)).compactMap {
            $0["data-seconds"].flatMap { Int($0) }
        }
        #expect(appSeconds == apps.map { $0["seconds"] as! Int })
        let hourSeconds = try Self.elements("td", in: try Self.tableSection("hours-table", in: dom)).compactMap {
            $0["data-seconds"].flatMap { Int($0) }
        }
        #expect(hourSeconds == (json["hours"] as! [[String: Any]]).map { $0["screenSeconds"] as! Int })
        let counts = try Self.elements("span", withClass: "event-count", in: dom)
        var pageCounts: [String: Int] = [:]
        for count in counts { pageCounts[count["data-category"] ?? "?"] = count["data-count"].flatMap { Int($0) } }
        #expect(pageCounts == json["eventCounts"] as? [String: Int])
        let eventRows = try Self.elements("tr", in: try Self.tableSection("events-table", in: dom)).count - 1
        #expect(eventRows == events.count)

        // The screenshot is a drawn page: many colours, and the bars' green and red among them.
        let pixels = try Self.pngColours(png)
        #expect(pixels.width == 1000 && pixels.height == 1400)
        #expect(pixels.distinct > 50, "a blank or flat screenshot: \(pixels.distinct) colours")
        #expect(pixels.green > 500, "the within-limit bars (#2e7d32) are not drawn: \(pixels.green) pixels")
        #expect(pixels.red > 100, "the over-limit bar (#c62828) is not drawn: \(pixels.red) pixels")
    }

    /// Decodes an 8-bit RGB(A) PNG with Debian's python3 (zlib; no imaging library) and counts its colours.
    static func pngColours(_ path: String) throws -> (width: Int, height: Int, distinct: Int, green: Int, red: Int) {
        let script = """
            import sys, struct, zlib
            data = open(sys.argv[1], 'rb').read()
            assert data[:8] == b'\\x89PNG\\r\\n\\x1a\\n', 'not a PNG'
            pos, idat = 8, b''
            while pos < len(data):
                length, kind = struct.unpack('>I4s', data[pos:pos + 8])
                body = data[pos + 8:pos + 8 + length]
                if kind == b'IHDR':
                    width, height, depth, colour = struct.unpack('>IIBB', body[:10])
                elif kind == b'IDAT':
                    idat += body
                pos += 12 + length
            assert depth == 8 and colour in (2, 6), (depth, colour)
            channels = 3 if colour == 2 else 4
            raw = zlib.decompress(idat)
            stride = width * channels
            previous = bytearray(stride)
            colours, green, red, offset = set(), 0, 0, 0
            for _ in range(height):
                kind = raw[offset]; line = bytearray(raw[offset + 1:offset + 1 + stride]); offset += 1 + stride
                for i in range(stride):
                    a = line[i - channels] if i >= channels else 0
                    b = previous[i]
                    c = previous[i - channels] if i >= channels else 0
                    if kind == 1: line[i] = (line[i] + a) & 255
                    elif kind == 2: line[i] = (line[i] + b) & 255
                    elif kind == 3: line[i] = (line[i] + (a + b) // 2) & 255
                    elif kind == 4:
                        p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                        line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
                for x in range(0, stride, channels):
                    pixel = bytes(line[x:x + 3])
                    colours.add(pixel)
                    if pixel == b'\\x2e\\x7d\\x32': green += 1
                    if pixel == b'\\xc6\\x28\\x28': red += 1
                previous = line
            print(width, height, len(colours), green, red)
            """
        let output = try CurfewRunner.capture("/usr/bin/python3", ["-c", script, path])
        let numbers = output.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        try #require(numbers.count == 5, "python3 said: \(output)")
        return (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4])
    }
}
