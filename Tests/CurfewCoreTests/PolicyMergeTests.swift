import Testing

@testable import CurfewCore

/// Builders for merge cases: records of `kid`, policies as changes to the defaults.
enum MergeFixture {
    static let parentA = "aaaaaaaaaaaaaaaa"
    static let parentB = "bbbbbbbbbbbbbbbb"
    static let parentC = "cccccccccccccccc"

    static func policy(_ change: (inout Policy) -> Void = { _ in }) -> Policy {
        var policy = Policy.defaults(for: "kid")
        change(&policy)
        return policy
    }

    static func input(
        _ id: String, version: Int, base: Int? = nil, author: String = parentA, time: Int64 = 1000, policy: Policy?
    ) -> PolicyMerge.Input {
        PolicyMerge.Input(
            id: id,
            record: PolicyRecord(
                user: "kid", version: version, baseVersion: base ?? version - 1, author: author, time: time, policy: policy))
    }

    static func window(_ text: String) -> BedtimeWindow? { try! BedtimeWindow.parse(text) }

    /// The first record of every case: the defaults, version 1.
    static let first = input("r1", version: 1, time: 100, policy: policy())
}

@Suite("Merging concurrent edits")
struct PolicyMergeTests {
    typealias F = MergeFixture

    /// Folds every order of `inputs` and expects one result; returns it.
    func foldEveryOrder(_ inputs: [PolicyMerge.Input], sourceLocation: SourceLocation = #_sourceLocation) -> PolicyMerge.Result {
        let expected = PolicyMerge.fold(inputs)
        for order in permutations(inputs) {
            #expect(PolicyMerge.fold(order) == expected, sourceLocation: sourceLocation)
        }
        return expected
    }

    @Test("no records: not managed, version 0")
    func empty() {
        let result = PolicyMerge.fold([])
        #expect(result.policy == nil)
        #expect(result.version == 0)
        #expect(result.record == nil)
        #expect(result.levels.isEmpty)
    }

    @Test("a linear history folds to the newest record's policy exactly, app order included")
    func linear() {
        let v2 = F.policy { $0.apps = [AppRule(app: "steam", rule: .block), AppRule(app: "minecraft", rule: .limit(minutes: 60))] }
        // Version 3 lists the same rules in another order and changes the limit: its list is kept as is.
        let v3 = F.policy {
            $0.dailyLimit = .minutes(60)
            $0.apps = [AppRule(app: "minecraft", rule: .limit(minutes: 60)), AppRule(app: "steam", rule: .block)]
        }
        let v4 = F.policy { _ in }
        let records = [
            F.first, F.input("r2", version: 2, time: 200, policy: v2), F.input("r3", version: 3, time: 300, policy: v3),
        ]
        let three = foldEveryOrder(records)
        #expect(three.policy == v3)
        #expect(three.version == 3)
        #expect(three.record?.id == "r3")
        #expect(three.levels.isEmpty)
        #expect(three.mergedRecords.isEmpty)
        let four = foldEveryOrder(records + [F.input("r4", version: 4, time: 50, policy: v4)])
        #expect(four.policy == v4)
        #expect(four.version == 4)
        // The same record PolicyFold picks.
        let summaries = (records + [F.input("r4", version: 4, time: 50, policy: v4)]).map { RecordSummary(id: $0.id, record: $0.record) }
        #expect(four.record == PolicyFold.current(summaries))
    }

