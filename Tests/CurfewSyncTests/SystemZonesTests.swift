import CurfewCore
import CurfewTestSupport
import Foundation
import Testing

@testable import CurfewSync

@Suite("The system's tz database")
struct SystemZonesTests {
    /// `Sun Apr  6 00:59:59 1980` as seconds since 1970 (UTC).
    static func instant(_ fields: ArraySlice<Substring>) -> Int64? {
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let parts = Array(fields)
        guard parts.count == 5, let month = months.firstIndex(of: String(parts[1])), let day = Int(parts[2]),
            let year = Int(parts[4]), let date = LocalDate(year: year, month: month + 1, day: day)
        else { return nil }
        let clock = parts[3].split(separator: ":").compactMap { Int64($0) }
        guard clock.count == 3 else { return nil }
        return Int64(date.daysSinceEpoch) * 86_400 + clock[0] * 3600 + clock[1] * 60 + clock[2]
    }

    /// Every zone name of the machine's database: its TZif files outside posix/ and right/.
    static func allZoneNames(in directory: String) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [] }
        var names: [String] = []
        for case let path as String in enumerator {
            guard ZoneRules.isValidName(path), !path.hasPrefix("posix/"), !path.hasPrefix("right/") else { continue }
            if let bytes = SystemZones.readFile("\(directory)/\(path)"), bytes.starts(with: Array("TZif".utf8)) {
                names.append(path)
            }
        }
        return names.sorted()
    }

    @Test("the TZif reader agrees with zdump -v for every zone of this machine, 1970-2037: every transition and offset")
    func everyZoneAgreesWithZdump() throws {
        let directory = "/usr/share/zoneinfo"
        let zones = SystemZones(directory: directory)
        let names = Self.allZoneNames(in: directory)
        #expect(names.count > 300, "only \(names.count) zones found in \(directory)")
        let range: Range<Int64> = 0..<Int64(LocalDate(year: 2038, month: 1, day: 1)!.daysSinceEpoch) * 86_400
        var mismatches: [String: [String]] = [:]
        var checked = 0
        var transitionCount = 0
        for start in stride(from: 0, to: names.count, by: 80) {
            let batch = Array(names[start..<min(start + 80, names.count)])
            let output = try CompiledZones.runProgram(
                "/usr/bin/zdump", ["-v", "-c", "1970,2038"] + batch, environment: ["TZDIR": directory, "LC_ALL": "C"])
            var expected: [String: [(instant: Int64, offset: Int64, dst: Bool)]] = [:]
            var previous: [String: (instant: Int64, offset: Int64, dst: Bool)] = [:]
            var transitions: [String: [(instant: Int64, offset: Int64, dst: Bool)]] = [:]
            for line in output.split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.count == 16, fields[7] == "=", let instant = Self.instant(fields[1..<6]),
                    fields[14].hasPrefix("isdst="), fields[15].hasPrefix("gmtoff="),
                    let offset = Int64(fields[15].dropFirst(7))
                else { continue }
                let name = String(fields[0])
                let entry = (instant: instant, offset: offset, dst: fields[14] == "isdst=1")
                expected[name, default: []].append(entry)
                // zdump prints each change as a pair: one second before, and the instant itself. A
                // change of abbreviation alone is not a change of offset.
                if let before = previous[name], before.instant == instant - 1,
                    before.offset != offset || before.dst != entry.dst
                {
                    transitions[name, default: []].append(entry)
                }
                previous[name] = entry
            }
            for name in batch {
                checked += 1
                guard let zone = zones.zone(named: name) else {
                    mismatches[name] = ["the reader refused the zone"]
                    continue
                }
                var problems: [String] = []
                for entry in expected[name] ?? [] {
                    let offset = zone.offset(at: entry.instant)
                    let dst = zone.isDaylightSaving(at: entry.instant)
                    if offset != entry.offset || dst != entry.dst {
                        problems.append("at \(utcTimestamp(entry.instant)): \(offset) dst \(dst), zdump \(entry.offset) dst \(entry.dst)")
                    }
                }
                let own = zone.transitions(in: range).map { "\(utcTimestamp($0.instant)) \($0.offset) \($0.isDaylightSaving)" }
                let theirs = (transitions[name] ?? []).map { "\(utcTimestamp($0.instant)) \($0.offset) \($0.dst)" }
                transitionCount += theirs.count
                if own != theirs {
                    let missing = theirs.filter { !own.contains($0) }.prefix(3)
                    let extra = own.filter { !theirs.contains($0) }.prefix(3)
                    problems.append("transitions differ: zdump only \(Array(missing)), reader only \(Array(extra))")
                }
                if !problems.isEmpty { mismatches[name] = Array(problems.prefix(5)) }
            }
        }
        #expect(checked == names.count)
        #expect(transitionCount > 10_000, "only \(transitionCount) transitions compared")
        #expect(mismatches.isEmpty, "\(mismatches.count) zones differ: \(mismatches.sorted { $0.key < $1.key }.prefix(20))")
    }

    @Test("names: no parent directory, no absolute path, not the database's helper files", arguments: [
        "../etc/passwd", "Europe/../../etc/shadow", "/etc/localtime", "Europe//Berlin", ".hidden", "Europe/.x", "-rf",
        "posix/Europe/Berlin", "right/Europe/Berlin", "localtime", "posixrules", "Europe/Berlin\n", "Europe/Ber lin", "",
        "zone.tab", "tzdata.zi", "leap-seconds.list", "Europe",
    ])
    func refusedNames(name: String) {
        #expect(SystemZones(directory: "/usr/share/zoneinfo").zone(named: name) == nil)
    }

    @Test("a zone's file is read once per check interval, and again when it changed (a tzdata upgrade)")
    func reloadWhenTheFileChanges() throws {
        let zones = try CompiledZones()
        defer { zones.remove() }
        try zones.compile("Zone Test/Curfewland 1:00 - CUR\n")
        let slow = SystemZones(directory: zones.directory, recheckSeconds: 3600)
        let quick = SystemZones(directory: zones.directory, recheckSeconds: 0)
        #expect(slow.zone(named: "Test/Curfewland")?.offset(at: 1_790_000_000) == 3600)
        #expect(quick.zone(named: "Test/Curfewland")?.offset(at: 1_790_000_000) == 3600)
        #expect(slow.zone(named: "Test/Nowhere") == nil)
        // The rule changes: from 2026 the zone keeps summer time from the last Sunday in March.
        try zones.compile(
            """
            Rule Cur 2026 max - Mar lastSun 2:00 1:00 S
            Rule Cur 2026 max - Oct lastSun 3:00 0 -
            Zone Test/Curfewland 1:00 - CUR 2026
                                 2:00 Cur CUR%s

            """)
        let summer = Int64(LocalDate(year: 2030, month: 7, day: 1)!.daysSinceEpoch) * 86_400
        let winter = Int64(LocalDate(year: 2030, month: 1, day: 1)!.daysSinceEpoch) * 86_400
        let reloaded = try #require(quick.zone(named: "Test/Curfewland"))
        #expect(reloaded.offset(at: summer) == 3 * 3600 && reloaded.isDaylightSaving(at: summer))
        #expect(reloaded.offset(at: winter) == 2 * 3600 && !reloaded.isDaylightSaving(at: winter))
        // Within the interval the cached rules stay (one stat per zone and interval, not per lookup).
        let cached = try #require(slow.zone(named: "Test/Curfewland"))
        #expect(cached.offset(at: summer) == 3600)
        slow.flush()
        let fresh = try #require(slow.zone(named: "Test/Curfewland"))
        #expect(fresh.offset(at: summer) == 3 * 3600)
    }

    @Test("the computer's own zone: TZ, else what /etc/localtime links to, else its bytes, else UTC")
    func systemZone() throws {
        let zones = try CompiledZones()
        defer { zones.remove() }
        try zones.compile("Zone Test/Own 5:30 - OWN\n")
        #expect(SystemZones(directory: zones.directory, tz: "Test/Own").systemZone().identifier == "Test/Own")
        #expect(SystemZones(directory: zones.directory, tz: ":Test/Own").systemZone().offset(at: 0) == 19_800)
        let link = "\(zones.directory)/link-localtime"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "\(zones.directory)/zoneinfo/Test/Own")
        let nested = "\(zones.directory)/zoneinfo/Test"
        try FileManager.default.createDirectory(atPath: nested, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "\(zones.directory)/Test/Own", toPath: "\(nested)/Own")
        let linked = SystemZones(directory: zones.directory, tz: nil, localtime: link).systemZone()
        #expect(linked.identifier == "Test/Own" && linked.offset(at: 0) == 19_800)
        let copied = SystemZones(directory: "/nonexistent", tz: nil, localtime: "\(nested)/Own").systemZone()
        #expect(copied.identifier == "localtime" && copied.offset(at: 0) == 19_800)
        #expect(SystemZones(directory: "/nonexistent", tz: nil, localtime: "/nonexistent").systemZone().offset(at: 0) == 0)
    }

    @Test("POSIX TZ strings: Jn, n and Mm.w.d rules, signed and extended hours (RFC 8536 3.3.1)")
    func posixStrings() throws {
        func offsets(_ text: String, _ dates: [(Int, Int, Int, Int64)]) throws -> [Int64] {
            let zone = try PosixTimeZone.parse(text)
            let data = ZoneData(transitions: [], transitionTypes: [], types: [.init(offset: 0, isDaylightSaving: false, abbreviation: "X")], footer: zone)
            let rules = ZoneRules(identifier: "x", data: data)
            return dates.map { rules.offset(at: Int64(LocalDate(year: $0.0, month: $0.1, day: $0.2)!.daysSinceEpoch) * 86_400 + $0.3) }
        }
        // Central Europe: last Sunday of March 01:00 UTC to last Sunday of October 01:00 UTC.
        #expect(
            try offsets("CET-1CEST,M3.5.0,M10.5.0/3", [(2030, 3, 31, 3599), (2030, 3, 31, 3600), (2030, 10, 27, 3599), (2030, 10, 27, 3600)])
                == [3600, 7200, 7200, 3600])
        // Greenland: -02 standard, -01 summer, changes at -01:00 and 00:00 local (negative hours).
        #expect(try offsets("<-02>2<-01>,M3.5.0/-1,M10.5.0/0", [(2030, 3, 30, 0), (2030, 7, 1, 0)]) == [-7200, -3600])
        // Jn never counts February 29: J60 is March 1 in a leap year too; n counts it.
        #expect(try offsets("AAA0BBB,J60/0,J300/0", [(2028, 2, 29, 43_200), (2028, 3, 1, 43_200)]) == [0, 3600])
        #expect(try offsets("AAA0BBB,59/0,300/0", [(2028, 2, 28, 43_200), (2028, 2, 29, 43_200)]) == [0, 3600])
        // DST all year (RFC 8536 3.3.1's example).
        #expect(try offsets("EST5EDT,0/0,J365/25", [(2030, 1, 1, 0), (2030, 1, 1, 5 * 3600), (2030, 6, 1, 0), (2030, 12, 31, 86_399)]) == Array(repeating: -4 * 3600, count: 4))
        // Extended hours: 167 hours after the start of the day.
        #expect(try offsets("AAA0BBB,M3.1.0/167,M10.1.0", [(2030, 3, 9, 0), (2030, 3, 9, 23 * 3600)]) == [0, 3600])
        // Southern hemisphere: summer across New Year.
        #expect(try offsets("<+10>-10<+11>,M10.1.0,M4.1.0/3", [(2030, 1, 1, 0), (2030, 6, 1, 0), (2030, 12, 1, 0)]) == [39_600, 36_000, 39_600])
        for bad in ["", "1AB", "CET", "CET-1CEST,M13.1.0,M10.5.0", "CET-1CEST,M3.5.0", "CET-25", "<>1", "X0Y,J0,J1", "AAA0BBB,366,1", "AAA0BBB,M3.5.0/168,M10.5.0", "CET-1 "] {
            #expect(throws: ZoneDataError.self, "\(bad)") { try PosixTimeZone.parse(bad) }
        }
    }

    @Test("version 1 files are read from their 32-bit data; broken files are refused")
    func versionOneAndBrokenFiles() throws {
        let zones = try CompiledZones()
        defer { zones.remove() }
        let berlin = try Data(contentsOf: URL(fileURLWithPath: "/usr/share/zoneinfo/Europe/Berlin"))
        let bytes = [UInt8](berlin)
        // The same file cut after its version 1 block, and marked version 1.
        var header = Array(bytes[0..<44])
        header[4] = 0
        func count(_ at: Int) -> Int { Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3]) }
        let (isut, isstd, leap, time, type, chars) = (count(20), count(24), count(28), count(32), count(36), count(40))
        let size = time * 5 + type * 6 + chars + leap * 8 + isstd + isut
        let version1 = header + bytes[44..<44 + size]
        let old = try ZoneData.parse(Array(version1))
        #expect(old.footer == nil)
        let full = try ZoneData.parse(bytes)
        #expect(full.footer != nil)
        let rules = ZoneRules(identifier: "Europe/Berlin", data: old)
        let summer2000 = Int64(LocalDate(year: 2000, month: 7, day: 1)!.daysSinceEpoch) * 86_400
        #expect(rules.offset(at: summer2000) == 7200)
        // Every shorter prefix is refused with an error, none crashes the reader.
        let refused = (0..<bytes.count).filter { cut in (try? ZoneData.parse(Array(bytes[0..<cut]))) == nil }
        #expect(refused.count == bytes.count)
        var garbled = bytes
        garbled[0] = UInt8(ascii: "X")
        #expect(throws: ZoneDataError.self) { try ZoneData.parse(garbled) }
    }
}
