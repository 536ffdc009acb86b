/// One computer's usage of one user on one local day, as it travels to the family's other computers:
/// `<shared-dir>/usage/<machine-id>/<user>/<YYYY-MM-DD>.json`, rewritten while the day goes on.
///
/// On disk it is the canonical JSON of `signedPayload` plus a `signature` field: an Ed25519 signature
/// (base64) by the machine's own key over `UsageSummaryFormat.signingDomain` followed by the canonical
/// bytes of the payload, so neither a record's nor a confirmation's signature passes for it.
/// `buckets` holds the same figures as the agent's own `usage` table: milliseconds per local hour and
/// app (`""` is screen time), so reports over every computer can be cut by day, app or hour.
public struct UsageSummary: Sendable, Equatable {
    public struct Bucket: Sendable, Equatable, Hashable, Comparable {
        public var hour: Int
        public var app: String
        public var milliseconds: Int64

        public init(hour: Int, app: String, milliseconds: Int64) {
            self.hour = hour
            self.app = app
            self.milliseconds = milliseconds
        }

        public static func < (a: Bucket, b: Bucket) -> Bool { (a.hour, a.app) < (b.hour, b.app) }
    }

    public var machine: String
    public var host: String
    /// Key id of the machine key that signs.
    public var key: String
    public var user: String
    public var day: LocalDate
    /// Sorted by hour, then app; one bucket per (hour, app).
    public var buckets: [Bucket]
    /// When it was written, seconds since the epoch (UTC in the file).
    public var time: Int64

    public init(machine: String, host: String, key: String, user: String, day: LocalDate, buckets: [Bucket], time: Int64) {
        self.machine = machine
        self.host = host
        self.key = key
        self.user = user
        self.day = day
        self.buckets = buckets.sorted()
        self.time = time
    }

    /// Builds the summary that is written, from this computer's figures: each app name as
    /// `UsageSummaryFormat.appName` gives it, so every reader accepts it; buckets whose names become
    /// the same are added up (within the reader's limit), and empty ones are left out.
    public init(
        machine: String, host: String, key: String, user: String, day: LocalDate, writing buckets: [Bucket], time: Int64
    ) {
        func merge(_ buckets: [Bucket]) -> [Bucket] {
            var merged: [Bucket: Int64] = [:]
            for bucket in buckets where bucket.milliseconds > 0 {
                let key = Bucket(hour: bucket.hour, app: UsageSummaryFormat.appName(bucket.app), milliseconds: 0)
                merged[key] = min(merged[key, default: 0] + bucket.milliseconds, UsageSummaryFormat.maxBucketMilliseconds)
            }
            return merged.map { Bucket(hour: $0.key.hour, app: $0.key.app, milliseconds: $0.value) }
        }
        var kept = merge(buckets)
        // A child who runs hundreds of differently named programs must not push the summary past
        // what readers accept: the least used app buckets are folded into one per hour.
        let apps = kept.filter { $0.app != UsageKey.screen }
        if apps.count > UsageSummaryFormat.maxNamedAppBuckets {
            let ranked = apps.sorted { ($0.milliseconds, $1) > ($1.milliseconds, $0) }
            let folded = ranked.dropFirst(UsageSummaryFormat.maxNamedAppBuckets).map {
                Bucket(hour: $0.hour, app: UsageSummaryFormat.otherApps, milliseconds: $0.milliseconds)
            }
            kept = merge(kept.filter { $0.app == UsageKey.screen } + ranked.prefix(UsageSummaryFormat.maxNamedAppBuckets) + folded)
        }
        self.init(machine: machine, host: host, key: key, user: user, day: day, buckets: kept, time: time)
    }

    /// Builds the buckets from per-(hour, app) totals, leaving out empty ones.
    public init(
        machine: String, host: String, key: String, user: String, day: LocalDate, totals: [UsageKey: Int64], time: Int64
    ) {
        let buckets = totals.compactMap { key, milliseconds in
            key.user == user && key.day == day && milliseconds > 0
                ? Bucket(hour: key.hour, app: key.app, milliseconds: milliseconds) : nil
        }
        self.init(machine: machine, host: host, key: key, user: user, day: day, buckets: buckets, time: time)
    }

    /// Whether this summary takes the place of `kept`, an earlier-read one of the same computer, user
    /// and day: it is newer, or holds more screen time (usage only grows within a day, so an older copy
    /// put back never wins). `RemoteUsageTable.keep` applies the same rule in SQL.
    public func replaces(_ kept: UsageSummary) -> Bool {
        time > kept.time || screenMilliseconds > kept.screenMilliseconds
    }

    /// Screen time of the day.
    public var screenMilliseconds: Int64 {
        buckets.reduce(0) { $0 + ($1.app == UsageKey.screen ? $1.milliseconds : 0) }
    }

    /// The day's totals by app (`""` = screen time).
    public var totals: [String: Int64] {
        buckets.reduce(into: [:]) { $0[$1.app, default: 0] += $1.milliseconds }
    }

    /// Everything the signature covers.
    public var signedPayload: JSONValue {
        .object(
            JSONObject([
                ("format", .int(Int64(UsageSummaryFormat.version))),
                ("kind", .string(UsageSummaryFormat.kind)),
                ("machine", .string(machine)),
                ("host", .string(host)),
                ("key", .string(key)),
                ("user", .string(user)),
                ("day", .string("\(day)")),
                ("screenMilliseconds", .int(screenMilliseconds)),
                (
                    "buckets",
                    .array(buckets.map { .array([.int(Int64($0.hour)), .string($0.app), .int($0.milliseconds)]) })
                ),
                ("time", .string(utcTimestamp(time))),
            ]))
    }



