import Testing

@testable import CurfewCore

/// One row of `PolicyChangeTests.cases`: the policies in force before, the resolution after, what the
/// agent passes in, and the events the change records, in order.
struct PolicyChangeCase: Sendable, CustomTestStringConvertible {
    var label: String
    var before: PolicyChange.InForce
    var after: PolicyInForce.Resolution
    var superusers: Set<String> = []
    var merged: Set<String> = []
    var grants: [GrantSummary] = []
    var newestOnDisk: [String: Int] = [:]
    var missingRecorded: [String: Int] = [:]
    var announced = PolicyChange.Announced()
    var events: [PolicyChange.Event]

    var testDescription: String { label }
}

/// `PolicyChange.record`: what a change of the policies in force records, from the policies before
/// and the resolution after. No I/O: tables of cases.
@Suite struct PolicyChangeTests {
    static func policy(_ user: String, limit: Int, apps: [AppRule] = []) -> Policy {
        var policy = Policy.defaults(for: user)
        policy.dailyLimit = .minutes(limit)
        policy.apps = apps
        return policy
    }

    static func inForce(_ entries: [String: (Policy, Int)]) -> PolicyChange.InForce {
        PolicyChange.InForce(policies: entries.mapValues(\.0), versions: entries.mapValues(\.1))
    }

    static func resolution(
        _ entries: [String: (Policy, Int, PolicyInForce.Source)], failingOpen: Set<String> = [], removed: Set<String> = [],
        missing: [String: Int] = [:]
    ) -> PolicyInForce.Resolution {
        PolicyInForce.Resolution(
            entries: entries.mapValues { PolicyInForce.Entry(policy: $0.0, version: $0.1, source: $0.2) }, failingOpen: failingOpen,
            removed: removed, missing: missing)
    }

    static func grant(_ id: String, _ user: String, extra: Int = 30) -> GrantSummary {
        GrantSummary(
            id: id, user: user, date: LocalDate(year: 2026, month: 11, day: 27)!, extraMinutes: extra, bedtimeDelayMinutes: 0,
            author: "0123456789abcdef", time: 1_795_000_000, requestId: nil)
    }

    static let kid60 = policy("kid", limit: 60)
    static let kid90 = policy("kid", limit: 90)
    static let kid30 = policy("kid", limit: 30)
    static let kidNoSteam = policy("kid", limit: 60, apps: [AppRule(app: "steam", rule: .block)])
    static let sis45 = policy("sis", limit: 45)
    static let kidClosed = Policy.failClosed(for: "kid")

