// The reports figures: a year of usage of 5 children and 50 apps in a real SQLite file, and the time
// to make a report of a week, a month and a year in each form (table, json, csv, html), in process
// (reading the rows and events, building the report, rendering it) and as a `curfew report` process;
// and the time to verify the audit log's hash chain of those events.
// Target from the reports issue: a year's report under 200 ms.
import CurfewAgent
import CurfewCore
import CurfewReports
import CurfewStore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

func runReportBenchmarks(root: String) throws {
    let curfew = "\(binDirectory)/curfew"
    let state = "\(root)/reports"
    let env = ["CURFEW_STATE_DIR": state]
    let children = (1...5).map { "kid\($0)" }
    guard run(curfew, ["init"], environment: env) == 0 else {
        throw BenchFailure("cannot run \(curfew); build it first (swift build -c release)")
    }
    for child in children {
        guard run(curfew, ["user", "add", child], environment: env) == 0, run(curfew, ["timezone", child, "UTC"], environment: env) == 0,
            run(curfew, ["limit", child, "3h", "--day", "sat,sun"], environment: env) == 0
        else { throw BenchFailure("cannot set up \(child)") }
    }
    let last = LocalDate(year: 2026, month: 11, day: 22)!
    let first = last.adding(days: -364)
    let apps = (1...50).map { "app-\($0 < 10 ? "0" : "")\($0)" }
    let store = try StateStore(path: "\(state)/curfew.db", concurrentReaders: true)
    // Each child on each day: 3 to 8 hours from 14:00, 4 apps an hour (a deterministic mix), and 6 events.
    var rows = 0
    var events = 0
    let (_, fill) = try timed {
        for (number, child) in children.enumerated() {
            try store.write { db in
                for offset in 0..<365 {
                    let day = first.adding(days: offset)
                    var slices: [UsageKey: Int64] = [:]
                    let hours = 3 + (offset * 7 + number * 3) % 6
                    for hour in 14..<(14 + hours) {
                        let minutes = Int64(20 + (offset * 13 + hour * 5 + number) % 41)
                        slices[UsageKey(user: child, day: day, hour: hour, app: UsageKey.screen)] = minutes * 60_000
                        for slot in 0..<4 {
                            let app = apps[(offset * 3 + hour * 7 + slot * 11 + number * 5) % apps.count]
                            slices[UsageKey(user: child, day: day, hour: hour, app: app), default: 0] += minutes * 60_000 / Int64(slot + 1)
                        }
                    }
                    rows += slices.count
                    try UsageTable.add(slices, db)
                    let noon = Int64(day.daysSinceEpoch) * 86_400_000 + 14 * 3_600_000
                    for (index, kind) in ["warning", "warning", "lockout", "app-stopped", "login-refused", "policy-loaded"].enumerated() {
                        try EventLog.append(
                            AgentEvent(time: Instant(milliseconds: noon + Int64(hours * 3_600_000 + index * 60_000)), user: child, kind: EventKind(rawValue: kind), message: "\(kind) \(offset)"),
                            db)
                        events += 1
                    }
                }
            }
        }
    }
    let size = (try? FileManager.default.attributesOfItem(atPath: "\(state)/curfew.db")[.size] as? Int) ?? 0
    print(
        "reports: \(children.count) children, \(apps.count) apps, 365 days: \(rows) usage rows and \(events) events written in "
            + "\(format(fill.wall / 1000)) s (\(size / 1_048_576) MiB database)")
    let (verification, verifying) = try timed { try store.read { try AuditChain.verify($0) } }
    guard verification.broken == nil, verification.events == events else {
        throw BenchFailure("the benchmark's audit log does not verify: \(verification)")
    }
    print("events --verify of \(events) chained events: \(format(verifying.wall)) ms")
    let policy = Policy.defaults(for: "kid1")
    var zonePolicy = policy
    zonePolicy.timezone = "UTC"
    let zone = Schedule.zone(for: zonePolicy)
    let periods: [(String, LocalDate)] = [("week", last.adding(days: -6)), ("month", last.adding(days: -29)), ("year", first)]
    let formats = ["table", "json", "csv", "html"]
    let reader = try StateStore(path: "\(state)/curfew.db")
    for (name, start) in periods {
        for form in formats {
            var inProcess: [Double] = []
            var bytes = 0
            for round in 0..<7 {
                let child = children[round % children.count]
                let begin = clock.now
                let (usage, log) = try reader.read { db in
                    (
                        try UsageTable.rows(user: child, from: start, through: last, db),
                        try EventLog.events(
                            of: child, from: zone.start(of: start), before: zone.start(of: last.adding(days: 1)), db)
                    )
                }
                let report = UsageReport.make(user: child, policy: zonePolicy, zone: zone, from: start, to: last, rows: usage, events: log)
                let text: String =
                    switch form {
                    case "json": report.json.prettyString
                    case "csv": report.csv(by: .day)
                    case "html": report.html
                    default: report.lines(by: .day).joined(separator: "\n")
                    }
                inProcess.append(milliseconds(clock.now - begin))
                bytes = text.utf8.count
            }
            var processes: [Double] = []
            for round in 0..<5 {
                let begin = clock.now
                let status = run(
                    curfew,
                    ["report", children[round % children.count], "--from", "\(start)", "--to", "\(last)", "--format", form, "--output", "\(root)/report.out"],
                    environment: env)
                guard status == 0 else { throw BenchFailure("curfew report --format \(form) exited \(status)") }
                processes.append(milliseconds(clock.now - begin))
            }
            print(
                "report \(name.padding(toLength: 5, withPad: " ", startingAt: 0)) \(form.padding(toLength: 5, withPad: " ", startingAt: 0)): "
                    + "in process median \(format(percentile(inProcess, 0.5))) ms (max \(format(inProcess.max() ?? 0))), "
                    + "curfew report process median \(format(percentile(processes, 0.5))) ms; \(bytes) bytes"
                    + (name == "year" ? " (target < 200 ms)" : ""))
        }
    }
}
