/// Extra time a parent gave one user for one local day, as it travels through the shared directory.
///
/// Same file format as a `PolicyRecord` (format 1, canonical JSON, the same signing domain, named by
/// the SHA-256 of its bytes) with `"kind": "grant"`. The nonce makes two otherwise identical grants
/// made in the same second two files, so both count.
public struct GrantRecord: Sendable, Equatable {
    public var user: String
    /// The local day (in the policy's zone) the grant applies to.
    public var date: LocalDate
    /// Added to that day's limit.
    public var extraMinutes: Int
    /// Moves the start of the bedtime that begins on that day.
    public var bedtimeDelayMinutes: Int
    /// Key id of the parent key that signed it.
    public var author: String
    /// When it was made, seconds since the epoch (UTC in the file).
    public var time: Int64
    /// 32 lowercase hex digits of randomness, chosen by the author.
    public var nonce: String
    /// The child's request this grant answers, if any.
    public var requestId: Int64?
    /// What else it lifts: an app's limit, a downtime window, a break. Written to the file
    /// only when set, so a grant without them has the bytes it always had, and an agent that does not
    /// know these fields rejects a grant that uses them, naming the field.
    public var lift: GrantLift

    public static let maxMinutes = 480

    public init(
        user: String, date: LocalDate, extraMinutes: Int, bedtimeDelayMinutes: Int, author: String, time: Int64,
        nonce: String, requestId: Int64? = nil, lift: GrantLift = GrantLift()
    ) {
        self.user = user
        self.date = date
        self.extraMinutes = extraMinutes
        self.bedtimeDelayMinutes = bedtimeDelayMinutes
        self.author = author
        self.time = time
        self.nonce = nonce
        self.requestId = requestId
        self.lift = lift
    }

    /// Checks the amounts: each 0...480 minutes, and at least one of them more than 0.
    public static func validate(extraMinutes: Int, bedtimeDelayMinutes: Int) throws(PolicyError) {
        let extraLower = bedtimeDelayMinutes == 0 ? 1 : 0
        guard (extraLower...maxMinutes).contains(extraMinutes) else {
            throw PolicyError("extra time must be between \(extraLower) and \(maxMinutes) minutes, got \(extraMinutes)")
        }
        let delayLower = extraMinutes == 0 ? 1 : 0
        guard (delayLower...maxMinutes).contains(bedtimeDelayMinutes) else {
            throw PolicyError(
                "bedtime delay must be between \(delayLower) and \(maxMinutes) minutes, got \(bedtimeDelayMinutes)")
        }
    }

    /// Checks the amounts of a grant that may also lift an app's limit, a downtime window or a
    /// break: each amount 0...480 minutes, and something granted.
    public static func validate(extraMinutes: Int, bedtimeDelayMinutes: Int, lift: GrantLift) throws(PolicyError) {
        guard !lift.isEmpty else {
            try validate(extraMinutes: extraMinutes, bedtimeDelayMinutes: bedtimeDelayMinutes)
            return
        }
        guard (0...maxMinutes).contains(extraMinutes) else {
            throw PolicyError("extra time must be between 0 and \(maxMinutes) minutes, got \(extraMinutes)")
        }
        guard (0...maxMinutes).contains(bedtimeDelayMinutes) else {
            throw PolicyError("bedtime delay must be between 0 and \(maxMinutes) minutes, got \(bedtimeDelayMinutes)")
        }
        try lift.validate()
    }

