/// Folds one user's verified records into the policy in force, merging concurrent edits field by
/// field, so every computer reaches the same policy whatever order the files arrived in.
///
/// The rules, exactly:
/// - Records are grouped into **levels** by `version`; levels are folded in ascending order. The
///   state after level `v`, `S(v)`, is the user's policy (or "not managed") once every record of
///   version `v` or below is folded. `S(b)` for a version `b` without records is the state of the
///   highest level at or below `b`; below every level the user is not managed.
/// - Within a level, records are ranked: later `time` first, then the greater key id (`author`),
///   then the greater record id. The first is the level's **winner** (the record
///   `PolicyFold.current` picks at the top level).
/// - A record's **base** is `S(baseVersion)`: the state at the version its author edited, as every
///   reader folds it. A record whose `baseVersion` is the version a merge produced is therefore
///   applied on top of the merged policy, which is what the CLI's next edit does. One exception
///   (`base(of:merged:level:)`): when that version merged several records, one of them by the same
///   key, and the record agrees with that own record (not with the merge) on every field where
///   the two differ, its author had not seen the merge, and the own record is the base; so a
///   parent's second edit made before the other parent's first arrived does not take it back.
/// - A record **changes** a field when its value differs from the base's (a record without a base,
///   the user's first, sets every field). Fields: `dailyLimitMinutes`, `weekdayLimits.<day>`,
///   `bedtime`, `weekdayBedtimes.<day>`, `apps.<app>` (a rule added, removed or changed),
///   `warnMinutes`, `lockout`, `bedtimeLockout`, `timezone`, `limitScope`, `weeklyLimitMinutes`, `breaks`,
///   `selfExtension`, `downtime[<name>]` (a window added, removed or changed) and `exceptions[<from>]`
///   (an exception by its first date), so two parents editing different windows both keep theirs.
/// - The level's result starts from the previous level's state (or the winner's policy when the
///   user was not managed) and takes each field changed by at least one record from the
///   highest-ranked record that changed it. When records changed a field to different values, the
///   field is **in conflict**: the later record wins (ties: key id, then record id).
/// - A removal record (policy null) wins only when it is the level's winner (the latest); it then
///   removes the user whatever the other records of the level say. A removal that is not the
///   winner is ignored. Either way, a level holding both reports the conflict field `policy`.
/// - The result is validated; if the merged policy is not valid, the level takes the winner's whole
///   policy and says why (`fallback`).
/// - Apps keep the order of the winner's list, then of the other records by rank, then of the
///   previous state.
/// - A single linear history (one record per version, each based on the one before) folds to the
///   newest record's policy exactly, as a plain "highest version wins" would.
public enum PolicyMerge {
    /// One verified record and its id (its file name).
    public struct Input: Sendable, Equatable {
        public var id: String
        public var record: PolicyRecord

        public init(id: String, record: PolicyRecord) {
            self.id = id
            self.record = record
        }
    }

    /// A version at which two or more records were merged.
    public struct Level: Sendable, Equatable {
        public var version: Int
        /// The level's record ids, the winner first.
        public var records: [String]
        /// Fields that records changed to different values, sorted (`policy` when a removal met edits).
        public var conflicts: [String]
        /// Why the field-by-field result was not used, when it was not valid; the winner's whole policy
        /// was used instead.
        public var fallback: String?

        public init(version: Int, records: [String], conflicts: [String], fallback: String? = nil) {
            self.version = version
            self.records = records
            self.conflicts = conflicts
            self.fallback = fallback
        }
    }

    public struct Result: Sendable, Equatable {
        /// The policy in force; nil when the user is not managed (no records, or removed).
        public var policy: Policy?
        /// The effective version: the highest version among the records (0 without records). The next
        /// edit is this plus one, based on this.
        public var version: Int
        /// The winner of the highest version: the record `PolicyFold.current` picks.
        public var record: RecordSummary?
        /// Every level that merged two or more records, ascending (only levels at or above the first
        /// record `needed(_:)` keeps, when the input was trimmed by it).
        public var levels: [Level]

        /// The merge at the effective version, when the newest version holds two or more records.
        public var top: Level? { levels.last.flatMap { $0.version == version ? $0 : nil } }
        /// The records merged into the policy in force, winner first; empty when one record decides it.
        public var mergedRecords: [String] { top?.records ?? [] }
        /// The fields in conflict in the merge at the effective version.
        public var conflicts: [String] { top?.conflicts ?? [] }
    }

