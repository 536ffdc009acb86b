import Foundation
import Testing

/// `curfew events --verify` on a real database whose events the built `curfew` wrote (refused
/// logins), then edited behind its back with sqlite3.
@Suite struct AuditLogTests {
    /// kid has no screen time, so each `check-login` (no agent) refuses and records `login-refused`.
    func prepared(logins: Int) throws -> CurfewRunner {
        let runner = try CurfewRunner()
        try runner.ok(["init"])
        try runner.ok(["user", "add", "kid"])
        try runner.ok(["limit", "kid", "0"])
        let socket = runner.root.appendingPathComponent("no-agent.sock").path
        for _ in 0..<logins {
            let refused = try runner.run(["check-login", "--user", "kid", "--socket", socket])
            #expect(refused.status == 77)
        }
        return runner
    }

    func sqlite(_ runner: CurfewRunner, _ sql: String) throws {
        #expect(try CurfewRunner.runTool("/usr/bin/sqlite3", ["\(runner.stateDir)/curfew.db", sql]) == 0)
    }

    @Test func anIntactLogVerifiesWithCounts() throws {
        let runner = try prepared(logins: 3)
        defer { runner.cleanUp() }
        let events = try runner.ok(["events", "--json"])
        let list = try #require(try JSONSerialization.jsonObject(with: Data(events.stdout.utf8)) as? [[String: Any]])
        #expect(list.map { $0["kind"] as? String } == ["login-refused", "login-refused", "login-refused"])
        let verified = try runner.ok(["events", "--verify"])
        #expect(verified.stdout.hasPrefix("audit log intact: 3 events and 0 summary rows (0 older events) chained; head "))
        let json = try runner.ok(["events", "--verify", "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["intact"] as? Bool == true)
        #expect(object["events"] as? Int == 3)
        #expect((object["head"] as? String)?.count == 64)
        #expect(object["retentionDays"] is NSNull)
        #expect(verified.stdout.hasSuffix("\nthe agent has not summarised any events yet (curfewd --event-retention, default 365 days)\n"))
    }

    /// The formats docs/design.md gives, computed by another program (Debian's python3, hashlib): the stored
    /// hashes are those; a summary row made by that program replaces two events, `curfew events`
    /// lists it, and the chain still verifies across it.
    @Test func theDocumentedHashFormatsAndASummaryAcrossTheChain() throws {
        let runner = try prepared(logins: 3)
        defer { runner.cleanUp() }
        let script = """
            import hashlib, json, sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            def canonical(values): return json.dumps(values, separators=(',', ':'), ensure_ascii=False)
            def sha(text): return hashlib.sha256(text.encode()).hexdigest()
            previous = '0' * 64
            rows = db.execute('SELECT id, time_ms, user, kind, message, data, prev_hash, hash FROM events ORDER BY id').fetchall()
            for id, time, user, kind, message, data, prev, stored in rows:
                computed = sha('curfew-event-v1\\n' + previous + '\\n' + canonical([time, user, kind, message, data]))
                assert prev == previous and stored == computed, (id, prev, previous, stored, computed)
                previous = stored
            first, second = rows[0], rows[1]
            day = '2026-01-02'
            fields = [first[0], second[0], day, 'kid', 'login-refused', 2, first[1], second[1], first[6], second[7]]
            summary = sha('curfew-event-summary-v1\\n' + '0' * 64 + '\\n' + canonical(fields))
            db.execute('INSERT INTO event_summaries (first_event, last_event, day, user, kind, count, first_ms, last_ms, '
                       'prev_hash, last_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', fields + [summary])
            db.execute('DELETE FROM events WHERE id IN (?, ?)', (first[0], second[0]))
            db.commit()
            print(len(rows))
            """
        let checked = try CurfewRunner.capture("/usr/bin/python3", ["-c", script, "\(runner.stateDir)/curfew.db"])
        #expect(checked == "3\n", "python3 found: \(checked)")
        let verified = try runner.ok(["events", "--verify"])
        #expect(verified.stdout.hasPrefix("audit log intact: 1 events and 1 summary rows (2 older events) chained; head "))
        let listed = try runner.ok(["events"])
        #expect(listed.stdout.hasPrefix("2026-01-02           kid  login-refused  2 events (summarised)\n"), "\(listed.stdout)")
        let json = try runner.ok(["events", "kid", "--json"])
        let list = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(list.count == 2)
        #expect(list.first?["summary"] as? Bool == true)
        #expect(list.first?["count"] as? Int == 2)
        #expect(list.last?["kind"] as? String == "login-refused")
    }

    @Test func aTamperedEventIsFoundByVerify() throws {
        let runner = try prepared(logins: 4)
        defer { runner.cleanUp() }
        try runner.ok(["events", "--verify"])
        try sqlite(runner, "UPDATE events SET message = 'kid logged in as usual' WHERE id = 2;")
        let edited = try runner.run(["events", "--verify"])
        #expect(edited.status == 65)
        #expect(edited.stdout.isEmpty)
        #expect(edited.stderr.hasPrefix("curfew: the audit log is broken at event 2: its content does not match its hash (stored "))
        #expect(edited.stderr.hasSuffix("its time, user, kind, message or data was changed\n"))
        let json = try runner.run(["events", "--verify", "--json"])
        #expect(json.status == 65)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["intact"] as? Bool == false)
        let broken = try #require(object["broken"] as? [String: Any])
        #expect(broken["entry"] as? String == "event")
        #expect(broken["id"] as? Int == 2)

        try sqlite(runner, "DELETE FROM events WHERE id = 2;")
        let removed = try runner.run(["events", "--verify"])
        #expect(removed.status == 65)
        #expect(removed.stderr.hasPrefix("curfew: the audit log is broken at event 3: it links to "))
        #expect(removed.stderr.hasSuffix("(events 2 to 2 are missing)\n"))

        let misuse = try runner.run(["events", "kid", "--verify"])
        #expect(misuse.status == 64)
        #expect(misuse.stderr == "curfew: --verify checks the whole log: it takes no user and no --since\n")
    }
}