    static let cases: [PolicyChangeCase] = [
        PolicyChangeCase(
            label: "nothing changed: nothing is recorded",
            before: inForce(["kid": (kid60, 3)]), after: resolution(["kid": (kid60, 3, .records)]), events: []),
        PolicyChangeCase(
            label: "limit raised in a new version",
            before: inForce(["kid": (kid60, 3)]), after: resolution(["kid": (kid90, 4, .records)]),
            events: [.loaded(user: "kid", version: 4, merged: false)]),
        PolicyChangeCase(
            label: "limit lowered in a new version",
            before: inForce(["kid": (kid60, 3)]), after: resolution(["kid": (kid30, 4, .records)]),
            events: [.loaded(user: "kid", version: 4, merged: false)]),
        PolicyChangeCase(
            label: "app blocked in a new version",
            before: inForce(["kid": (kid60, 3)]), after: resolution(["kid": (kidNoSteam, 4, .records)]),
            events: [.loaded(user: "kid", version: 4, merged: false)]),
        PolicyChangeCase(
            label: "limit raised by a concurrent edit merged into the version in force",
            before: inForce(["kid": (kid60, 3)]), after: resolution(["kid": (kid90, 3, .records)]), merged: ["kid"],
            events: [.loaded(user: "kid", version: 3, merged: true)]),
        PolicyChangeCase(
            label: "a new version with the same policy is still loaded",
            before: inForce(["kid": (kid60, 3)]), after: resolution(["kid": (kid60, 4, .records)]),
            events: [.loaded(user: "kid", version: 4, merged: false)]),
        PolicyChangeCase(
            label: "first policy of a user",
            before: inForce([:]), after: resolution(["kid": (kid60, 1, .records)]),
            events: [.loaded(user: "kid", version: 1, merged: false)]),
        PolicyChangeCase(
            label: "user removed",
            before: inForce(["kid": (kid60, 3), "sis": (sis45, 2)]), after: resolution(["sis": (sis45, 2, .records)], removed: ["kid"]),
            events: [.unmanaged(user: "kid")]),
        PolicyChangeCase(
            label: "two users removed: in the order of their names",
            before: inForce(["sis": (sis45, 2), "kid": (kid60, 3)]), after: resolution([:], removed: ["kid", "sis"]),
            events: [.unmanaged(user: "kid"), .unmanaged(user: "sis")]),
        PolicyChangeCase(
            label: "at start, the records fold to an older version: the last good policy is kept, loaded and its record missing",
            before: inForce([:]), after: resolution(["kid": (kid90, 7, .kept(recordsVersion: 3))], missing: ["kid": 7]),
            newestOnDisk: ["kid": 3],
            events: [
                .kept(user: "kid", version: 7, recordsVersion: 3), .loaded(user: "kid", version: 7, merged: false),
                .recordMissing(user: "kid", version: 7, newestOnDisk: 3, inForce: 7),
            ]),
        PolicyChangeCase(
            label: "the newest record deleted while in force: only the missing record is told",
            before: inForce(["kid": (kid90, 7)]), after: resolution(["kid": (kid90, 7, .kept(recordsVersion: 3))], missing: ["kid": 7]),
            newestOnDisk: ["kid": 3], events: [.recordMissing(user: "kid", version: 7, newestOnDisk: 3, inForce: 7)]),
        PolicyChangeCase(
            label: "the missing record already told: nothing",
            before: inForce(["kid": (kid90, 7)]), after: resolution(["kid": (kid90, 7, .kept(recordsVersion: 3))], missing: ["kid": 7]),
            newestOnDisk: ["kid": 3], missingRecorded: ["kid": 7], events: []),
        PolicyChangeCase(
            label: "every record gone at start: kept, and none of the user's records is there",
            before: inForce([:]), after: resolution(["kid": (kid90, 7, .kept(recordsVersion: nil))], missing: ["kid": 7]),
            events: [
                .kept(user: "kid", version: 7, recordsVersion: nil), .loaded(user: "kid", version: 7, merged: false),
                .recordMissing(user: "kid", version: 7, newestOnDisk: nil, inForce: 7),
            ]),
        PolicyChangeCase(
            label: "a newer version this computer saw is missing: told, with the version that stays in force",
            before: inForce(["kid": (kid90, 7)]), after: resolution(["kid": (kid90, 7, .records)], missing: ["kid": 8]),
            newestOnDisk: ["kid": 7], missingRecorded: ["kid": 7],
            events: [.recordMissing(user: "kid", version: 8, newestOnDisk: 7, inForce: 7)]),
        PolicyChangeCase(
            label: "a managed user without a policy fails closed",
            before: inForce([:]), after: resolution(["kid": (kidClosed, 0, .failClosed)]), events: [.failedClosed(user: "kid")]),
        PolicyChangeCase(
            label: "still failing closed: nothing",
            before: inForce(["kid": (kidClosed, 0)]), after: resolution(["kid": (kidClosed, 0, .failClosed)]), events: []),
        PolicyChangeCase(
            label: "a policy arrives for a user failing closed",
            before: inForce(["kid": (kidClosed, 0)]), after: resolution(["kid": (kid60, 1, .records)]),
            events: [.loaded(user: "kid", version: 1, merged: false)]),
        PolicyChangeCase(
            label: "a managed user without a policy is let be when the computer fails open",
            before: inForce([:]), after: resolution([:], failingOpen: ["kid"]), events: [.failingOpen(user: "kid")]),
        PolicyChangeCase(
            label: "failing open is told once a run",
            before: inForce([:]), after: resolution([:], failingOpen: ["kid"]), announced: PolicyChange.Announced(failingOpen: ["kid"]),
            events: []),
        PolicyChangeCase(
            label: "a user in force whose policy can no longer be read, failing open: let be, and no longer managed",
            before: inForce(["kid": (kid60, 3)]), after: resolution([:], failingOpen: ["kid"]),
            events: [.failingOpen(user: "kid"), .unmanaged(user: "kid")]),
        PolicyChangeCase(
            label: "a policy for an account of uid 0 is ignored, not loaded",
            before: inForce([:]), after: resolution(["toor": (policy("toor", limit: 60), 1, .records)], missing: ["toor": 1]),
            superusers: ["toor"], events: [.superuserIgnored(user: "toor")]),
        PolicyChangeCase(
            label: "a policy for an account of uid 0 is told once a run",
            before: inForce([:]), after: resolution(["toor": (policy("toor", limit: 60), 1, .records)]), superusers: ["toor"],
            announced: PolicyChange.Announced(superusers: ["toor"]), events: []),
        PolicyChangeCase(
            label: "an account in force that became uid 0 is no longer managed",
            before: inForce(["kid": (kid60, 3)]), after: resolution(["kid": (kid60, 3, .records)]), superusers: ["kid"],
            events: [.superuserIgnored(user: "kid"), .unmanaged(user: "kid")]),
        PolicyChangeCase(
            label: "grants of users in force are told, in the order given; others are not",
            before: inForce(["kid": (kid60, 3)]), after: resolution(["kid": (kid60, 3, .records)]),
            grants: [grant("b", "kid"), grant("c", "sis"), grant("a", "kid", extra: 15)],
            events: [.granted(grant("b", "kid")), .granted(grant("a", "kid", extra: 15))]),
        PolicyChangeCase(
            label: "a grant with the new version that brings its user",
            before: inForce([:]), after: resolution(["kid": (kid60, 1, .records)]), grants: [grant("a", "kid")],
            events: [.loaded(user: "kid", version: 1, merged: false), .granted(grant("a", "kid"))]),
        PolicyChangeCase(
            label: "everything at once: kept and fail-closed by name, failing open, uid 0, loaded, unmanaged, grants, missing",
            before: inForce(["ann": (policy("ann", limit: 60), 2), "bob": (policy("bob", limit: 60), 5), "kid": (kid60, 3)]),
            after: resolution(
                [
                    "zed": (policy("zed", limit: 60), 4, .kept(recordsVersion: 2)), "kid": (kid90, 4, .records),
                    "eve": (Policy.failClosed(for: "eve"), 0, .failClosed), "toor": (policy("toor", limit: 60), 1, .records),
                    "sis": (sis45, 1, .records),
                ], failingOpen: ["tim", "al"], removed: ["bob"], missing: ["zed": 4]),
            superusers: ["toor"], merged: ["kid"], grants: [grant("g", "sis"), grant("h", "bob")], newestOnDisk: ["zed": 2],
            events: [
                .failedClosed(user: "eve"), .kept(user: "zed", version: 4, recordsVersion: 2), .failingOpen(user: "al"),
                .failingOpen(user: "tim"), .superuserIgnored(user: "toor"), .loaded(user: "kid", version: 4, merged: true),
                .loaded(user: "sis", version: 1, merged: false), .loaded(user: "zed", version: 4, merged: false),
                .unmanaged(user: "ann"), .unmanaged(user: "bob"), .granted(grant("g", "sis")),
                .recordMissing(user: "zed", version: 4, newestOnDisk: 2, inForce: 4),
            ]),
    ]

