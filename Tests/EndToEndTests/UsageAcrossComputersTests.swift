import CurfewCore
import CurfewLinux
import CurfewSync
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Two agents (own state directories and machine ids) on one shared directory count the same real
/// user; each writes signed usage summaries there, and with `--computers all` each counts the other's.
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: a test account and its processes"))
struct UsageAcrossComputersTests {
    /// Its own account: both agents count every process of it.
    static let account = "curfewshare"

    func start(_ family: SyncConfirmationTests.Family, _ index: Int) throws -> AgentProcess {
        let agent = try AgentProcess(
            family.agents[index].runner,
            arguments: [
                "--shared-dir", family.shared, "--machine-id", family.agents[index].id, "--rescan", "1", "--usage-interval", "1",
            ])
        try family.enrol(index)
        return agent
    }

    func statusOf(_ agent: AgentProcess, _ family: SyncConfirmationTests.Family) throws -> [String: Any] {
        let result = try agent.runner.ok(["status", Self.account, "--json", "--socket", agent.socketPath, "--shared-dir", family.shared])
        return try jsonObject(result.stdout)
    }

    /// Three agents' state directories on one shared directory, and the account managed with `limit`
    /// counted over every computer, no bedtime.
    func setUp(limit: String) throws -> (Accounts.Account, SyncConfirmationTests.Family) {
        let account = try TestAccount.ensure(Self.account)
        let family = try SyncConfirmationTests.Family()
        for arguments in [
            ["user", "add", account.name], ["limit", account.name, limit, "--computers", "all"], ["bedtime", account.name, "off"],
        ] {
            try family.parent.ok(arguments + ["--shared-dir", family.shared, "--no-wait"])
        }
        return (account, family)
    }

    func today() -> LocalDate { ZoneRules.system.localTime(at: Int64(Date().timeIntervalSince1970)).date }

    @Test func eachComputerCountsTheOthersTimeWhenThePolicySaysSo() throws {
        let (account, family) = try setUp(limit: "8h")
        defer { family.cleanUp() }
        let shown = try family.parent.ok(["policy", "show", account.name, "--json", "--shared-dir", family.shared]).stdout
        #expect(shown.contains("\"limitScope\": \"all-computers\""), "\(shown)")
        let a = try start(family, 0)
        let b = try start(family, 1)
        defer {
            a.killHard()
            b.killHard()
        }
        // Without logind, time counts while the user has processes: both agents count this one.
        let child = try spawnLogged(
            "/usr/bin/setpriv", ["--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--", "/usr/bin/tail", "-f", "/dev/null"],
            environment: ["PATH": "/usr/bin:/bin"], log: "/dev/null")
        defer {
            kill(child, SIGKILL)
            _ = waitForExit(child)
        }
        let day = today()
        let summaryOfA = "\(family.shared)/usage/pc-a/\(account.name)/\(day).json"
        try waitUntil(seconds: 15, "both agents count and read each other's summary") {
            guard let now = try? statusOf(a, family), let local = now["screenSeconds"] as? Int,
                let others = now["otherComputersSeconds"] as? Int
            else { return false }
            return local >= 4 && others >= 2
        }
        let first = try statusOf(a, family)
        let local = first["screenSeconds"] as? Int ?? -1
        let others = first["otherComputersSeconds"] as? Int ?? -1
        let remaining = first["remainingSeconds"] as? Int ?? -1
        // B counts the same process as A; its summary lags by at most its flush (2 s) and interval (1 s),
        // and A reads it at most a second later.
        #expect(others <= local + 1 && others >= local - 5, "local \(local) s, other computers \(others) s")
        #expect(abs(remaining - (8 * 3600 - local - others)) <= 2, "remaining \(remaining) s, local \(local), others \(others)")
        // The summary is signed canonical JSON that names its computer, user and day.
        // It lags the live figure by the flush (2 s) and the interval (1 s).
        func summaryOfAOnDisk() -> UsageSummary? {
            FileManager.default.contents(atPath: summaryOfA).flatMap { try? UsageSummary.parse(Array($0)).summary }
        }
        try waitUntil(seconds: 10, "pc-a's summary holds 3 s") { (summaryOfAOnDisk()?.screenMilliseconds ?? 0) >= 3_000 }
        let summary = try #require(summaryOfAOnDisk())
        #expect(summary.machine == "pc-a" && summary.user == account.name && summary.day == day)

        // The parent sees each computer's shared usage of today.
        let sync = try family.parent.ok(["sync", "status", "--shared-dir", family.shared]).stdout
        #expect(sync.components(separatedBy: "usage today: \(account.name) ").count == 3, "\(sync)")

        // A summary removed from the shared directory gives no time back: the agent kept it.
        kill(child, SIGKILL)
        _ = waitForExit(child)
        _ = b.stop()
        usleep(1_500_000)
        let before = try statusOf(a, family)["otherComputersSeconds"] as? Int ?? -1
        try FileManager.default.removeItem(atPath: "\(family.shared)/usage/pc-b/\(account.name)/\(day).json")
        usleep(1_500_000)
        #expect(try statusOf(a, family)["otherComputersSeconds"] as? Int == before)

        // The limit counts this computer only when the policy says so.
        try family.parent.ok(["limit", account.name, "--computers", "this", "--shared-dir", family.shared, "--no-wait"])
        try waitUntil(seconds: 10, "the agent applies --computers this") {
            (try? statusOf(a, family))?["otherComputersSeconds"] == nil
        }
        #expect(a.stop() == 0, "\(a.log)")
    }

