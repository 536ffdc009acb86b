import CurfewCore
import GRDB

/// The `record_index` table: record files already checked, so folding 10,000 records does not verify
/// 10,000 signatures on every command.
public enum RecordIndex {
    public static func all(_ db: Database) throws -> [String: IndexedRecord] {
        var result: [String: IndexedRecord] = [:]
        let rows = try Row.fetchCursor(
            db,
            sql: """
                SELECT name, device, inode, size, mtime_ns, ctime_ns, verdict, reason, user, version,
                       base_version, author, time, removes_user, kind, date, extra_minutes,
                       bedtime_delay_minutes, request_id, may_be_incomplete, grant_app, grant_app_minutes,
                       grant_downtime_window, grant_downtime_delay_minutes, grant_ends_break
                FROM record_index
                """)
        while let row = try rows.next() {
            let name: String = row["name"]
            let identity = FileIdentity(device: row["device"], inode: row["inode"], size: row["size"], mtimeNanoseconds: row["mtime_ns"], ctimeNanoseconds: row["ctime_ns"])
            let verdict: IndexedRecord.Verdict
            let kind: String? = row["kind"]
            if (row["verdict"] as String) == "valid", kind == RecordFormat.grantKind, let user: String = row["user"],
                let author: String = row["author"], let time: Int64 = row["time"], let dateText: String = row["date"],
                let date = try? LocalDate.parse(dateText), let extra: Int = row["extra_minutes"], let delay: Int = row["bedtime_delay_minutes"]
            {
                verdict = .validGrant(
                    GrantSummary(
                        id: name, user: user, date: date, extraMinutes: extra, bedtimeDelayMinutes: delay, author: author,
                        time: time, requestId: row["request_id"], lift: lift(row)))
            } else if (row["verdict"] as String) == "valid", kind != RecordFormat.grantKind, let user: String = row["user"], let version: Int = row["version"],
                let base: Int = row["base_version"], let author: String = row["author"], let time: Int64 = row["time"],
                let removes: Bool = row["removes_user"]
            {
                verdict = .valid(
                    RecordSummary(
                        id: name, user: user, version: version, baseVersion: base, author: author, time: time,
                        removesUser: removes))
            } else {
                // Refused, but perhaps still being written: a young file is looked at again.
                let cause: RejectionCause = (row["may_be_incomplete"] as Bool) ? .mayBeIncomplete : .invalid
                verdict = .invalid(reason: row["reason"] ?? "invalid record", cause: cause)
            }
            result[name] = IndexedRecord(name: name, identity: identity, verdict: verdict)
        }
        return result
    }

    public static func save(_ entries: [IndexedRecord], _ db: Database) throws {
        let statement = try db.cachedStatement(
            sql: """
                INSERT OR REPLACE INTO record_index
                    (name, device, inode, size, mtime_ns, ctime_ns, verdict, reason, user, version,
                     base_version, author, time, removes_user, kind, date, extra_minutes,
                     bedtime_delay_minutes, request_id, may_be_incomplete, grant_app, grant_app_minutes,
                     grant_downtime_window, grant_downtime_delay_minutes, grant_ends_break)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for entry in entries {
            let identity = entry.identity
            var arguments: StatementArguments = [
                entry.name, identity.device, identity.inode, identity.size, identity.mtimeNanoseconds,
                identity.ctimeNanoseconds,
            ]
            switch entry.verdict {
            case .valid(let summary):
                arguments += [
                    "valid", nil, summary.user, summary.version, summary.baseVersion, summary.author, summary.time,
                    summary.removesUser, RecordFormat.policyKind, nil, nil, nil, nil,
                ]
            case .validGrant(let grant):
                arguments += [
                    "valid", nil, grant.user, nil, nil, grant.author, grant.time, nil, RecordFormat.grantKind,
                    "\(grant.date)", grant.extraMinutes, grant.bedtimeDelayMinutes, grant.requestId,
                ]
            case .invalid(let reason, _):
                arguments += ["invalid", reason, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil]
            }
            if case .invalid(_, .mayBeIncomplete) = entry.verdict { arguments += [true] } else { arguments += [false] }
            if case .validGrant(let grant) = entry.verdict {
                arguments += [
                    grant.lift.app?.app, grant.lift.app?.minutes, grant.lift.downtime?.window, grant.lift.downtime?.delayMinutes,
                    grant.lift.endsBreak,
                ]
            } else {
                arguments += [nil, nil, nil, nil, false]
            }
            try statement.execute(arguments: arguments)
        }
    }

    /// What a grant's row says it lifts besides screen time and bedtime.
    static func lift(_ row: Row) -> GrantLift {
        var lift = GrantLift(endsBreak: row["grant_ends_break"])
        if let app: String = row["grant_app"], let minutes: Int = row["grant_app_minutes"] {
            lift.app = GrantLift.App(app: app, minutes: minutes)
        }
        if let window: String = row["grant_downtime_window"], let minutes: Int = row["grant_downtime_delay_minutes"] {
            lift.downtime = GrantLift.Window(window: window, delayMinutes: minutes)
        }
        return lift
    }

    /// Forgets files that are no longer in the directory.
    public static func remove(names: [String], _ db: Database) throws {
        let statement = try db.cachedStatement(sql: "DELETE FROM record_index WHERE name = ?")
        for name in names { try statement.execute(arguments: [name]) }
    }
}