    @Test("edits of different fields from the same base are both kept, with no conflict")
    func disjoint() {
        let a = F.input("a", version: 2, author: F.parentA, time: 200, policy: F.policy { $0.dailyLimit = .minutes(60) })
        let b = F.input("b", version: 2, author: F.parentB, time: 150, policy: F.policy { $0.bedtime = F.window("21:30-07:00") })
        let result = foldEveryOrder([F.first, a, b])
        #expect(
            result.policy
                == F.policy {
                    $0.dailyLimit = .minutes(60)
                    $0.bedtime = F.window("21:30-07:00")
                })
        #expect(result.version == 2)
        #expect(result.record?.id == "a")
        #expect(result.mergedRecords == ["a", "b"])
        #expect(result.conflicts == [])
        #expect(result.levels == [PolicyMerge.Level(version: 2, records: ["a", "b"], conflicts: [])])
    }

    struct ConflictCase: Sendable, CustomTestStringConvertible {
        var timeA: Int64, authorA: String, idA: String
        var timeB: Int64, authorB: String, idB: String
        /// The daily limit that wins: a's 60 or b's 180.
        var winner: Int
        var testDescription: String { "a \(timeA) \(authorA) \(idA), b \(timeB) \(authorB) \(idB)" }
    }

    @Test(
        "a field both changed: the later record's value, ties broken by key id, then record id",
        arguments: [
            // a is later
            ConflictCase(timeA: 200, authorA: MergeFixture.parentA, idA: "a", timeB: 100, authorB: MergeFixture.parentB, idB: "b", winner: 60),
            // b is later
            ConflictCase(timeA: 100, authorA: MergeFixture.parentA, idA: "a", timeB: 200, authorB: MergeFixture.parentB, idB: "b", winner: 180),
            // same time: b's key id is greater
            ConflictCase(timeA: 100, authorA: MergeFixture.parentA, idA: "a", timeB: 100, authorB: MergeFixture.parentB, idB: "b", winner: 180),
            // same time: a's key id is greater
            ConflictCase(timeA: 100, authorA: MergeFixture.parentC, idA: "a", timeB: 100, authorB: MergeFixture.parentB, idB: "b", winner: 60),
            // same time and key: a's record id is greater
            ConflictCase(timeA: 100, authorA: MergeFixture.parentA, idA: "z", timeB: 100, authorB: MergeFixture.parentA, idB: "b", winner: 60),
        ])
    func conflict(_ c: ConflictCase) {
        let a = F.input(c.idA, version: 2, author: c.authorA, time: c.timeA, policy: F.policy { $0.dailyLimit = .minutes(60) })
        let b = F.input(
            c.idB, version: 2, author: c.authorB, time: c.timeB,
            policy: F.policy {
                $0.dailyLimit = .minutes(180)
                $0.lockout = .lock
            })
        let result = foldEveryOrder([F.first, a, b])
        #expect(
            result.policy
                == F.policy {
                    $0.dailyLimit = .minutes(c.winner)
                    $0.lockout = .lock
                })
        #expect(result.conflicts == ["dailyLimitMinutes"])
        #expect(result.mergedRecords.first == (c.winner == 60 ? c.idA : c.idB))
    }

    @Test("bedtimeLockout merges as a field of its own: one parent's network at bedtime, the other's lock at the limit")
    func lockoutByCause() {
        let a = F.input("a", version: 2, author: F.parentA, time: 200, policy: F.policy { $0.bedtimeLockout = .network })
        let b = F.input("b", version: 2, author: F.parentB, time: 150, policy: F.policy { $0.lockout = .lock })
        let result = foldEveryOrder([F.first, a, b])
        #expect(result.policy == F.policy {
            $0.lockout = .lock
            $0.bedtimeLockout = .network
        })
        #expect(result.conflicts == [])
        // Both set it: the later record wins and the conflict is named.
        let c = F.input("c", version: 2, author: F.parentB, time: 300, policy: F.policy { $0.bedtimeLockout = .apps })
        let both = foldEveryOrder([F.first, a, c])
        #expect(both.policy?.bedtimeLockout == .apps)
        #expect(both.conflicts == ["bedtimeLockout"])
        // Taking it back (same as lockout again) is a change too, and merges with another field's edit.
        let v2 = F.input("v2", version: 2, time: 200, policy: F.policy { $0.bedtimeLockout = .network })
        let back = F.input("back", version: 3, author: F.parentA, time: 300, policy: F.policy { _ in })
        let limit = F.input("limit", version: 3, author: F.parentB, time: 250, policy: F.policy {
            $0.bedtimeLockout = .network
            $0.dailyLimit = .minutes(60)
        })
        let undone = foldEveryOrder([F.first, v2, back, limit])
        #expect(undone.policy == F.policy { $0.dailyLimit = .minutes(60) })
        #expect(undone.conflicts == [])
    }

    @Test("the same change on both sides is no conflict")
    func sameChange() {
        let a = F.input("a", version: 2, author: F.parentA, policy: F.policy { $0.dailyLimit = .minutes(60) })
        let b = F.input(
            "b", version: 2, author: F.parentB,
            policy: F.policy {
                $0.dailyLimit = .minutes(60)
                $0.warnMinutes = [10]
            })
        let result = foldEveryOrder([F.first, a, b])
        #expect(
            result.policy
                == F.policy {
                    $0.dailyLimit = .minutes(60)
                    $0.warnMinutes = [10]
                })
        #expect(result.conflicts == [])
    }

    @Test("weekday overrides merge day by day")
    func weekdays() {
        let base = F.input(
            "r1", version: 1, time: 100,
            policy: F.policy {
                $0.weekdayLimits = [.mon: .minutes(30)]
                $0.weekdayBedtimes = [.fri: F.window("22:00-08:00")]
            })
        let a = F.input(
            "a", version: 2, author: F.parentA, time: 300,
            policy: F.policy {
                $0.weekdayLimits = [.mon: .minutes(30), .sat: .minutes(180)]
                $0.weekdayBedtimes = [.fri: nil]
            })
        let b = F.input(
            "b", version: 2, author: F.parentB, time: 200,
            policy: F.policy {
                // Removes Monday's override, sets Sunday, and changes Friday night differently.
                $0.weekdayLimits = [.sun: .unlimited]
                $0.weekdayBedtimes = [.fri: F.window("23:00-08:00"), .sat: F.window("23:00-09:00")]
            })
        let result = foldEveryOrder([base, a, b])
        #expect(
            result.policy
                == F.policy {
                    $0.weekdayLimits = [.sat: .minutes(180), .sun: .unlimited]
                    $0.weekdayBedtimes = [.fri: nil, .sat: F.window("23:00-09:00")]
                })
        #expect(result.conflicts == ["weekdayBedtimes.fri"])
    }

    @Test("app rules merge app by app: added, removed, changed")
    func apps() {
        let base = F.input(
            "r1", version: 1, time: 100,
            policy: F.policy {
                $0.apps = [AppRule(app: "steam", rule: .block), AppRule(app: "xonotic", rule: .block), AppRule(app: "tux", rule: .allow)]
            })
        let a = F.input(
            "a", version: 2, author: F.parentA, time: 300,
            policy: F.policy {
                // Removes steam, adds minecraft, changes xonotic.
                $0.apps = [
                    AppRule(app: "minecraft", rule: .limit(minutes: 60)), AppRule(app: "xonotic", rule: .limit(minutes: 30)),
                    AppRule(app: "tux", rule: .allow),
                ]
            })
        let b = F.input(
            "b", version: 2, author: F.parentB, time: 200,
            policy: F.policy {
                // Removes xonotic (a conflict with a's change, which is later), adds gcompris.
                $0.apps = [AppRule(app: "steam", rule: .block), AppRule(app: "tux", rule: .allow), AppRule(app: "gcompris", rule: .allow)]
            })
        let result = foldEveryOrder([base, a, b])
        #expect(
            result.policy?.apps == [
                AppRule(app: "minecraft", rule: .limit(minutes: 60)), AppRule(app: "xonotic", rule: .limit(minutes: 30)),
                AppRule(app: "tux", rule: .allow), AppRule(app: "gcompris", rule: .allow),
            ])
        #expect(result.conflicts == ["apps.xonotic"])
        // When the removal is the later change, the app is gone.
        var laterB = b
        laterB.record.time = 400
        let removed = foldEveryOrder([base, a, laterB])
        #expect(removed.policy?.apps.map(\.app) == ["tux", "gcompris", "minecraft"])
        #expect(removed.conflicts == ["apps.xonotic"])
    }

    @Test("three edits of one base: each field from the latest record that changed it")
    func three() {
        let a = F.input("a", version: 2, author: F.parentA, time: 300, policy: F.policy { $0.dailyLimit = .minutes(60) })
        let b = F.input(
            "b", version: 2, author: F.parentB, time: 200,
            policy: F.policy {
                $0.dailyLimit = .minutes(90)
                $0.timezone = "Europe/Berlin"
            })
        let c = F.input(
            "c", version: 2, author: F.parentC, time: 100,
            policy: F.policy {
                $0.timezone = "Europe/Paris"
                $0.lockout = .apps
            })
        let result = foldEveryOrder([F.first, a, b, c])
        #expect(
            result.policy
                == F.policy {
                    $0.dailyLimit = .minutes(60)
                    $0.timezone = "Europe/Berlin"
                    $0.lockout = .apps
                })
        #expect(result.mergedRecords == ["a", "b", "c"])
        #expect(result.conflicts == ["dailyLimitMinutes", "timezone"])
    }

    @Test("a removal wins over edits of the same base only when it is later")
    func removal() {
        let edit = F.input("e", version: 2, author: F.parentA, time: 200, policy: F.policy { $0.dailyLimit = .minutes(60) })
        let laterRemoval = F.input("r", version: 2, author: F.parentB, time: 300, policy: nil)
        let removed = foldEveryOrder([F.first, edit, laterRemoval])
        #expect(removed.policy == nil)
        #expect(removed.version == 2)
        #expect(removed.record?.removesUser == true)
        #expect(removed.conflicts == ["policy"])
        let earlierRemoval = F.input("r", version: 2, author: F.parentB, time: 100, policy: nil)
        let kept = foldEveryOrder([F.first, edit, earlierRemoval])
        #expect(kept.policy == F.policy { $0.dailyLimit = .minutes(60) })
        #expect(kept.conflicts == ["policy"])
        #expect(kept.mergedRecords == ["e", "r"])
        // A user removed and added again: the new first record decides everything.
        let again = F.input("n", version: 3, base: 2, time: 400, policy: F.policy { $0.lockout = .lock })
        #expect(foldEveryOrder([F.first, edit, laterRemoval, again]).policy == F.policy { $0.lockout = .lock })
    }

    @Test("a record based on a merged version applies on top of the merged policy")
    func onTopOfMerge() {
        let a = F.input("a", version: 2, author: F.parentA, time: 200, policy: F.policy { $0.dailyLimit = .minutes(60) })
        let b = F.input("b", version: 2, author: F.parentB, time: 150, policy: F.policy { $0.bedtime = F.window("21:30-07:00") })
        let merged = F.policy {
            $0.dailyLimit = .minutes(60)
            $0.bedtime = F.window("21:30-07:00")
        }
        // The CLI's next edit: the merged policy plus a change, version 3 based on 2.
        var next = merged
        next.lockout = .lock
        let c = F.input("c", version: 3, base: 2, author: F.parentB, time: 400, policy: next)
        let result = foldEveryOrder([F.first, a, b, c])
        #expect(result.policy == next)
        #expect(result.version == 3)
        #expect(result.mergedRecords.isEmpty)
        #expect(result.levels.map(\.version) == [2])
        // A late edit of version 1 merges into version 2. c's author saw a merge of a and b only (c
        // agrees with the merge on the daily limit), so c is compared with the whole version 2 and
        // sets d's warnings back: the documented limit of a base named by version alone.
        let late = F.input("d", version: 2, author: F.parentC, time: 500, policy: F.policy { $0.warnMinutes = [5] })
        let withLate = foldEveryOrder([F.first, a, b, c, late])
        #expect(withLate.version == 3)
        #expect(withLate.levels.first?.records == ["d", "a", "b"])
        #expect(withLate.policy == next)
    }

    @Test("a parent's second edit made before the other parent's first arrived keeps the other's change")
    func secondEditBeforeTheMerge() {
        let a = F.input("a", version: 2, author: F.parentA, time: 200, policy: F.policy { $0.dailyLimit = .minutes(60) })
        let b = F.input("b", version: 2, author: F.parentB, time: 150, policy: F.policy { $0.bedtime = F.window("21:30-07:00") })
        // a's author edits again, from a alone.
        let a3 = F.input(
            "a3", version: 3, author: F.parentA, time: 300,
            policy: F.policy {
                $0.dailyLimit = .minutes(60)
                $0.lockout = .lock
            })
        let result = foldEveryOrder([F.first, a, b, a3])
        #expect(
            result.policy
                == F.policy {
                    $0.dailyLimit = .minutes(60)
                    $0.bedtime = F.window("21:30-07:00")
                    $0.lockout = .lock
                })
        // An author who saw the merge (a3 keeps b's bedtime) and set one of b's fields back: the
        // merge is the base, so the change back counts.
        let seen = F.input(
            "seen", version: 3, author: F.parentA, time: 300,
            policy: F.policy {
                $0.dailyLimit = .minutes(120)
                $0.bedtime = F.window("21:30-07:00")
                $0.warnMinutes = [10]
            })
        #expect(
            foldEveryOrder([F.first, a, b, seen]).policy
                == F.policy {
                    $0.bedtime = F.window("21:30-07:00")
                    $0.warnMinutes = [10]
                })
        // A removal by the other parent's key at that version: the merge is the base.
        let removal = F.input("r", version: 2, author: F.parentB, time: 100, policy: nil)
        #expect(foldEveryOrder([F.first, a, removal, a3]).policy == a3.record.policy)
    }

    @Test("a record based on an older version changes only what it changed")
    func staleBase() {
        let v2 = F.input("r2", version: 2, time: 200, policy: F.policy { $0.dailyLimit = .minutes(60) })
        // Version 3, but made from version 1: it only changes the lockout.
        let v3 = F.input("r3", version: 3, base: 1, author: F.parentB, time: 300, policy: F.policy { $0.lockout = .lock })
        let result = foldEveryOrder([F.first, v2, v3])
        #expect(
            result.policy
                == F.policy {
                    $0.dailyLimit = .minutes(60)
                    $0.lockout = .lock
                })
        #expect(result.version == 3)
    }

    @Test("an invalid merge falls back to the winner's whole policy and says so")
    func fallback() {
        // Valid records always merge into a valid policy; a state holding a broken field is the only way.
        var broken = PolicyMerge.fields(of: F.policy())
        broken["dailyLimitMinutes"] = .int(17)
        let previous = PolicyMerge.State(policy: F.policy(), fields: broken)
        let winner = F.input("w", version: 2, author: F.parentB, time: 300, policy: F.policy { $0.lockout = .lock })
        let other = F.input("o", version: 2, author: F.parentA, time: 200, policy: F.policy { $0.timezone = "Europe/Berlin" })
        let clean = PolicyMerge.State(policy: F.policy(), fields: PolicyMerge.fields(of: F.policy()))
        let (state, level) = PolicyMerge.foldLevel([winner, other], previous: previous) { _ in clean }
        #expect(state?.policy == F.policy { $0.lockout = .lock })
        #expect(
            level?.fallback
                == "the merged policy is not valid (daily limit must be a multiple of 15 minutes, got 17); record w is used whole")
        #expect(level?.records == ["w", "o"])
    }

    @Test("records the fold needs: the newest in a linear history; back to the last independent version otherwise")
    func needed() {
        let a = F.input("a", version: 2, author: F.parentA, time: 200, policy: F.policy { $0.dailyLimit = .minutes(60) })
        let b = F.input("b", version: 2, author: F.parentB, time: 150, policy: F.policy { $0.lockout = .lock })
        let c = F.input("c", version: 3, time: 300, policy: F.policy { $0.lockout = .apps })
        let d = F.input("d", version: 4, base: 2, time: 300, policy: F.policy { $0.warnMinutes = [1] })
        func ids(_ inputs: [PolicyMerge.Input]) -> [String] {
            PolicyMerge.needed(inputs.map { RecordSummary(id: $0.id, record: $0.record) }).map(\.id).sorted()
        }
        #expect(ids([F.first]) == ["r1"])
        #expect(ids([F.first, a, c]) == ["c"])
        #expect(ids([F.first, a, b]) == ["a", "b", "r1"])
        // c is based on version 2, which merged a and b: c may be compared with its author's own a.
        #expect(ids([F.first, a, b, c]) == ["a", "b", "c", "r1"])
        #expect(ids([F.first, a, b, c, F.input("e", version: 4, time: 400, policy: F.policy())]) == ["e"])
        #expect(ids([F.first, a, b, c, d]) == ["a", "b", "c", "d", "r1"])
        #expect(ids([F.first, a, c, d]) == ["a", "c", "d"])
    }

    @Test("random histories: every order folds alike, and folding only the needed records changes nothing")
    func randomHistories() {
        var generator = SeededGenerator(seed: 0x5EED_CAFE)
        let authors = [F.parentA, F.parentB, F.parentC]
        for round in 0..<300 {
            var inputs: [PolicyMerge.Input] = []
            var policies: [Policy] = [F.policy()]
            let count = Int.random(in: 1...7, using: &generator)
            for index in 0..<count {
                let version = Int.random(in: 1...4, using: &generator)
                let base = Int.random(in: 0..<version, using: &generator)
                var policy = policies.randomElement(using: &generator)!
                for _ in 0..<Int.random(in: 1...3, using: &generator) { randomChange(&policy, using: &generator) }
                policies.append(policy)
                let removes = Int.random(in: 0..<10, using: &generator) == 0
                inputs.append(
                    F.input(
                        "\(round)-\(index)", version: version, base: base, author: authors.randomElement(using: &generator)!,
                        time: Int64.random(in: 100...103, using: &generator), policy: removes ? nil : policy))
            }
            let expected = PolicyMerge.fold(inputs)
            for _ in 0..<6 {
                #expect(PolicyMerge.fold(inputs.shuffled(using: &generator)) == expected, "round \(round)")
            }
            if let policy = expected.policy { #expect((try? policy.validate()) != nil) }
            let summaries = inputs.map { RecordSummary(id: $0.id, record: $0.record) }
            #expect(expected.record == PolicyFold.current(summaries))
            let needed = Set(PolicyMerge.needed(summaries).map(\.id))
            let trimmed = PolicyMerge.fold(inputs.filter { needed.contains($0.id) })
            #expect(trimmed.policy == expected.policy, "round \(round)")
            #expect(trimmed.version == expected.version)
            #expect(trimmed.top == expected.top)
        }
    }

    func randomChange(_ policy: inout Policy, using generator: inout SeededGenerator) {
        let minutes = [0, 30, 60, 90, 120, 180]
        let windows = ["20:00-07:00", "21:30-07:00", "22:00-08:00"].map(F.window)
        let apps = ["steam", "minecraft", "tux"]
        let days = [Weekday.sat, .sun, .fri]
        switch Int.random(in: 0..<8, using: &generator) {
        case 0: policy.dailyLimit = .minutes(minutes.randomElement(using: &generator)!)
        case 1: policy.weekdayLimits[days.randomElement(using: &generator)!] = Bool.random(using: &generator) ? nil : .unlimited
        case 2: policy.bedtime = windows.randomElement(using: &generator)!
        case 3: policy.weekdayBedtimes[days.randomElement(using: &generator)!] = Bool.random(using: &generator) ? nil : .some(nil)
        case 4:
            let app = apps.randomElement(using: &generator)!
            policy.apps.removeAll { $0.app == app }
            if Bool.random(using: &generator) {
                policy.apps.append(AppRule(app: app, rule: Bool.random(using: &generator) ? .block : .limit(minutes: 45)))
            }
        case 5: policy.warnMinutes = [[15, 5, 1], [10], []].randomElement(using: &generator)!
        case 6: policy.lockout = Lockout.allCases.randomElement(using: &generator)!
        default: policy.timezone = [nil, "Europe/Berlin", "America/New_York"].randomElement(using: &generator)!
        }
    }
}

/// SplitMix64: the same sequence on every run and platform.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E9B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