    /// Another computer's day fills the limit: this computer refuses logins and says so, with the
    /// figures of the computer that used the time. The other computer is played by the test with
    /// that computer's real machine key (it announced itself and the parent enrolled it).
    @Test func anotherComputersTimeUsesUpTheLimitHere() throws {
        let (account, family) = try setUp(limit: "15m")
        defer { family.cleanUp() }
        // B starts once so that it announces its key, then is off for the rest of the day.
        let b = try start(family, 1)
        #expect(b.stop() == 0)
        let a = try start(family, 0)
        defer { a.killHard() }
        let allowed = try a.runner.run(["check-login", "--user", account.name, "--socket", a.socketPath])
        #expect(allowed.status == 0, "\(allowed)")

        let keyOfB = try KeyRing(stateDirectory: family.agents[1].runner.stateDir).createMachineKeyIfMissing()
        let identityOfB = MachineIdentity(id: "pc-b", host: "den-pc", key: keyOfB)
        let day = today()
        let spent = UsageSummary(
            machine: "pc-b", host: "den-pc", key: keyOfB.id, user: account.name, day: day,
            buckets: [
                .init(hour: 9, app: "", milliseconds: 10 * 60_000), .init(hour: 10, app: "", milliseconds: 5 * 60_000),
                .init(hour: 10, app: "firefox", milliseconds: 5 * 60_000),
            ],
            time: Int64(Date().timeIntervalSince1970))
        try SharedDirectory(path: family.shared).publish(spent, as: identityOfB)
        try waitUntil(seconds: 10, "the agent counts the other computer's 15 minutes") {
            (try? statusOf(a, family))?["otherComputersSeconds"] as? Int == 900
        }
        let spentStatus = try statusOf(a, family)
        #expect(spentStatus["state"] as? String == "limit-reached", "\(spentStatus)")
        let refused = try a.runner.run(["check-login", "--user", account.name, "--socket", a.socketPath])
        #expect(refused.status == 77, "\(refused)")
        let text = try a.runner.ok(["status", account.name, "--socket", a.socketPath, "--shared-dir", family.shared]).stdout
        #expect(text.contains("15m more on the family's other computers (the limit counts them)"), "\(text)")

        // The parent's report over every computer adds B's day, bucket by bucket; without the flag it is A's only.
        func report(_ extra: [String]) throws -> [String: Any] {
            try jsonObject(
                try a.runner.ok(["report", account.name, "--format", "json", "--shared-dir", family.shared] + extra).stdout)
        }
        let own = try report([])
        let all = try report(["--all-computers"])
        let ownScreen = own["screenSeconds"] as? Int ?? -1
        #expect(own["computers"] == nil)
        #expect(all["screenSeconds"] as? Int == ownScreen + 900, "\(all)")
        let computers = all["computers"] as? [[String: Any]] ?? []
        #expect(computers.count == 2 && computers.last?["machine"] as? String == "pc-b", "\(computers)")
        #expect(computers.last?["host"] as? String == "den-pc" && computers.last?["screenSeconds"] as? Int == 900)
        #expect(computers.first?["screenSeconds"] as? Int == ownScreen && computers.first?["machine"] is NSNull)
        let apps = all["apps"] as? [[String: Any]] ?? []
        #expect(apps.contains { $0["app"] as? String == "firefox" && $0["seconds"] as? Int == 300 }, "\(apps)")
        let hours = all["hours"] as? [[String: Any]] ?? []
        #expect(hours.count == 24 && (hours[9]["screenSeconds"] as? Int ?? 0) >= 600, "\(hours)")
        let table = try a.runner.ok(["report", account.name, "--all-computers", "--shared-dir", family.shared]).stdout
        #expect(table.contains("computers: ") && table.contains("den-pc 15m"), "\(table)")

        // A summary signed by any other key in B's name is not believed, and does not replace B's.
        let forger = SigningKey()
        let forged = UsageSummary(
            machine: "pc-b", host: "den-pc", key: forger.id, user: account.name, day: day, buckets: [], time: spent.time + 60)
        let forgedBytes = forged.fileBytes(signature: try forger.sign(forged.signingBytes))
        try Data(forgedBytes).write(to: URL(fileURLWithPath: "\(family.shared)/usage/pc-b/\(account.name)/\(day).json"))
        usleep(1_500_000)
        #expect(try statusOf(a, family)["otherComputersSeconds"] as? Int == 900)
        #expect(a.log.contains("ignoring a usage summary"), "\(a.log)")
        // The report reads what the agent kept, and ignores the forged file.
        #expect(try report(["--all-computers"])["screenSeconds"] as? Int ?? 0 >= ownScreen + 900)
        #expect(a.stop() == 0, "\(a.log)")
    }

