import Testing

@testable import CurfewCore

@Suite("Usage summaries")
struct UsageSummaryTests {
    static let day = LocalDate(year: 2026, month: 11, day: 23)!

    static func summary(_ buckets: [UsageSummary.Bucket]) -> UsageSummary {
        UsageSummary(
            machine: "den-pc", host: "den", key: "0123456789abcdef", user: "kid", day: day, buckets: buckets, time: 1_795_000_000)
    }

    static let sample = summary([
        .init(hour: 10, app: "firefox", milliseconds: 60_000), .init(hour: 9, app: "", milliseconds: 1_500),
        .init(hour: 10, app: "", milliseconds: 90_000),
    ])

    /// The file's text with `edit` applied to its JSON object, canonical again.
    static func edited(_ edit: (inout JSONObject) -> Void) -> [UInt8] {
        guard case .object(var object)? = try? JSONValue.parse(sample.fileBytes(signature: "c2ln")) else { return [] }
        edit(&object)
        return JSONValue.object(object).canonicalBytes
    }

    func reason(_ bytes: [UInt8]) -> String? {
        do {
            _ = try UsageSummary.parse(bytes)
            return nil
        } catch { return error.reason }
    }

    @Test("a summary reads back as written, buckets sorted, totals summed")
    func roundTrip() throws {
        let bytes = Self.sample.fileBytes(signature: "c2ln")
        let (read, signature) = try UsageSummary.parse(bytes)
        #expect(read == Self.sample && signature == "c2ln")
        #expect(read.buckets.map(\.hour) == [9, 10, 10] && read.buckets[1].app == "")
        #expect(read.screenMilliseconds == 91_500)
        #expect(read.totals == ["": 91_500, "firefox": 60_000])
        #expect(Self.sample.signingBytes.starts(with: Array("curfew-usage-v1\n".utf8)))
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == #"{"buckets":[[9,"",1500],[10,"",90000],[10,"firefox",60000]],"day":"2026-11-23","format":1,"host":"den","key":"0123456789abcdef","kind":"usage","machine":"den-pc","screenMilliseconds":91500,"signature":"c2ln","time":"2026-11-18T11:06:40Z","user":"kid"}"#
        )
    }

    @Test("per-hour totals become buckets of that user and day only")
    func fromTotals() {
        let other = LocalDate(year: 2026, month: 11, day: 22)!
        let summary = UsageSummary(
            machine: "m", host: "h", key: "0123456789abcdef", user: "kid", day: Self.day,
            totals: [
                UsageKey(user: "kid", day: Self.day, hour: 8, app: ""): 5_000,
                UsageKey(user: "kid", day: Self.day, hour: 8, app: "vlc"): 0,
                UsageKey(user: "kid", day: other, hour: 8, app: ""): 7_000,
                UsageKey(user: "teen", day: Self.day, hour: 8, app: ""): 9_000,
            ], time: 0)
        #expect(summary.buckets == [.init(hour: 8, app: "", milliseconds: 5_000)])
    }

    @Test("what a writer builds from any app names is read back by every reader")
    func writtenNamesAreReadable() throws {
        let esc = "\u{1B}"
        let hostile = [
            "\(esc)[2J", "\(esc)]0;title\u{07}", "homework\nkid  5h", "tab\there", "del\u{7F}", "c1\u{85}",
            String(repeating: "x", count: 300), String(repeating: "\u{1}", count: 200),
        ]
        // "\\x1b[2J" is what ESC [2J becomes: the two buckets are one app once written.
        let buckets = (hostile + ["\\x1b[2J", "firefox"]).map { UsageSummary.Bucket(hour: 20, app: $0, milliseconds: 60_000) }
            + [.init(hour: 20, app: "", milliseconds: 600_000), .init(hour: 21, app: "vlc", milliseconds: 0)]
        let written = UsageSummary(
            machine: "den-pc", host: "den", key: "0123456789abcdef", user: "kid", day: Self.day, writing: buckets, time: 1_795_000_000)
        let (read, _) = try UsageSummary.parse(written.fileBytes(signature: "c2ln"))
        #expect(read == written)
        let apps = read.totals
        #expect(apps["\\x1b[2J"] == 120_000 && apps["\\x1b]0;title\\x07"] == 60_000 && apps["homework\\nkid  5h"] == 60_000)
        #expect(apps["tab\\there"] == 60_000 && apps["firefox"] == 60_000 && apps[""] == 600_000 && apps["vlc"] == nil)
        // Accepted names are kept as they are (DEL and C1 pass the reader's rule; output escapes them).
        #expect(apps["del\u{7F}"] == 60_000 && apps["c1\u{85}"] == 60_000)
        #expect(apps[String(repeating: "x", count: 255)] == 60_000)
        // Cut to 255 bytes, in the middle of an escape if need be: still readable.
        #expect(apps[String(repeating: "\\x01", count: 63) + "\\x0"] == 60_000)
        #expect(read.buckets.allSatisfy { UsageSummaryFormat.accepts(app: $0.app) })
    }

    @Test("a writer folds the least used of hundreds of apps so the summary stays readable")
    func manyApps() throws {
        var buckets: [UsageSummary.Bucket] = []
        for hour in 0..<24 {
            buckets.append(.init(hour: hour, app: "", milliseconds: 3_600_000))
            for index in 0..<100 {
                let name = String(repeating: "\"", count: 200) + "-\(hour)-\(index)"
                buckets.append(.init(hour: hour, app: name, milliseconds: Int64(1_000 + index)))
            }
        }
        let written = UsageSummary(
            machine: "den-pc", host: "den", key: "0123456789abcdef", user: "kid", day: Self.day, writing: buckets, time: 1_795_000_000)
        let bytes = written.fileBytes(signature: "c2ln")
        #expect(bytes.count <= UsageSummaryFormat.maxBytes)
        let (read, _) = try UsageSummary.parse(bytes)
        #expect(read.buckets.count == 24 + UsageSummaryFormat.maxNamedAppBuckets + 24)
        #expect(read.buckets.filter { $0.app != "" }.reduce(0) { $0 + $1.milliseconds } == buckets.filter { $0.app != "" }.reduce(0) { $0 + $1.milliseconds })
        #expect(read.screenMilliseconds == 24 * 3_600_000)
    }

    @Test("a summary replaces a kept one when it is newer or holds more screen time, never an older copy")
    func replacement() {
        var later = Self.sample
        later.time += 60
        var more = Self.sample
        more.buckets[0].milliseconds += 1
        #expect(later.replaces(Self.sample) && more.replaces(Self.sample))
        #expect(!Self.sample.replaces(later) && !Self.sample.replaces(more) && !Self.sample.replaces(Self.sample))
    }

    @Test("malformed summaries are refused with the rule they break")
    func refusals() {
        #expect(reason(Array(#"{"format":2}"#.utf8)) == "usage summary format 2 is not supported (this version reads format 1)")
        #expect(reason(Self.edited { $0["extra"] = .int(1) }) == "unknown usage field \"extra\"")
        #expect(reason(Self.edited { $0["kind"] = .string("confirmation") }) == "usage field \"kind\" must be \"usage\"")
        #expect(reason(Array((String(decoding: Self.sample.fileBytes(signature: "c2ln"), as: UTF8.self) + " ").utf8))
            == "usage summary is not in canonical form")
        #expect(reason(Self.edited { $0["screenMilliseconds"] = .int(1) })
            == "usage field \"screenMilliseconds\" must equal the sum of the screen-time buckets")
        #expect(reason(Self.edited { $0["day"] = .string("2026-02-30") }) == "usage field \"day\" must be a date like 2026-01-31")
        #expect(reason(Self.edited { $0["user"] = .string("Kid!") }) == "usage field \"user\" must be a user name")
        #expect(reason(Self.edited { $0["machine"] = .string("../x") }) == "usage field \"machine\" must be a machine id")
        let bucketRule = "usage buckets must be [hour 0-23, app, milliseconds 1-7200000]"
        for bad: JSONValue in [
            .array([.int(24), .string(""), .int(1)]), .array([.int(9), .string(""), .int(7_200_001)]),
            .array([.int(9), .string(""), .int(0)]), .array([.int(9), .int(3), .int(1)]), .array([.int(9), .string("")]),
            .array([.int(9), .string("a\u{1}b"), .int(1)]), .string("9"),
        ] {
            #expect(reason(Self.edited { $0["buckets"] = .array([bad]) }) == bucketRule, "\(bad)")
        }
        let unsorted: JSONValue = .array([.array([.int(10), .string(""), .int(1)]), .array([.int(9), .string(""), .int(1)])])
        #expect(reason(Self.edited {
            $0["buckets"] = unsorted
            $0["screenMilliseconds"] = .int(2)
        }) == "usage buckets must be sorted by hour and app, each once")
        let twice: JSONValue = .array([.array([.int(9), .string(""), .int(1)]), .array([.int(9), .string(""), .int(1)])])
        #expect(reason(Self.edited {
            $0["buckets"] = twice
            $0["screenMilliseconds"] = .int(2)
        }) == "usage buckets must be sorted by hour and app, each once")
    }

    @Test("the limit scope is a merge field: one parent's scope and the other's limit both stay")
    func limitScopeMerges() {
        let a = MergeFixture.input(
            "ra", version: 2, author: MergeFixture.parentA, time: 200,
            policy: MergeFixture.policy { $0.limitScope = .allComputers })
        let b = MergeFixture.input(
            "rb", version: 2, author: MergeFixture.parentB, time: 300,
            policy: MergeFixture.policy { $0.dailyLimit = .minutes(60) })
        for order in [[MergeFixture.first, a, b], [b, a, MergeFixture.first]] {
            let result = PolicyMerge.fold(order)
            #expect(result.policy?.limitScope == .allComputers)
            #expect(result.policy?.dailyLimit == .minutes(60))
            #expect(result.conflicts.isEmpty)
        }
    }
}
