import CurfewCore

/// `curfew report --format html`: one self-contained page (inline CSS and SVG; no script, font, image
/// or link to fetch) with four charts and, under them, tables of the same figures for screen readers
/// and for print. Every figure is the report's, as in its JSON; exact values ride in `data-seconds`,
/// `data-minutes` and `data-count` attributes next to the words for people.
extension UsageReport {
    public var html: String {
        var page = HTMLWriter()
        let period = from == to ? "\(from)" : "\(from) to \(to)"
        page.raw("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
        page.raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
        page.raw("<title>")
        page.text("Screen time of \(user), \(period)")
        page.raw("</title>\n<style>\n\(UsageReport.styleSheet)</style>\n</head>\n<body>\n<header>\n<h1>")
        page.text("Screen time of \(user)")
        page.raw("</h1>\n<p class=\"period\">")
        page.text("\(period), \(days.count) day\(days.count == 1 ? "" : "s"), time zone \(timezone)")
        page.raw("</p>\n<dl class=\"summary\">\n")
        page.raw("<div><dt>Screen time</dt><dd id=\"total\" data-seconds=\"\(screenSeconds)\">\(UsageReport.duration(screenSeconds))</dd></div>\n")
        let average = days.isEmpty ? 0 : screenSeconds / Int64(days.count)
        page.raw("<div><dt>Days over the limit</dt><dd id=\"days-over\" data-count=\"\(daysOverLimit)\">\(daysOverLimit) of \(days.count)</dd></div>\n")
        page.raw("<div><dt>Apps used</dt><dd id=\"app-count\" data-count=\"\(apps.count)\">\(apps.count)</dd></div>\n")
        page.raw("<div><dt>Events</dt><dd id=\"event-count\" data-count=\"\(events.count)\">\(events.count)</dd></div>\n")
        page.raw("</dl>\n")
        page.raw("<p class=\"note\">About \(UsageReport.duration(average)) a day on average. ")
        page.raw("Limits are those of the policy in force when the report was made.</p>\n")
        if let computersLine {
            page.raw("<p class=\"note\" id=\"computers\">")
            page.text("Every family computer counted: " + computersLine.dropFirst("computers: ".count))
            page.raw("</p>\n")
        }
        page.raw("</header>\n")
        dailyChart(&page)
        appChart(&page)
        heatMap(&page)
        timeline(&page)
        tables(&page)
        page.raw("<footer>Made by curfew report. Exact figures: <code>curfew report --format json</code>.</footer>\n</body>\n</html>\n")
        return page.output
    }

    // MARK: charts

    static let chartWidth = 760

    /// One bar per day against a dashed mark at that day's limit; red when over it.
    func dailyChart(_ page: inout HTMLWriter) {
        let width = Double(UsageReport.chartWidth)
        let (left, right, top, bottom) = (44.0, 8.0, 10.0, 30.0)
        let height = 240.0
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        let highest = days.map { max($0.screenSeconds, Int64($0.limitMinutes ?? 0) * 60) }.max() ?? 0
        let hours = max(1, Int((highest + 3599) / 3600))
        let scale = plotHeight / Double(hours * 3600)
        let slot = plotWidth / Double(max(days.count, 1))
        let barWidth = max(1, slot * 0.7)
        page.raw("<section id=\"daily\">\n<h2 id=\"daily-title\">Daily screen time against the limit</h2>\n")
        page.raw(
            "<svg id=\"daily-chart\" class=\"chart\" role=\"img\" aria-labelledby=\"daily-svg-title daily-desc\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" preserveAspectRatio=\"xMidYMid meet\">\n"
        )
        page.raw("<title id=\"daily-svg-title\">Daily screen time against the limit</title>\n<desc id=\"daily-desc\">")
        page.text(
            "\(days.count) bars, one per day from \(from) to \(to); \(daysOverLimit) over the limit. The table of days below has the same figures.")
        page.raw("</desc>\n")
        let gridStep = hours <= 8 ? 1 : hours <= 16 ? 2 : 4
        for hour in stride(from: 0, through: hours, by: gridStep) {
            let y = top + plotHeight - Double(hour * 3600) * scale
            page.raw("<line class=\"grid\" x1=\"\(svgNumber(left))\" x2=\"\(svgNumber(width - right))\" y1=\"\(svgNumber(y))\" y2=\"\(svgNumber(y))\"/>")
            page.raw("<text class=\"axis\" x=\"\(svgNumber(left - 4))\" y=\"\(svgNumber(y + 4))\" text-anchor=\"end\">\(hour)h</text>\n")
        }
        let labelEvery = days.count <= 16 ? 1 : days.count <= 31 ? 2 : 0
        for (index, day) in days.enumerated() {
            let x = left + Double(index) * slot + (slot - barWidth) / 2
            let barHeight = Double(day.screenSeconds) * scale
            let limit = day.limitMinutes.map { TimeAllowance.format(minutes: $0) } ?? "no limit"
            page.raw(
                "<rect class=\"bar day-bar \(day.isOverLimit ? "over" : "within")\" data-date=\"\(day.date)\" data-seconds=\"\(day.screenSeconds)\" x=\"\(svgNumber(x))\" y=\"\(svgNumber(top + plotHeight - barHeight))\" width=\"\(svgNumber(barWidth))\" height=\"\(svgNumber(barHeight))\"><title>"
            )
            page.text("\(day.date) (\(day.date.weekday.rawValue)): \(UsageReport.duration(day.screenSeconds)) of \(limit)\(day.isOverLimit ? ", over the limit" : "")")
            page.raw("</title></rect>")
            if let minutes = day.limitMinutes {
                let y = top + plotHeight - Double(minutes * 60) * scale
                page.raw(
                    "<line class=\"limit\" data-date=\"\(day.date)\" data-minutes=\"\(minutes)\" x1=\"\(svgNumber(left + Double(index) * slot))\" x2=\"\(svgNumber(left + Double(index + 1) * slot))\" y1=\"\(svgNumber(y))\" y2=\"\(svgNumber(y))\"/>"
                )
            }
            let label: String? =
                labelEvery > 0
                ? (index % labelEvery == 0 ? "\(day.date.weekday.rawValue) \(day.date.day)" : nil)
                : (day.date.day == 1 || (index == 0 && day.date.day <= 20) ? UsageReport.monthName(day.date) : nil)
            if let label {
                page.raw(
                    "<text class=\"axis\" x=\"\(svgNumber(left + (Double(index) + 0.5) * slot))\" y=\"\(svgNumber(height - 12))\" text-anchor=\"\(labelEvery > 0 ? "middle" : "start")\">\(label)</text>"
                )
            }
            page.raw("\n")
        }
        page.raw(
            "<line class=\"axis-line\" x1=\"\(svgNumber(left))\" x2=\"\(svgNumber(width - right))\" y1=\"\(svgNumber(top + plotHeight))\" y2=\"\(svgNumber(top + plotHeight))\"/>\n"
        )
        page.raw("</svg>\n<p class=\"legend\"><span class=\"key within\"></span> within the limit <span class=\"key over\"></span> over the limit ")
        page.raw("<span class=\"key limit\"></span> the day's limit</p>\n</section>\n")
    }

    /// One horizontal bar per app, longest first.
    func appChart(_ page: inout HTMLWriter) {
        let width = Double(UsageReport.chartWidth)
        let (labelWidth, valueWidth, rowHeight) = (170.0, 70.0, 20.0)
        let height = max(1, Double(apps.count)) * rowHeight + 10
        let top = Double(apps.first?.seconds ?? 0)
        page.raw("<section id=\"apps\">\n<h2>Time per app</h2>\n")
        if apps.isEmpty {
            page.raw("<p>No app was used in this period.</p>\n</section>\n")
            return
        }
        page.raw(
            "<svg id=\"app-chart\" class=\"chart\" role=\"img\" aria-labelledby=\"app-svg-title app-desc\" viewBox=\"0 0 \(Int(width)) \(Int(height))\">\n"
        )
        page.raw("<title id=\"app-svg-title\">Time per app</title>\n<desc id=\"app-desc\">")
        page.text("\(apps.count) bars, one per app, longest first. The table of apps below has the same figures.")
        page.raw("</desc>\n")
        for (index, app) in apps.enumerated() {
            let y = 5 + Double(index) * rowHeight
            let length = top > 0 ? (width - labelWidth - valueWidth) * Double(app.seconds) / top : 0
            page.raw("<text class=\"label\" x=\"\(svgNumber(labelWidth - 6))\" y=\"\(svgNumber(y + 14))\" text-anchor=\"end\">")
            page.text(UsageReport.clipped(app.app, 26))
            page.raw("</text><rect class=\"bar app-bar\" data-app=\"")
            page.text(app.app)
            page.raw("\" data-seconds=\"\(app.seconds)\" x=\"\(svgNumber(labelWidth))\" y=\"\(svgNumber(y + 3))\" width=\"\(svgNumber(length))\" height=\"\(svgNumber(rowHeight - 6))\"><title>")
            page.text("\(app.app): \(UsageReport.duration(app.seconds))")
            page.raw("</title></rect><text class=\"value\" x=\"\(svgNumber(labelWidth + length + 4))\" y=\"\(svgNumber(y + 14))\">\(UsageReport.duration(app.seconds))</text>\n")
        }
        page.raw("</svg>\n</section>\n")
    }

    /// Days down, hours of the day across; darker is more screen time in that hour (at most 60 minutes).
    func heatMap(_ page: inout HTMLWriter) {
        let width = Double(UsageReport.chartWidth)
        let (left, top) = (112.0, 22.0)
        let cellWidth = (width - left - 4) / 24
        let cellHeight = days.count <= 62 ? 16.0 : days.count <= 120 ? 6.0 : 3.0
        let height = top + Double(days.count) * cellHeight + 6
        page.raw("<section id=\"hours\">\n<h2>Hour of day</h2>\n")
        page.raw(
            "<svg id=\"heat-map\" class=\"chart\" role=\"img\" aria-labelledby=\"heat-svg-title heat-desc\" viewBox=\"0 0 \(Int(width)) \(Int(height))\">\n"
        )
        page.raw("<title id=\"heat-svg-title\">Screen time by hour of day</title>\n<desc id=\"heat-desc\">")
        page.text("One row per day, one column per hour; a darker cell is more of that hour used. The table of hours below has the totals.")
        page.raw("</desc>\n")
        for hour in stride(from: 0, to: 24, by: 3) {
            page.raw("<text class=\"axis\" x=\"\(svgNumber(left + (Double(hour) + 0.5) * cellWidth))\" y=\"14\" text-anchor=\"middle\">\(hour < 10 ? "0" : "")\(hour):00</text>")
        }
        page.raw("\n")
        for (row, day) in days.enumerated() {
            let y = top + Double(row) * cellHeight
            if cellHeight >= 16 || day.date.day == 1 || (row == 0 && day.date.day <= 20) {
                let label = cellHeight >= 16 ? "\(day.date.weekday.rawValue) \(day.date)" : UsageReport.monthName(day.date)
                page.raw("<text class=\"axis\" x=\"\(svgNumber(left - 6))\" y=\"\(svgNumber(y + min(cellHeight, 16) - 4))\" text-anchor=\"end\">\(label)</text>")
            }
            for (hour, seconds) in day.hourSeconds.enumerated() {
                let x = left + Double(hour) * cellWidth
                if seconds == 0 {
                    page.raw("<rect class=\"cell empty\" x=\"\(svgNumber(x))\" y=\"\(svgNumber(y))\" width=\"\(svgNumber(cellWidth - 1))\" height=\"\(svgNumber(cellHeight - (cellHeight > 4 ? 1 : 0)))\"/>")
                } else {
                    let opacity = 0.15 + 0.85 * min(1, Double(seconds) / 3600)
                    page.raw(
                        "<rect class=\"cell used\" data-seconds=\"\(seconds)\" fill-opacity=\"\(svgNumber(opacity))\" x=\"\(svgNumber(x))\" y=\"\(svgNumber(y))\" width=\"\(svgNumber(cellWidth - 1))\" height=\"\(svgNumber(cellHeight - (cellHeight > 4 ? 1 : 0)))\"><title>\(day.date) \(hour < 10 ? "0" : "")\(hour):00: \(UsageReport.duration(seconds))</title></rect>"
                    )
                }
            }
            page.raw("\n")
        }
        page.raw("</svg>\n</section>\n")
    }

    /// Each of the user's events as a mark on its category's lane, across the period.
    func timeline(_ page: inout HTMLWriter) {
        let width = Double(UsageReport.chartWidth)
        let categories = TimelineEvent.Category.allCases
        let (left, right, laneHeight, top) = (110.0, 10.0, 22.0, 6.0)
        let height = top + Double(categories.count) * laneHeight + 22
        let start = startInstant
        let span = Double(max(1, (endInstant - start).wholeSeconds))
        page.raw("<section id=\"events\">\n<h2>Events</h2>\n")
        page.raw(
            "<svg id=\"timeline\" class=\"chart\" role=\"img\" aria-labelledby=\"timeline-svg-title timeline-desc\" viewBox=\"0 0 \(Int(width)) \(Int(height))\">\n"
        )
        page.raw("<title id=\"timeline-svg-title\">Events on a timeline</title>\n<desc id=\"timeline-desc\">")
        page.text("\(events.count) events of \(user): warnings, lockouts, apps stopped, logins refused, extra time and policy changes. The table of events below lists them.")
        page.raw("</desc>\n")
        for (lane, category) in categories.enumerated() {
            let y = top + Double(lane) * laneHeight + laneHeight / 2
            page.raw("<text class=\"axis\" x=\"\(svgNumber(left - 8))\" y=\"\(svgNumber(y + 4))\" text-anchor=\"end\">\(category.title)</text>")
            page.raw("<line class=\"lane\" x1=\"\(svgNumber(left))\" x2=\"\(svgNumber(width - right))\" y1=\"\(svgNumber(y))\" y2=\"\(svgNumber(y))\"/>\n")
        }
        let axisY = top + Double(categories.count) * laneHeight + 14
        page.raw("<text class=\"axis\" x=\"\(svgNumber(left))\" y=\"\(svgNumber(axisY))\">\(from)</text>")
        page.raw("<text class=\"axis\" x=\"\(svgNumber(width - right))\" y=\"\(svgNumber(axisY))\" text-anchor=\"end\">\(to)</text>\n")
        for (index, event) in events.enumerated() {
            let lane = categories.firstIndex(of: event.category) ?? categories.count - 1
            let x = left + (width - left - right) * min(1, max(0, Double((event.time - start).wholeSeconds) / span))
            let y = top + Double(lane) * laneHeight + laneHeight / 2
            page.raw("<circle class=\"event \(event.category.rawValue)\" data-kind=\"")
            page.text(event.kind)
            page.raw("\" cx=\"\(svgNumber(x))\" cy=\"\(svgNumber(y))\" r=\"5\"><title>")
            page.text("\(eventTimes[index]) \(event.kind): \(event.message)")
            page.raw("</title></circle>\n")
        }
        page.raw("</svg>\n<p class=\"counts\">")
        let counts = eventCounts
        if counts.isEmpty { page.raw("No events in this period.") }
        for (index, (category, count)) in counts.enumerated() {
            page.raw(
                "\(index > 0 ? ", " : "")<span class=\"event-count\" data-category=\"\(category.rawValue)\" data-count=\"\(count)\">\(count) \(category.title)</span>"
            )
        }
        page.raw("</p>\n</section>\n")
    }

    // MARK: tables

    func tables(_ page: inout HTMLWriter) {
        page.raw("<section id=\"tables\">\n<h2>The figures</h2>\n")
        page.raw("<table id=\"days-table\">\n<caption>Screen time per day</caption>\n")
        page.raw("<thead><tr><th scope=\"col\">Date</th><th scope=\"col\">Day</th><th scope=\"col\">Screen time</th>")
        page.raw("<th scope=\"col\">Limit</th><th scope=\"col\">Over the limit</th><th scope=\"col\">Most used app</th></tr></thead>\n<tbody>\n")
        for day in days {
            page.raw("<tr data-date=\"\(day.date)\"><th scope=\"row\">\(day.date)</th><td>\(day.date.weekday.rawValue)</td>")
            page.raw("<td class=\"num\" data-seconds=\"\(day.screenSeconds)\">\(UsageReport.duration(day.screenSeconds))</td>")
            if let minutes = day.limitMinutes {
                page.raw("<td class=\"num\" data-minutes=\"\(minutes)\">\(TimeAllowance.format(minutes: minutes))</td>")
            } else {
                page.raw("<td class=\"num\" data-minutes=\"\">none</td>")
            }
            page.raw("<td>\(day.isOverLimit ? "yes" : "no")</td><td>")
            if let app = day.apps.first {
                page.text(app.app)
                page.raw(" <span class=\"num\" data-seconds=\"\(app.seconds)\">(\(UsageReport.duration(app.seconds)))</span>")
            }
            page.raw("</td></tr>\n")
        }
        page.raw("</tbody>\n<tfoot><tr><th scope=\"row\">Total</th><td></td><td class=\"num\" data-seconds=\"\(screenSeconds)\">\(UsageReport.duration(screenSeconds))</td>")
        page.raw("<td></td><td data-count=\"\(daysOverLimit)\">\(daysOverLimit) days</td><td></td></tr></tfoot>\n</table>\n")

        page.raw("<table id=\"apps-table\">\n<caption>Time per app</caption>\n<thead><tr><th scope=\"col\">App</th><th scope=\"col\">Time</th>")
        page.raw("<th scope=\"col\">Seconds</th></tr></thead>\n<tbody>\n")
        for app in apps {
            page.raw("<tr><th scope=\"row\">")
            page.text(app.app)
            page.raw("</th><td class=\"num\" data-seconds=\"\(app.seconds)\">\(UsageReport.duration(app.seconds))</td><td class=\"num\">\(app.seconds)</td></tr>\n")
        }
        if apps.isEmpty { page.raw("<tr><td colspan=\"3\">No app was used.</td></tr>\n") }
        page.raw("</tbody>\n</table>\n")

        page.raw("<table id=\"hours-table\">\n<caption>Screen time per hour of day, all days together</caption>\n")
        page.raw("<thead><tr><th scope=\"col\">Hour</th><th scope=\"col\">Screen time</th></tr></thead>\n<tbody>\n")
        for (hour, seconds) in hourSeconds.enumerated() {
            page.raw("<tr><th scope=\"row\">\(hour < 10 ? "0" : "")\(hour):00</th><td class=\"num\" data-seconds=\"\(seconds)\">\(UsageReport.duration(seconds))</td></tr>\n")
        }
        page.raw("</tbody>\n</table>\n")

        page.raw("<table id=\"events-table\">\n<caption>Events</caption>\n")
        page.raw("<thead><tr><th scope=\"col\">Time</th><th scope=\"col\">Kind</th><th scope=\"col\">What happened</th></tr></thead>\n<tbody>\n")
        for (index, event) in events.enumerated() {
            page.raw("<tr class=\"\(event.category.rawValue)\"><td>\(eventTimes[index])</td><td>")
            page.text(event.kind)
            page.raw("</td><td>")
            page.text(event.message)
            page.raw("</td></tr>\n")
        }
        if events.isEmpty { page.raw("<tr><td colspan=\"3\">No events in this period.</td></tr>\n") }
        page.raw("</tbody>\n</table>\n</section>\n")
    }

    // MARK: helpers

    static func monthName(_ date: LocalDate) -> String {
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][date.month - 1] + " \(date.year)"
    }