    /// Anyone who can write to the shared folder can announce a computer, sign its usage summaries and
    /// confirmations with a key of their own, and sign its enrolment with that key too. None of it is
    /// believed: the edit does not wait for it, its usage counts nowhere, and `sync status` says
    /// "not enrolled".
    @Test func aFakeComputersAnnouncementAndUsageSummaryAreIgnored() throws {
        let (account, family) = try setUp(limit: "8h")
        defer { family.cleanUp() }
        let a = try start(family, 0)
        defer { a.killHard() }
        let fake = MachineIdentity(id: "pc-fake", host: "fake-pc", key: SigningKey())
        let shared = SharedDirectory(path: family.shared)
        try shared.publish(fake.announcement)
        try shared.publish(MachineEnrolment(fake.announcement, author: fake.key.id, time: Int64(Date().timeIntervalSince1970)), signedBy: fake.key)
        let day = today()
        let spent = UsageSummary(
            machine: "pc-fake", host: "fake-pc", key: fake.key.id, user: account.name, day: day,
            buckets: [.init(hour: 9, app: "", milliseconds: 2 * 3_600_000)], time: Int64(Date().timeIntervalSince1970))
        try shared.publish(spent, as: fake)

        try waitUntil(seconds: 10, "the agent refuses the fake computer's summary") { a.log.contains("ignoring a usage summary") }
        #expect(a.log.contains("machine=pc-fake") && a.log.contains("not enrolled: enrolled by key \(fake.key.id), which is not trusted here"), "\(a.log)")
        #expect(try statusOf(a, family)["otherComputersSeconds"] as? Int == 0)

        // The edit waits for pc-a alone (the default wait): the fake computer would never answer.
        let edit = try family.parent.run(["limit", account.name, "7h", "--computers", "all", "--shared-dir", family.shared])
        #expect(edit.status == 0, "\(edit)")
        #expect(edit.stdout.contains(": applied v4 in ") && !edit.stdout.contains("fake-pc"), "\(edit)")

        let sync = try family.parent.ok(["sync", "status", "--shared-dir", family.shared]).stdout
        #expect(sync.contains("fake-pc (pc-fake): not enrolled: enrolled by key \(fake.key.id), which is not trusted here\n"), "\(sync)")
        #expect(sync.contains("  its key: \(KeyFingerprint.text(of: fake.key.publicKey)); if this is one of your computers: curfew sync enrol pc-fake"))
        #expect(!sync.contains("2h (written"), "\(sync)")
        let json = try jsonArray(family.parent.ok(["sync", "status", "--json", "--shared-dir", family.shared]).stdout)
        #expect(json.first { $0["machine"] as? String == "pc-fake" }?["enrolled"] as? Bool == false, "\(json)")
        #expect(json.first { $0["machine"] as? String == "pc-a" }?["enrolled"] as? Bool == true, "\(json)")
        // Neither the parent's report over every computer nor the child's status counts it.
        let report = try jsonObject(
            try family.parent.ok(["report", account.name, "--all-computers", "--format", "json", "--shared-dir", family.shared]).stdout)
        #expect(((report["computers"] as? [[String: Any]]) ?? []).allSatisfy { $0["machine"] as? String != "pc-fake" }, "\(report)")
        #expect(try statusOf(a, family)["otherComputersSeconds"] as? Int == 0)

        // Once a parent enrols it, it counts: the test holds its key, so it is a computer of the family.
        try family.parent.ok(["sync", "enrol", "pc-fake", "--yes", "--shared-dir", family.shared])
        try waitUntil(seconds: 10, "the enrolled computer's 2 h counted") {
            (try? statusOf(a, family))?["otherComputersSeconds"] as? Int == 7200
        }
        #expect(a.stop() == 0, "\(a.log)")
    }
}

func jsonArray(_ text: String) throws -> [[String: Any]] {
    guard let array = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]] else {
        throw TestFailure("not a JSON array of objects: \(text)")
    }
    return array
}