    /// A nonce is 32 lowercase hex digits (16 random bytes).
    public static func isValidNonce(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// Every rule a grant must follow before it is signed.
    public func validate() throws(PolicyError) {
        try Policy.validateUserName(user)
        try GrantRecord.validate(extraMinutes: extraMinutes, bedtimeDelayMinutes: bedtimeDelayMinutes, lift: lift)
        guard KeyID.isValid(author) else { throw PolicyError("author must be a key id (16 hex digits), got \(quoted(author))") }
        guard GrantRecord.isValidNonce(nonce) else {
            throw PolicyError("nonce must be 32 lowercase hex digits, got \(quoted(nonce))")
        }
        if let requestId, requestId < 1 { throw PolicyError("request id must be a positive whole number, got \(requestId)") }
    }

    /// Everything the signature covers.
    public var signedPayload: JSONValue {
        .object(
            JSONObject([
                ("format", .int(Int64(RecordFormat.version))),
                ("kind", .string(RecordFormat.grantKind)),
                ("user", .string(user)),
                ("date", .string("\(date)")),
                ("extraMinutes", .int(Int64(extraMinutes))),
                ("bedtimeDelayMinutes", .int(Int64(bedtimeDelayMinutes))),
                ("author", .string(author)),
                ("time", .string(utcTimestamp(time))),
                ("nonce", .string(nonce)),
                ("requestId", requestId.map { .int($0) } ?? .null),
            ] + lift.fields))
    }



    static let fields = [
        "format", "kind", "user", "date", "extraMinutes", "bedtimeDelayMinutes", "author", "time", "nonce", "requestId",
        "signature",
    ] + GrantLift.fieldNames

    /// Reads a grant file strictly: canonical JSON only, known fields only, format 1, kind grant,
    /// amounts within the rules.
    public static func parse(_ bytes: [UInt8]) throws(RecordError) -> (record: GrantRecord, signature: String) {
        let object = try RecordFormat.parseEnvelope(bytes)
        return try parse(object: object, bytes: bytes)
    }

    static func parse(object: JSONObject, bytes: [UInt8]) throws(RecordError) -> (record: GrantRecord, signature: String) {
        guard case .string(let kind)? = object["kind"], kind == RecordFormat.grantKind else {
            throw RecordError("record field \"kind\" must be \"\(RecordFormat.grantKind)\"")
        }
        for key in object.keys where !fields.contains(key) {
            throw RecordError("unknown record field \(quoted(key))")
        }
        guard JSONValue.object(object).canonicalBytes == bytes else { throw RecordError("record is not in canonical form") }
        guard case .string(let user)? = object["user"] else { throw RecordError("record field \"user\" must be a string") }
        do { try Policy.validateUserName(user) } catch { throw RecordError(error.message) }
        guard case .string(let dateText)? = object["date"], let date = try? LocalDate.parse(dateText),
            "\(date)" == dateText
        else {
            throw RecordError("record field \"date\" must be a date like 2026-01-31")
        }
        guard case .int(let extra)? = object["extraMinutes"], case .int(let delay)? = object["bedtimeDelayMinutes"] else {
            throw RecordError("record fields \"extraMinutes\" and \"bedtimeDelayMinutes\" must be whole numbers")
        }
        let lift = try GrantLift.parse(object)
        do {
            try validate(extraMinutes: Int(extra), bedtimeDelayMinutes: Int(delay), lift: lift)
        } catch { throw RecordError(error.message) }
        guard case .string(let author)? = object["author"], KeyID.isValid(author) else {
            throw RecordError("record field \"author\" must be a key id (16 hex digits)")
        }
        guard case .string(let timeText)? = object["time"], let time = parseUTCTimestamp(timeText) else {
            throw RecordError("record field \"time\" must be a UTC time like 2026-01-31T20:00:00Z")
        }
        guard case .string(let nonce)? = object["nonce"], isValidNonce(nonce) else {
            throw RecordError("record field \"nonce\" must be 32 lowercase hex digits")
        }
        let requestId: Int64?
        switch object["requestId"] {
        case .null?: requestId = nil
        case .int(let id)? where id >= 1: requestId = id
        default: throw RecordError("record field \"requestId\" must be a positive whole number or null")
        }
        guard case .string(let signature)? = object["signature"] else {
            throw RecordError("record field \"signature\" must be a string")
        }
        let record = GrantRecord(
            user: user, date: date, extraMinutes: Int(extra), bedtimeDelayMinutes: Int(delay), author: author, time: time,
            nonce: nonce, requestId: requestId, lift: lift)
        return (record, signature)
    }
}

/// A record file of either kind, as read before its signature is checked.
public enum SignedRecord: Sendable, Equatable {
    case policy(PolicyRecord)
    case grant(GrantRecord)

    public var user: String {
        switch self {
        case .policy(let record): record.user
        case .grant(let record): record.user
        }
    }

    public var author: String {
        switch self {
        case .policy(let record): record.author
        case .grant(let record): record.author
        }
    }

    public var signingBytes: [UInt8] {
        switch self {
        case .policy(let record): record.signingBytes
        case .grant(let record): record.signingBytes
        }
    }

