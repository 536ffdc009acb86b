import CurfewCore

/// The agent's replies as the indicator reads them, from `JSONValue` (Core's own parser): the
/// indicator runs in every session all day, and Foundation's JSONDecoder would keep megabytes of its
/// code resident for a few lines a minute.
struct WatchReply {
    var ok: Bool
    var error: String?
    var message: String?
    var status: StatusReport?
    var requestID: Int64?
    var extended: SelfExtensionUse?

    init?(_ line: String) {
        guard case .object(let object)? = try? JSONValue.parse(line), case .bool(let ok)? = object["ok"] else { return nil }
        self.ok = ok
        error = object["error"].flatMap(Self.string)
        message = object["message"].flatMap(Self.string)
        status = object["status"].flatMap(Self.status)
        if case .object(let request)? = object["request"], case .int(let id)? = request["id"] { requestID = id }
        if case .object(let use)? = object["extension"], let minutes = Self.int(use["minutes"]), let used = Self.int(use["used"]),
            let perWeek = Self.int(use["perWeek"])
        {
            extended = SelfExtensionUse(
                minutes: minutes, date: use["date"].flatMap(Self.string) ?? "", used: used, perWeek: perWeek,
                limitMinutes: Self.int(use["limitMinutes"]))
        }
    }

    static func string(_ value: JSONValue) -> String? { if case .string(let text) = value { text } else { nil } }
    static func int(_ value: JSONValue?) -> Int? { if case .int(let number)? = value { Int(clamping: number) } else { nil } }
    static func int64(_ value: JSONValue?) -> Int64? { if case .int(let number)? = value { number } else { nil } }

    /// `UserStatus.json` read back; nil when a field the indicator needs is missing.
    static func status(_ value: JSONValue) -> StatusReport? {
        guard case .object(let object) = value, let user = object["user"].flatMap(string), let date = object["date"].flatMap(string),
            let state = object["state"].flatMap(string)
        else { return nil }
        func change(_ value: JSONValue?) -> StatusReport.Change? {
            guard case .object(let entry)? = value, let at = entry["at"].flatMap(string), let state = entry["state"].flatMap(string) else {
                return nil
            }
            return StatusReport.Change(at: at, state: state)
        }
        var rules: [StatusReport.Rule] = []
        if case .array(let entries)? = object["rules"] {
            for case .object(let entry) in entries {
                guard let app = entry["app"].flatMap(string), let rule = entry["rule"].flatMap(string) else { continue }
                rules.append(StatusReport.Rule(app: app, rule: rule, limitMinutes: int(entry["limitMinutes"]), seconds: int64(entry["seconds"]) ?? 0))
            }
        }
        var blocked: [StatusReport.Window] = []
        if case .array(let entries)? = object["blocked"] {
            for case .object(let entry) in entries {
                guard let start = entry["start"].flatMap(string), let end = entry["end"].flatMap(string),
                    let state = entry["state"].flatMap(string)
                else { continue }
                blocked.append(StatusReport.Window(start: start, end: end, state: state, window: entry["window"].flatMap(string)))
            }
        }
        var allowance: StatusReport.Allowance? = nil
        if case .object(let entry)? = object["selfExtension"], let minutes = int(entry["minutes"]), let perWeek = int(entry["perWeek"]) {
            allowance = StatusReport.Allowance(minutes: minutes, perWeek: perWeek)
        }
        return StatusReport(
            user: user, date: date, timezone: object["timezone"].flatMap(string) ?? "", screenSeconds: int64(object["screenSeconds"]) ?? 0,
            otherComputersSeconds: int64(object["otherComputersSeconds"]), limitMinutes: int(object["limitMinutes"]),
            extraMinutes: int(object["extraMinutes"]) ?? 0, bedtimeDelayMinutes: int(object["bedtimeDelayMinutes"]) ?? 0,
            remainingSeconds: int64(object["remainingSeconds"]), state: state, reason: object["reason"].flatMap(string),
            nextChange: change(object["nextChange"]), allowedAgainAt: object["allowedAgainAt"].flatMap(string),
            counting: { if case .bool(let flag)? = object["counting"] { flag } else { nil } }(), apps: [], rules: rules, blocked: blocked,
            selfExtension: allowance)
    }
}