    /// Folds the verified records of one user (records of other users must not be passed). The result
    /// depends only on the set of records, never on their order; an id given twice counts once.
    public static func fold(_ inputs: [Input]) -> Result {
        var unique: [String: Input] = [:]
        for input in inputs where unique[input.id] == nil { unique[input.id] = input }
        let byVersion = Dictionary(grouping: unique.values, by: \.record.version)
        var states: [(version: Int, state: State?)] = []
        var levels: [Level] = []
        var winner: Input?
        for version in byVersion.keys.sorted() {
            let ranked = byVersion[version]!.sorted(by: outranks)
            let (state, level) = foldLevel(ranked, previous: states.last?.state ?? nil) { edit in
                base(of: edit, merged: stateAt(edit.record.baseVersion, in: states), level: byVersion[edit.record.baseVersion] ?? [])
            }
            states.append((version, state))
            if let level { levels.append(level) }
            winner = ranked[0]
        }
        return Result(
            policy: states.last?.state?.policy, version: states.last?.version ?? 0,
            record: winner.map { RecordSummary(id: $0.id, record: $0.record) }, levels: levels)
    }

    /// The records the fold of `summaries` (one user's) needs: those from the newest version whose
    /// state does not depend on older ones. That is a version with one record that is based on the
    /// state just below it (not a version that merged several records), where no newer record is
    /// based on anything older. In a linear history this is only the newest record, so a reader
    /// loads one file however long the history is. Folding the returned records gives the same
    /// policy, version and top merge as folding all.
    public static func needed(_ summaries: [RecordSummary]) -> [RecordSummary] {
        let versions = Set(summaries.map(\.version)).sorted()
        let byVersion = Dictionary(grouping: summaries, by: \.version)
        // The lowest base among records at or above each level, from the top down.
        var lowestBaseAbove = Int.max
        for (index, version) in versions.enumerated().reversed() {
            let level = byVersion[version]!
            let previous = index > 0 ? versions[index - 1] : 0
            // A base that merged several records may be compared with its author's own record there.
            if level.count == 1, level[0].baseVersion >= previous, lowestBaseAbove >= version,
                (byVersion[level[0].baseVersion]?.count ?? 0) < 2
            {
                return summaries.filter { $0.version >= version }
            }
            lowestBaseAbove = min(lowestBaseAbove, level.map(\.baseVersion).min()!)
        }
        return summaries
    }

    // MARK: - The fold

    /// A state: the policy and its fields by name.
    struct State {
        var policy: Policy
        var fields: [String: JSONValue]
    }

    /// The later record first; then the greater key id; then the greater id.
    static func outranks(_ a: Input, _ b: Input) -> Bool {
        (a.record.time, a.record.author, a.id) > (b.record.time, b.record.author, b.id)
    }

    /// `S(version)`: the state of the highest level at or below `version`; nil when none (or removed).
    static func stateAt(_ version: Int, in states: [(version: Int, state: State?)]) -> State? {
        var low = 0
        var high = states.count
        while low < high {
            let middle = (low + high) / 2
            if states[middle].version <= version { low = middle + 1 } else { high = middle }
        }
        return low == 0 ? nil : states[low - 1].state
    }

    /// The state an edit is compared with to find what it changed. Normally `S(baseVersion)`. When
    /// that version merged several records and the edit's author made exactly one of them, the author
    /// may not have seen the merge (two edits in a row while another parent edited too): if the
    /// edit agrees with the author's own record on every field where that record and the merge
    /// differ, it is compared with the author's own record, so the other parent's changes are not
    /// taken back; if it agrees with the merge on any of those fields, its author saw the merge.
    static func base(of edit: Input, merged: State?, level: [Input]) -> State? {
        guard level.count > 1, let mine = edit.record.policy, let merged else { return merged }
        let own = level.filter { $0.record.author == edit.record.author }
        guard own.count == 1, let ownPolicy = own[0].record.policy else { return merged }
        let ownFields = fields(of: ownPolicy)
        let differing = Set(ownFields.keys).union(merged.fields.keys).filter { ownFields[$0] != merged.fields[$0] }
        let mineFields = fields(of: mine)
        let sawMerge = differing.isEmpty || differing.contains { mineFields[$0] == merged.fields[$0] }
        return sawMerge ? merged : State(policy: ownPolicy, fields: ownFields)
    }