    @Test("what a policy change records", arguments: cases)
    func events(_ test: PolicyChangeCase) {
        let outcome = PolicyChange.record(
            before: test.before, resolution: test.after, superusers: test.superusers, merged: test.merged, grants: test.grants,
            newestOnDisk: test.newestOnDisk, missingRecorded: test.missingRecorded, announced: test.announced)
        #expect(outcome.events == test.events)
    }

    @Test func accountsOfUID0AreLeftOutOfWhatIsInForceAndWhatIsMissing() {
        let toor = Self.policy("toor", limit: 60)
        let outcome = PolicyChange.record(
            before: Self.inForce([:]),
            resolution: Self.resolution(["toor": (toor, 1, .records), "kid": (Self.kid60, 2, .records)], missing: ["toor": 1, "kid": 2]),
            superusers: ["toor"], merged: [], grants: [], newestOnDisk: [:], missingRecorded: [:], announced: PolicyChange.Announced())
        #expect(outcome.inForce == Self.inForce(["kid": (Self.kid60, 2)]))
        #expect(outcome.missing == ["kid": 2])
        #expect(outcome.announced == PolicyChange.Announced(superusers: ["toor"]))
    }

    @Test func whoWasToldIsKeptAndAdded() {
        let outcome = PolicyChange.record(
            before: Self.inForce([:]), resolution: Self.resolution([:], failingOpen: ["kid", "sis"]), superusers: [], merged: [], grants: [],
            newestOnDisk: [:], missingRecorded: [:], announced: PolicyChange.Announced(failingOpen: ["sis", "gone"], superusers: ["toor"]))
        #expect(outcome.events == [.failingOpen(user: "kid")])
        #expect(outcome.announced == PolicyChange.Announced(failingOpen: ["gone", "kid", "sis"], superusers: ["toor"]))
        #expect(outcome.inForce == PolicyChange.InForce())
    }

