import CurfewCore

/// Usage summaries in the shared directory: `usage/<machine-id>/<user>/<YYYY-MM-DD>.json`, each
/// written by that computer's agent and signed with its machine key (`UsageSummary`).
extension SharedDirectory {
    public var usagePath: String { "\(path)/usage" }

    public func usageDirectory(machine: String, user: String) -> String { "\(usagePath)/\(machine)/\(user)" }

    /// Signs `summary` as this computer and writes it in place of the previous one of that day.
    public func publish(_ summary: UsageSummary, as identity: MachineIdentity) throws {
        let bytes = try identity.key.signedFile(summary)
        try write(bytes, into: ["usage", identity.id, summary.user], name: "\(summary.day).json")
    }

    /// One computer's summary of one day, or why it cannot be believed.
    public struct UsageReading: Sendable, Equatable {
        public var machine: String
        public var day: LocalDate
        public var summary: UsageSummary?
        public var problem: String?
    }

    /// Every computer's summaries of `user` for the days from `from` through `to`, each checked: strict
    /// format, the computer, user and day of its path, and the signature of that computer's enrolled
    /// key (`MachineRoster`: a computer no parent enrolled counts for nothing). `excluding` leaves out
    /// one computer (this one: its own figures are in its database).
    public func usageReadings(
        user: String, from: LocalDate, through to: LocalDate, excluding: String? = nil, roster: MachineRoster? = nil
    ) -> [UsageReading] {
        guard let machines = try? Files.list(usagePath) else { return [] }
        let roster = roster ?? self.roster(only: Set(machines.filter { MachineID.isValid($0) && $0 != excluding }))
        var readings: [UsageReading] = []
        for machine in machines.sorted() where MachineID.isValid(machine) && machine != excluding {
            let directory = usageDirectory(machine: machine, user: user)
            guard let names = try? Files.list(directory) else { continue }
            var key: Result<PublicKey, RecordError>?
            for name in names.sorted() where name.utf8.count == 15 && name.hasSuffix(".json") {
                guard let day = try? LocalDate.parse(String(name.dropLast(5))), day >= from, day <= to else { continue }
                if key == nil { key = roster.key(of: machine) }
                var reading = UsageReading(machine: machine, day: day)
                switch Self.readUsage(path: "\(directory)/\(name)", machine: machine, user: user, day: day, key: key!) {
                case .success(let summary): reading.summary = summary
                case .failure(let error): reading.problem = error.reason
                }
                readings.append(reading)
            }
        }
        return readings
    }

    static func readUsage(path: String, machine: String, user: String, day: LocalDate, key: Result<PublicKey, RecordError>)
        -> Result<UsageSummary, RecordError>
    {
        let bytes: [UInt8]
        do { bytes = try Files.readRegularFile(path, maxBytes: UsageSummaryFormat.maxBytes) } catch {
            return .failure(RecordError(error.description))
        }
        let summary: UsageSummary
        let signature: String
        do { (summary, signature) = try UsageSummary.parse(bytes) } catch { return .failure(error) }
        guard summary.machine == machine, summary.user == user, summary.day == day else {
            return .failure(RecordError("usage summary names another machine, user or day than its path"))
        }
        let publicKey: PublicKey
        switch key {
        case .success(let value): publicKey = value
        case .failure(let error): return .failure(error)
        }
        guard publicKey.id == summary.key, publicKey.verifies(signature, of: summary) else {
            return .failure(RecordError("signature does not verify with the key of machine \(machine)"))
        }
        return .success(summary)
    }
}