    /// Reads a record file of any kind strictly; the `kind` field decides which.
    public static func parse(_ bytes: [UInt8]) throws(RecordError) -> (record: SignedRecord, signature: String) {
        let object = try RecordFormat.parseEnvelope(bytes)
        switch object["kind"] {
        case .string(RecordFormat.grantKind)?:
            let (grant, signature) = try GrantRecord.parse(object: object, bytes: bytes)
            return (.grant(grant), signature)
        case .string(RecordFormat.policyKind)?:
            let parsed = try PolicyRecord.parse(envelope: object, bytes: bytes)
            return (.policy(parsed.record), parsed.signature)
        default:
            throw RecordError(
                "record field \"kind\" must be \"\(RecordFormat.policyKind)\" or \"\(RecordFormat.grantKind)\"")
        }
    }
}

extension RecordFormat {
    public static let grantKind = "grant"

    /// The checks every record file passes first: size, JSON, an object, a supported format.
    static func parseEnvelope(_ bytes: [UInt8]) throws(RecordError) -> JSONObject {
        guard bytes.count <= maxBytes else { throw RecordError("record is larger than \(maxBytes) bytes") }
        let value: JSONValue
        do { value = try JSONValue.parse(bytes) } catch { throw RecordError.notJSON(error) }
        guard case .object(let object) = value else { throw RecordError("a record must be a JSON object") }
        guard case .int(let format)? = object["format"] else { throw RecordError("record field \"format\" is missing") }
        guard format == version else {
            throw RecordError("record format \(format) is not supported (this version reads format \(version))")
        }
        return object
    }
}

/// What is known of a verified grant; enough to add it up without reading the file again.
public struct GrantSummary: Sendable, Equatable {
    /// The file name: SHA-256 of the file's bytes, hex, plus `.json`.
    public var id: String
    public var user: String
    public var date: LocalDate
    public var extraMinutes: Int
    public var bedtimeDelayMinutes: Int
    public var author: String
    public var time: Int64
    public var requestId: Int64?
    public var lift: GrantLift

    public init(id: String, record: GrantRecord) {
        self.init(
            id: id, user: record.user, date: record.date, extraMinutes: record.extraMinutes,
            bedtimeDelayMinutes: record.bedtimeDelayMinutes, author: record.author, time: record.time,
            requestId: record.requestId, lift: record.lift)
    }

    public init(
        id: String, user: String, date: LocalDate, extraMinutes: Int, bedtimeDelayMinutes: Int, author: String,
        time: Int64, requestId: Int64?, lift: GrantLift = GrantLift()
    ) {
        self.lift = lift
        self.id = id
        self.user = user
        self.date = date
        self.extraMinutes = extraMinutes
        self.bedtimeDelayMinutes = bedtimeDelayMinutes
        self.author = author
        self.time = time
        self.requestId = requestId
    }
}

public enum GrantFold {
    /// Every grant added up per user and day: grants are additive, none replaces another.
    public static func adjustments(_ grants: [GrantSummary]) -> [String: [LocalDate: DayAdjustment]] {
        var result: [String: [LocalDate: DayAdjustment]] = [:]
        for grant in grants {
            var adjustment = result[grant.user, default: [:]][grant.date, default: DayAdjustment()]
            adjustment.extraMinutes += grant.extraMinutes
            adjustment.bedtimeDelayMinutes += grant.bedtimeDelayMinutes
            if let app = grant.lift.app { adjustment.appExtraMinutes[app.app, default: 0] += app.minutes }
            if let window = grant.lift.downtime {
                adjustment.downtimeDelayMinutes[window.window, default: 0] += window.delayMinutes
            }
            result[grant.user, default: [:]][grant.date] = adjustment
        }
        return result
    }
}

extension GrantRecord: SignedDocument {
    public static var signingDomain: String { RecordFormat.signingDomain }
}

/// What a grant lifts besides screen time and bedtime: more time for one app, the start of one
/// downtime window moved later that day, or the break in force ended.
public struct GrantLift: Sendable, Equatable {
    public struct App: Sendable, Equatable {
        public var app: String
        public var minutes: Int
        public init(app: String, minutes: Int) {
            self.app = app
            self.minutes = minutes
        }
    }

    public struct Window: Sendable, Equatable {
        public var window: String
        public var delayMinutes: Int
        public init(window: String, delayMinutes: Int) {
            self.window = window
            self.delayMinutes = delayMinutes
        }
    }