    /// The log's words and data, exactly as the agent wrote them before the rule moved to Core.
    static let words: [(PolicyChange.Event, EventKind, String, String?)] = [
        (
            .kept(user: "kid", version: 7, recordsVersion: 3), .policyKept,
            "the records fold to an older version 3 for kid; the last good policy (version 7) stays in force", #"{"version": 7}"#
        ),
        (
            .kept(user: "kid", version: 7, recordsVersion: nil), .policyKept,
            "no valid policy can be loaded for kid; the last good policy (version 7) stays in force", #"{"version": 7}"#
        ),
        (.failedClosed(user: "kid"), .failClosed, "no valid policy for kid; no screen time and no logins until one arrives", nil),
        (.failingOpen(user: "kid"), .failOpen, "no valid policy for kid; not enforcing anything (the agent fails open)", nil),
        (.superuserIgnored(user: "toor"), .policyIgnored, "toor is an account of uid 0, which is never managed; its policy is ignored", nil),
        (.loaded(user: "kid", version: 4, merged: false), .policyLoaded, "policy version 4 is in force", #"{"version": 4}"#),
        (
            .loaded(user: "kid", version: 4, merged: true), .policyLoaded, "policy version 4 (merged from concurrent edits) is in force",
            #"{"version": 4}"#
        ),
        (.unmanaged(user: "kid"), .userUnmanaged, "kid is no longer managed", nil),
        (
            .granted(grant("ab", "kid")), .extraTimeGranted, "30m extra on 2026-11-27",
            #"{"record": "ab","date": "2026-11-27","minutes": 30,"bedtimeDelayMinutes": 0,"requestId": null}"#
        ),
        (
            .recordMissing(user: "kid", version: 7, newestOnDisk: 3, inForce: 7), .recordMissing,
            "the record of version 7 of kid is missing from the shared directory (the newest there is version 3); version 7 stays in force",
            #"{"version": 7}"#
        ),
        (
            .recordMissing(user: "kid", version: 8, newestOnDisk: nil, inForce: 7), .recordMissing,
            "the record of version 8 of kid is missing from the shared directory (there is none of kid there); version 7 stays in force",
            #"{"version": 8}"#
        ),
    ]

    @Test func eachEventHasItsKindWordsAndData() {
        let time = Instant(milliseconds: 1_795_000_000_123)
        for (event, kind, message, data) in Self.words {
            let logged = event.auditEvent(at: time)
            #expect(logged.time == time && logged.id == nil)
            #expect(logged.kind == kind, "\(event)")
            #expect(logged.message == message, "\(event)")
            let text = logged.data.map { $0.prettyString.split(separator: "\n").map { $0.trimmingPrefix(while: { $0 == " " }) }.joined() }
            #expect(text == data, "\(event)")
        }
        #expect(PolicyChange.Event.granted(Self.grant("ab", "kid")).auditEvent(at: time).user == "kid")
        #expect(PolicyChange.Event.unmanaged(user: "sis").auditEvent(at: time).user == "sis")
    }
}