    static let fields = [
        "format", "kind", "machine", "host", "key", "user", "day", "screenMilliseconds", "buckets", "time", "signature",
    ]

    /// Reads a usage summary strictly: canonical JSON, known fields, format 1, every bucket an hour
    /// 0...23, an app name and at most two hours of milliseconds (a repeated DST hour), one bucket per
    /// (hour, app) in order, and `screenMilliseconds` equal to the sum of the screen buckets.
    public static func parse(_ bytes: [UInt8]) throws(RecordError) -> (summary: UsageSummary, signature: String) {
        let object = try StrictDocument.parse(
            bytes, noun: "usage summary", fieldPrefix: "usage", maxBytes: UsageSummaryFormat.maxBytes,
            version: UsageSummaryFormat.version, kind: UsageSummaryFormat.kind, fields: fields)
        guard case .string(let machine)? = object["machine"], MachineID.isValid(machine) else {
            throw RecordError("usage field \"machine\" must be a machine id")
        }
        guard case .string(let host)? = object["host"], !host.isEmpty, host.utf8.count <= 255 else {
            throw RecordError("usage field \"host\" must be a host name")
        }
        guard case .string(let key)? = object["key"], KeyID.isValid(key) else {
            throw RecordError("usage field \"key\" must be a key id (16 hex digits)")
        }
        guard case .string(let user)? = object["user"], (try? Policy.validateUserName(user)) != nil else {
            throw RecordError("usage field \"user\" must be a user name")
        }
        guard case .string(let dayText)? = object["day"], let day = try? LocalDate.parse(dayText) else {
            throw RecordError("usage field \"day\" must be a date like 2026-01-31")
        }
        guard case .array(let entries)? = object["buckets"] else { throw RecordError("usage field \"buckets\" must be a list") }
        var buckets: [Bucket] = []
        for entry in entries {
            guard case .array(let parts) = entry, parts.count == 3, case .int(let hour) = parts[0], (0...23).contains(hour),
                case .string(let app) = parts[1], UsageSummaryFormat.accepts(app: app),
                case .int(let milliseconds) = parts[2], (1...UsageSummaryFormat.maxBucketMilliseconds).contains(milliseconds)
            else {
                throw RecordError(
                    "usage buckets must be [hour 0-23, app, milliseconds 1-\(UsageSummaryFormat.maxBucketMilliseconds)]")
            }
            let bucket = Bucket(hour: Int(hour), app: app, milliseconds: milliseconds)
            if let previous = buckets.last, !(previous < bucket) {
                throw RecordError("usage buckets must be sorted by hour and app, each once")
            }
            buckets.append(bucket)
        }
        guard case .string(let timeText)? = object["time"], let time = parseUTCTimestamp(timeText) else {
            throw RecordError("usage field \"time\" must be a UTC time like 2026-01-31T20:00:00Z")
        }
        guard case .string(let signature)? = object["signature"] else {
            throw RecordError("usage field \"signature\" must be a string")
        }
        let summary = UsageSummary(machine: machine, host: host, key: key, user: user, day: day, buckets: buckets, time: time)
        guard case .int(let screen)? = object["screenMilliseconds"], screen == summary.screenMilliseconds else {
            throw RecordError("usage field \"screenMilliseconds\" must equal the sum of the screen-time buckets")
        }
        return (summary, signature)
    }
}

public enum UsageSummaryFormat {
    public static let version = 1
    public static let kind = "usage"
    public static let signingDomain = "curfew-usage-v1\n"
    public static let maxBytes = 256 * 1024
    /// An hour's bucket holds at most two hours: the repeated hour when daylight saving time ends.
    public static let maxBucketMilliseconds: Int64 = 2 * 3_600_000
    /// App buckets a writer names one by one; the rest go to `otherApps` (one bucket per hour).
    /// With names of at most 255 bytes (510 once JSON-escaped), 24 screen buckets and 24 folded
    /// ones, a summary stays well under `maxBytes`.
    public static let maxNamedAppBuckets = 352
    public static let otherApps = "(other apps)"
    /// The longest app name a summary holds, in UTF-8 bytes (a file name's limit on Linux).
    public static let maxAppBytes = 255

    /// The rule every reader applies to a bucket's app name: at most 255 UTF-8 bytes and no C0
    /// control character. A summary with one name that breaks it is refused whole.
    public static func accepts(app name: String) -> Bool {
        name.utf8.count <= maxAppBytes && !name.unicodeScalars.contains(where: { $0.value < 0x20 })
    }

    /// The name a writer puts in a summary for an app of this computer: the name itself when
    /// `accepts(app:)`, else its escaped form (`UntrustedText.terminal`, so `\x1b` for ESC) cut to
    /// 255 bytes, which always passes. A program's file name can hold any byte but `/` and NUL; it
    /// must never make the whole summary unreadable on the family's other computers.
    public static func appName(_ name: String) -> String {
        accepts(app: name) ? name : UntrustedText.terminal(name).prefix(utf8Bytes: maxAppBytes)
    }
}

extension UsageSummary: SignedDocument {
    public static var signingDomain: String { UsageSummaryFormat.signingDomain }
}