    /// Added to the app's own limit that day: `"app": "minecraft", "appMinutes": 30`.
    public var app: App?
    /// Moves the start of the window that begins that day: `"downtimeWindow": "school", "downtimeDelayMinutes": 30`.
    public var downtime: Window?
    /// Ends the break in force when the agent applies it (as if the child had paused for its length):
    /// `"endsBreak": true`.
    public var endsBreak: Bool

    public init(app: App? = nil, downtime: Window? = nil, endsBreak: Bool = false) {
        self.app = app
        self.downtime = downtime
        self.endsBreak = endsBreak
    }

    public var isEmpty: Bool { app == nil && downtime == nil && !endsBreak }

    static let fieldNames = ["app", "appMinutes", "downtimeWindow", "downtimeDelayMinutes", "endsBreak"]

    /// The fields in the file: only those that are set.
    var fields: [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = []
        if let app {
            fields.append(("app", .string(app.app)))
            fields.append(("appMinutes", .int(Int64(app.minutes))))
        }
        if let downtime {
            fields.append(("downtimeWindow", .string(downtime.window)))
            fields.append(("downtimeDelayMinutes", .int(Int64(downtime.delayMinutes))))
        }
        if endsBreak { fields.append(("endsBreak", .bool(true))) }
        return fields
    }

    public func validate() throws(PolicyError) {
        if let app {
            try Policy.validateAppName(app.app)
            guard (1...GrantRecord.maxMinutes).contains(app.minutes) else {
                throw PolicyError("extra time for \(app.app) must be between 1 and \(GrantRecord.maxMinutes) minutes, got \(app.minutes)")
            }
        }
        if let downtime {
            try DowntimeWindow.validateName(downtime.window)
            guard (1...GrantRecord.maxMinutes).contains(downtime.delayMinutes) else {
                throw PolicyError(
                    "downtime delay must be between 1 and \(GrantRecord.maxMinutes) minutes, got \(downtime.delayMinutes)")
            }
        }
    }

    static func parse(_ object: JSONObject) throws(RecordError) -> GrantLift {
        var lift = GrantLift()
        switch (object["app"], object["appMinutes"]) {
        case (nil, nil): break
        case (.string(let app)?, .int(let minutes)?): lift.app = App(app: app, minutes: Int(clamping: minutes))
        default: throw RecordError("record fields \"app\" and \"appMinutes\" must be an app name and a whole number, together")
        }
        switch (object["downtimeWindow"], object["downtimeDelayMinutes"]) {
        case (nil, nil): break
        case (.string(let window)?, .int(let minutes)?):
            lift.downtime = Window(window: window, delayMinutes: Int(clamping: minutes))
        default:
            throw RecordError(
                "record fields \"downtimeWindow\" and \"downtimeDelayMinutes\" must be a window name and a whole number, together")
        }
        switch object["endsBreak"] {
        case nil: break
        // Written only when true: `false` would be a second spelling of the same grant.
        case .bool(true)?: lift.endsBreak = true
        default: throw RecordError("record field \"endsBreak\" must be true when present")
        }
        do { try lift.validate() } catch { throw RecordError(error.message) }
        return lift
    }
}

extension GrantSummary {
    /// What it gives, in words: `30m extra, bedtime 15m later, 30m more of minecraft on 2026-11-20`.
    public var words: String {
        var parts: [String] = []
        if extraMinutes > 0 { parts.append("\(TimeAllowance.format(minutes: extraMinutes)) extra") }
        if bedtimeDelayMinutes > 0 { parts.append("bedtime \(TimeAllowance.format(minutes: bedtimeDelayMinutes)) later") }
        if let app = lift.app { parts.append("\(TimeAllowance.format(minutes: app.minutes)) more of \(app.app)") }
        if let window = lift.downtime {
            parts.append("downtime \(window.window) \(TimeAllowance.format(minutes: window.delayMinutes)) later")
        }
        if lift.endsBreak { parts.append("break ended") }
        return "\(parts.joined(separator: ", ")) on \(date)"
    }
}

extension GrantLift: Encodable {
    /// Its fields, flat, into the object being written (only those set, as in the record): a
    /// grant's event and `curfew grant --json` carry them beside their own.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: JSONKey.self)
        for (name, value) in fields { try container.encode(value, forKey: JSONKey(name)) }
    }
}
