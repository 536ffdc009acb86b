/// The policy that was in force on each past day, from a user's signed records and their times: what
/// a report judges each day by (a limit changed last week must not make last month's days look over
/// or under it).
public enum PolicyHistory {
    /// The policy in force at the end of each local day from `from` through `to` in `zone`: the fold
    /// (`PolicyMerge`) of the records made before that day ended. A day after the user was removed keeps
    /// the last policy they had (their history is still reported). Days before the first record are
    /// absent (no record says what was in force then; a report takes the policy in force now).
    public static func policies(
        records: [PolicyMerge.Input], zone: ZoneRules, from: LocalDate, to: LocalDate
    ) -> [LocalDate: Policy] {
        guard !records.isEmpty, from <= to else { return [:] }
        let sorted = records.sorted { ($0.record.time, $0.id) < ($1.record.time, $1.id) }
        // Each distinct prefix is folded once; a prefix whose fold removes the user keeps the last
        // policy before it.
        var folds: [Int: Policy?] = [:]
        func policy(prefix: Int) -> Policy? {
            if let known = folds[prefix] { return known }
            var result: Policy? = nil
            var length = prefix
            while length > 0 {
                if let policy = PolicyMerge.fold(Array(sorted.prefix(length))).policy {
                    result = policy
                    break
                }
                // Removed: the last record made them unmanaged; the one before tells what they had.
                length -= 1
            }
            folds[prefix] = result
            return result
        }
        var result: [LocalDate: Policy] = [:]
        var index = 0
        var day = from
        while day <= to {
            let end = zone.start(of: day.adding(days: 1))
            while index < sorted.count && Instant(seconds: sorted[index].record.time) < end { index += 1 }
            if index > 0, let policy = policy(prefix: index) { result[day] = policy }
            day = day.adding(days: 1)
        }
        return result
    }
}