    static func foldLevel(_ ranked: [Input], previous: State?, base: (Input) -> State?) -> (State?, Level?) {
        let version = ranked[0].record.version
        let ids = ranked.map(\.id)
        let edits = ranked.filter { $0.record.policy != nil }
        guard let winnerPolicy = ranked[0].record.policy else {
            // The latest record removes the user.
            let level = ranked.count > 1 ? Level(version: version, records: ids, conflicts: edits.isEmpty ? [] : ["policy"]) : nil
            return (nil, level)
        }
        let winnerFields = fields(of: winnerPolicy)
        let target = previous?.fields ?? winnerFields
        var result = target
        var conflicts: [String] = edits.count < ranked.count ? ["policy"] : []
        let changes: [(fields: [String: JSONValue], changed: Set<String>)] = edits.map { edit in
            let mine = fields(of: edit.record.policy!)
            guard let baseFields = base(edit)?.fields else {
                return (mine, Set(mine.keys).union(target.keys))
            }
            let changed = Set(mine.keys).union(baseFields.keys).filter { mine[$0] != baseFields[$0] }
            return (mine, changed)
        }
        let allChanged = changes.reduce(into: Set<String>()) { $0.formUnion($1.changed) }
        for field in allChanged {
            // Ranked, so the first that changed the field is the latest.
            let values = changes.filter { $0.changed.contains(field) }.map { $0.fields[field] }
            result[field] = values[0]
            if values.contains(where: { $0 != values[0] }) { conflicts.append(field) }
        }
        conflicts.sort()
        let level = ranked.count > 1 ? Level(version: version, records: ids, conflicts: conflicts) : nil
        if result == winnerFields {
            // Exactly the winner's policy, app order included: a linear history ends here.
            return (State(policy: winnerPolicy, fields: winnerFields), level)
        }
        let orders = edits.map { $0.record.policy!.apps.map(\.app) } + [previous?.policy.apps.map(\.app) ?? []]
        do {
            let merged = try Policy.decode(json(result, user: winnerPolicy.user, appOrder: orders.flatMap { $0 }))
            return (State(policy: merged, fields: result), level)
        } catch {
            var fellBack = level ?? Level(version: version, records: ids, conflicts: conflicts)
            fellBack.fallback = "the merged policy is not valid (\(error.message)); record \(ids[0]) is used whole"
            return (State(policy: winnerPolicy, fields: winnerFields), fellBack)
        }
    }

    // MARK: - Fields

    static let appPrefix = "apps."
    static let dayFields = ["weekdayLimits", "weekdayBedtimes"]
    /// Lists merged entry by entry, by the field that names an entry; entries kept in key order.
    static let keyedLists = [("downtime", "name"), ("exceptions", "from")]

    /// The policy's fields by merge name: the policy's JSON field names (docs/design.md), with one field per weekday
    /// override (`weekdayLimits.sat`) and per app (`apps.steam`). Absent overrides and apps have no
    /// entry.
    static func fields(of policy: Policy) -> [String: JSONValue] {
        guard case .object(let object) = policy.json else { return [:] }
        var fields: [String: JSONValue] = [:]
        for (key, value) in object.entries where key != "user" {
            switch (key, value) {
            case (_, .object(let days)) where dayFields.contains(key):
                for (day, entry) in days.entries { fields["\(key).\(day)"] = entry }
            case (_, .array(let entries)) where keyedLists.contains(where: { $0.0 == key }):
                let keyField = keyedLists.first { $0.0 == key }!.1
                for entry in entries {
                    if case .object(let object) = entry, case .string(let name)? = object[keyField] {
                        fields["\(key)[\(name)]"] = entry
                    }
                }
            case ("apps", .array(let rules)):
                for rule in rules {
                    if case .object(let object) = rule, case .string(let app)? = object["app"] {
                        fields[appPrefix + app] = rule
                    }
                }
            default:
                fields[key] = value
            }
        }
        return fields
    }

    /// The JSON form of a policy from its fields, apps in the first order they appear in `appOrder`.
    static func json(_ fields: [String: JSONValue], user: String, appOrder: [String]) -> JSONValue {
        var object = JSONObject([("user", .string(user))])
        for day in dayFields { object[day] = .object(JSONObject()) }
        object["apps"] = .array([])
        var lists: [String: [JSONValue]] = [:]
        for (key, value) in fields.sorted(by: { $0.key < $1.key }) where !key.hasPrefix(appPrefix) {
            if let bracket = key.firstIndex(of: "["), keyedLists.contains(where: { $0.0 == key[..<bracket] }) {
                lists[String(key[..<bracket]), default: []].append(value)
            } else if let dot = key.firstIndex(of: "."), case .object(var days)? = object[String(key[..<dot])] {
                days[String(key[key.index(after: dot)...])] = value
                object[String(key[..<dot])] = .object(days)
            } else {
                object[key] = value
            }
        }
        for (list, entries) in lists { object[list] = .array(entries) }
        var apps: [JSONValue] = []
        var placed = Set<String>()
        let present = fields.keys.filter { $0.hasPrefix(appPrefix) }.map { String($0.dropFirst(appPrefix.count)) }
        for app in appOrder + present.sorted() where placed.insert(app).inserted {
            if let rule = fields[appPrefix + app] { apps.append(rule) }
        }
        object["apps"] = .array(apps)
        return .object(object)
    }
}