    static func clipped(_ text: String, _ length: Int) -> String {
        text.count <= length ? text : String(text.prefix(length - 1)) + "…"
    }

    static let styleSheet = """
        :root { --within: #2e7d32; --over: #c62828; --limit: #222; --cell: #1565c0; --ink: #1b1b1b; --muted: #5f5f5f; }
        * { box-sizing: border-box; }
        body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--ink);
               background: #fff; margin: 0 auto; padding: 24px; max-width: 980px; }
        h1 { font-size: 1.6em; margin: 0 0 4px; } h2 { font-size: 1.2em; margin: 28px 0 8px; }
        .period, .note, .legend, footer { color: var(--muted); }
        .summary { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0; padding: 0; }
        .summary div { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 150px; }
        .summary dt { font-size: .85em; color: var(--muted); } .summary dd { margin: 0; font-size: 1.4em; font-weight: 600; }
        svg.chart { width: 100%; height: auto; display: block; }
        .bar.within, .app-bar { fill: var(--within); } .bar.over { fill: var(--over); }
        .limit { stroke: var(--limit); stroke-width: 2; stroke-dasharray: 4 2; }
        .grid, .lane { stroke: #e3e3e3; stroke-width: 1; } .axis-line { stroke: #999; }
        .axis, .label, .value { font-size: 11px; fill: var(--muted); } .label { fill: var(--ink); }
        .cell.empty { fill: #f1f1f1; } .cell.used { fill: var(--cell); }
        .event { stroke: #fff; stroke-width: 1; fill-opacity: .85; }
        .event.warning { fill: #f9a825; } .event.lockout { fill: var(--over); } .event.app-stopped { fill: #6a1b9a; }
        .event.login-refused { fill: #ad1457; } .event.grant { fill: var(--within); } .event.policy { fill: #1565c0; }
        .event.other { fill: #757575; }
        .key { display: inline-block; width: 12px; height: 12px; vertical-align: -1px; margin-left: 10px; }
        .key.within { background: var(--within); } .key.over { background: var(--over); }
        .key.limit { border-top: 2px dashed var(--limit); height: 0; }
        table { border-collapse: collapse; margin: 16px 0; width: 100%; font-size: .92em; }
        caption { text-align: left; font-weight: 600; margin-bottom: 4px; }
        th, td { border-bottom: 1px solid #e3e3e3; padding: 3px 8px; text-align: left; vertical-align: top; }
        thead th { border-bottom: 2px solid #999; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
        tfoot th, tfoot td { border-top: 2px solid #999; font-weight: 600; }
        footer { margin-top: 32px; font-size: .85em; }
        @page { size: A4; margin: 14mm; }
        @media print {
          body { padding: 0; max-width: none; font-size: 10pt; }
          * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
          section { break-inside: avoid-page; } #tables, #hours { break-inside: auto; }
          h2 { break-after: avoid; } thead { display: table-header-group; } tr { break-inside: avoid; }
          .summary div { border-color: #999; }
        }

        """
}

/// Builds the page in one growing buffer; `text` escapes what came from users, processes or files.
struct HTMLWriter {
    var output = ""

    init() { output.reserveCapacity(1 << 16) }

    mutating func raw(_ text: String) { output += text }

    /// Escaped by `UntrustedText.html`.
    mutating func text(_ text: String) { output += UntrustedText.html(text) }
}

/// Two decimals at most, no trailing zeros: SVG coordinates.
func svgNumber(_ value: Double) -> String {
    let rounded = (value * 100).rounded() / 100
    if rounded == rounded.rounded() { return String(Int(rounded)) }
    var text = String(rounded)
    if let dot = text.firstIndex(of: "."), text.distance(from: dot, to: text.endIndex) > 3 {
        text = String(text[..<text.index(dot, offsetBy: 3)])
    }
    return text
}
