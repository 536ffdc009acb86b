import Foundation
import Testing

/// Two parents (two state directories, each trusting the other's key) edit from the same base; a
/// third computer only reads. Every one of them folds the same merged policy whatever order the
/// record files arrive in; a revoked key's new records are ignored.
@Suite struct KeyMergeTests {
    /// Three state directories under one runner: parents `a` and `b`, reader `c`.
    struct Family {
        let runner: CurfewRunner
        var root: String { runner.root.path }
        func state(_ who: String) -> String { "\(root)/\(who)" }

        init() throws {
            runner = try CurfewRunner()
            for who in ["a", "b", "c"] {
                try ok(who, ["init"], shared: "\(root)/shared-\(who)")
            }
            // a exports to a file, b to stdout; each side trusts the other, c trusts both.
            try ok("a", ["key", "export", "--output", "\(root)/a.pub"])
            let bKey = try ok("b", ["key", "export"]).stdout
            try Data(bKey.utf8).write(to: URL(fileURLWithPath: "\(root)/b.pub"))
            try ok("a", ["key", "trust", "\(root)/b.pub"])
            try ok("b", ["key", "trust", "-"], stdin: try String(contentsOfFile: "\(root)/a.pub", encoding: .utf8))
            try ok("c", ["key", "trust", "\(root)/a.pub"])
            try ok("c", ["key", "trust", "\(root)/b.pub"])
        }

        func keyID(_ who: String) throws -> String {
            let line = try ok(who, ["key", "show"]).stdout.split(separator: "\n").first ?? ""
            return String(line.dropFirst("key id: ".count))
        }

        func run(_ who: String, _ arguments: [String], shared: String? = nil, stdin: String? = nil) throws -> CurfewRunner.Result {
            try runner.run(
                arguments + ["--shared-dir", shared ?? "\(root)/shared-\(who)"], stdin: stdin, stateDir: state(who))
        }

        @discardableResult
        func ok(
            _ who: String, _ arguments: [String], shared: String? = nil, stdin: String? = nil,
            sourceLocation: SourceLocation = #_sourceLocation
        ) throws -> CurfewRunner.Result {
            let result = try run(who, arguments, shared: shared, stdin: stdin)
            #expect(result.status == 0, "\(who): curfew \(arguments.joined(separator: " ")): \(result)", sourceLocation: sourceLocation)
            return result
        }

        func records(_ shared: String) throws -> Set<String> {
            Set(try FileManager.default.contentsOfDirectory(atPath: "\(shared)/records").filter { $0.hasSuffix(".json") })
        }

        /// A new shared directory holding `files` (paths), copied one after another in that order.
        func sharedDirectory(_ name: String, copying files: [String]) throws -> String {
            let path = "\(root)/\(name)"
            try FileManager.default.createDirectory(atPath: "\(path)/records", withIntermediateDirectories: true)
            for file in files {
                try FileManager.default.copyItem(
                    atPath: file, toPath: "\(path)/records/\(URL(fileURLWithPath: file).lastPathComponent)")
            }
            return path
        }

        /// a adds kid; b gets the first record; then a runs `editA` and b `editB`, each without
        /// seeing the other's record. Returns the three record files (first, a's, b's).
        func concurrentEdits(_ editA: [String], _ editB: [String], pause: Bool = false) throws -> [String] {
            try ok("a", ["user", "add", "kid"])
            let first = try records("\(root)/shared-a").first!
            try FileManager.default.copyItem(
                atPath: "\(root)/shared-a/records/\(first)", toPath: "\(root)/shared-b/records/\(first)")
            try ok("a", editA)
            // Record times have whole seconds: b's record is later than a's.
            if pause { Thread.sleep(forTimeInterval: 1.1) }
            try ok("b", editB)
            let fromA = try records("\(root)/shared-a").subtracting([first]).first!
            let fromB = try records("\(root)/shared-b").subtracting([first]).first!
            return [
                "\(root)/shared-a/records/\(first)", "\(root)/shared-a/records/\(fromA)", "\(root)/shared-b/records/\(fromB)",
            ]
        }
    }

    static let mergedJSON = """
        {
          "user": "kid",
          "dailyLimitMinutes": 60,
          "weekdayLimits": {},
          "bedtime": {
            "start": "21:30",
            "end": "07:00"
          },
          "weekdayBedtimes": {},
          "apps": [],
          "warnMinutes": [15, 5, 1],
          "lockout": "logout",
          "timezone": null
        }

        """

    @Test func keysAreShownExportedAndTrusted() throws {
        let family = try Family()
        defer { family.runner.cleanUp() }
        let a = try family.keyID("a")
        let b = try family.keyID("b")
        let show = try family.ok("a", ["key", "show"]).stdout
        let publicKey = try String(contentsOfFile: "\(family.root)/a.pub", encoding: .utf8)
        #expect(show == "key id: \(a)\npublic key: \(publicKey)trusted keys:\n\(["  \(a) (this computer's)", "  \(b)"].sorted().joined(separator: "\n"))\n")
        #expect(try family.ok("a", ["key", "export"]).stdout == publicKey)
        // Keys live in the state directory: no shared directory is needed (a's default one does not exist).
        let withoutShared = try family.runner.run(["key", "export"], stateDir: family.state("a"))
        #expect(withoutShared.status == 0, "\(withoutShared)")
        #expect(withoutShared.stdout == publicKey)
        #expect(try family.ok("c", ["key", "trust", "\(family.root)/a.pub"]).stdout == "key \(a) is already trusted\n")
        let fresh = try family.ok("c", ["key", "trust", "-"], stdin: publicKey)
        #expect(fresh.stdout == "key \(a) is already trusted\n")
        let json = try family.ok("c", ["key", "show", "--json"]).stdout
        #expect(json.contains("\"id\": \"\(a)\""))
        #expect(json.contains("\"revokedAt\": null"))
        #expect(FileManager.default.fileExists(atPath: "\(family.state("c"))/keys/trusted/\(b).pub"))
    }

    @Test func concurrentEditsMergeTheSameWayEverywhereInEveryOrder() throws {
        let family = try Family()
        defer { family.runner.cleanUp() }
        let files = try family.concurrentEdits(["limit", "kid", "1h"], ["bedtime", "kid", "21:30-07:00"])
        for (index, order) in permutations(files).enumerated() {
            let shared = try family.sharedDirectory("order-\(index)", copying: order)
            for who in ["a", "b", "c"] {
                let show = try family.ok(who, ["policy", "show", "kid", "--json"], shared: shared)
                #expect(show.stdout == KeyMergeTests.mergedJSON, "\(who), order \(index)")
                #expect(show.stderr == "")
            }
        }
        let shared = try family.sharedDirectory("merged", copying: files)
        let text = try family.ok("c", ["policy", "show", "kid"], shared: shared).stdout.split(separator: "\n")
        #expect(text.first?.hasPrefix("kid: version 2, signed by key ") == true)
        #expect(text.contains("  daily limit  1h"))
        #expect(text.contains("  bedtime      21:30-07:00"))
        #expect(text.last?.hasPrefix("merged 2 records of version 2: ") == true)
        #expect(!text.contains { $0.hasPrefix("conflicting fields") })
        // The next edit starts from the merged policy, as version 3 based on version 2.
        let next = try family.ok("b", ["lockout", "kid", "lock"], shared: shared)
        #expect(next.stdout.hasSuffix("published version 3; no computer has confirmed it yet\n"))
        let newRecord = try family.records(shared).subtracting(files.map { URL(fileURLWithPath: $0).lastPathComponent }).first!
        let recordText = try String(contentsOfFile: "\(shared)/records/\(newRecord)", encoding: .utf8)
        #expect(recordText.contains("\"baseVersion\":2,"))
        #expect(recordText.contains("\"version\":3}") || recordText.contains("\"version\":3,"))
        for who in ["a", "b", "c"] {
            let show = try family.ok(who, ["policy", "show", "kid", "--json"], shared: shared)
            #expect(show.stdout == KeyMergeTests.mergedJSON.replacingOccurrences(of: "\"logout\"", with: "\"lock\""))
        }
    }

    @Test func aSecondEditMadeBeforeTheOtherParentsArrivedKeepsTheirChange() throws {
        let family = try Family()
        defer { family.runner.cleanUp() }
        var files = try family.concurrentEdits(["limit", "kid", "1h"], ["bedtime", "kid", "21:30-07:00"])
        // a edits again, still without b's record: version 3, based on a's own version 2.
        let before = try family.records("\(family.root)/shared-a")
        try family.ok("a", ["lockout", "kid", "lock"])
        files.append("\(family.root)/shared-a/records/\(try family.records("\(family.root)/shared-a").subtracting(before).first!)")
        for (index, order) in permutations(files).enumerated() where index % 5 == 0 {
            let shared = try family.sharedDirectory("order-\(index)", copying: order)
            for who in ["a", "b", "c"] {
                let show = try family.ok(who, ["policy", "show", "kid", "--json"], shared: shared)
                #expect(
                    show.stdout == KeyMergeTests.mergedJSON.replacingOccurrences(of: "\"logout\"", with: "\"lock\""),
                    "\(who), order \(index)")
            }
        }
    }

    @Test func aFieldBothChangedTakesTheLaterRecordsValue() throws {
        let family = try Family()
        defer { family.runner.cleanUp() }
        let files = try family.concurrentEdits(["limit", "kid", "1h"], ["limit", "kid", "3h"], pause: true)
        for (index, order) in permutations(files).enumerated() {
            let shared = try family.sharedDirectory("order-\(index)", copying: order)
            for who in ["a", "b", "c"] {
                let show = try family.ok(who, ["policy", "show", "kid", "--json"], shared: shared)
                #expect(show.stdout.contains("\"dailyLimitMinutes\": 180,"), "\(who), order \(index): \(show.stdout)")
            }
            let text = try family.ok("a", ["policy", "show", "kid"], shared: shared).stdout
            #expect(text.hasSuffix("\nconflicting fields (the later record's value kept): dailyLimitMinutes\n"))
        }
    }

    @Test func aRevokedKeysNewRecordsAreIgnored() throws {
        let family = try Family()
        defer { family.runner.cleanUp() }
        let shared = "\(family.root)/shared-a"
        let b = try family.keyID("b")
        try family.ok("a", ["user", "add", "kid"])
        try family.ok("b", ["limit", "kid", "1h"], shared: shared)
        let before = try family.records(shared)
        let revoke = try family.ok("c", ["key", "revoke", b, "--yes"], shared: shared)
        #expect(
            revoke.stdout
                == "revoked key \(b): 1 record it signed before still counts; anything it signs from now on is ignored\n")
        let revocation = try String(contentsOfFile: "\(family.state("c"))/keys/revoked/\(b).json", encoding: .utf8)
        #expect(revocation.contains("\"versions\":{\"kid\":2}"))
        // b goes on publishing: c ignores it, with the reason; a still trusts b.
        try family.ok("b", ["lockout", "kid", "lock"], shared: shared)
        let late = try family.records(shared).subtracting(before).first!
        let show = try family.ok("c", ["policy", "show", "kid", "--json"], shared: shared)
        #expect(show.stdout.contains("\"dailyLimitMinutes\": 60,"))
        #expect(show.stdout.contains("\"lockout\": \"logout\""))
        #expect(show.stderr == "curfew: warning: ignored record \(late): signed by revoked key \(b)\n")
        #expect(try family.ok("a", ["policy", "show", "kid", "--json"], shared: shared).stdout.contains("\"lockout\": \"lock\""))
        // c's next edit is based on what c enforces, not on b's ignored version 3.
        let edit = try family.ok("c", ["limit", "kid", "2h"], shared: shared)
        #expect(edit.stdout.contains("published version 3"))
        #expect(try family.ok("c", ["key", "show"]).stdout.contains("  \(b) (revoked at "))
        let again = try family.ok("c", ["key", "revoke", b], shared: shared)
        #expect(again.stdout.hasPrefix("key \(b) was already revoked at "))
    }

    /// Invalid key files and ids: one line naming the rule and the value, exit 64, nothing changed.
    @Test func invalidKeysAndIdsAreRefusedAndChangeNothing() throws {
        let family = try Family()
        defer { family.runner.cleanUp() }
        let root = family.root
        let b = try family.keyID("b")
        try family.ok("c", ["key", "revoke", b, "--yes"])
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: "\(root)/garbage.pub"))
        try Data(Data(repeating: 7, count: 31).base64EncodedString().utf8).write(to: URL(fileURLWithPath: "\(root)/short.pub"))
        try Data().write(to: URL(fileURLWithPath: "\(root)/empty.pub"))
        let short = Data(repeating: 7, count: 31).base64EncodedString()
        let c = try family.keyID("c")
        let cases: [([String], String)] = [
            (
                ["key", "trust", "\(root)/garbage.pub"],
                "key file \(root)/garbage.pub must hold one Ed25519 public key in base64 (as curfew key export writes it), got \"hello\""
            ),
            (
                ["key", "trust", "\(root)/short.pub"],
                "key file \(root)/short.pub must hold one Ed25519 public key in base64 (as curfew key export writes it), got \"\(short)\""
            ),
            (
                ["key", "trust", "\(root)/empty.pub"],
                "key file \(root)/empty.pub must hold one Ed25519 public key in base64 (as curfew key export writes it), got \"\""
            ),
            (["key", "trust", "\(root)/missing.pub"], "cannot open \(root)/missing.pub: No such file or directory"),
            (
                ["key", "trust", "\(family.state("c"))/keys/signing.key"],
                "key file \(family.state("c"))/keys/signing.key holds this computer's private signing key, not a public key (use curfew key export)"
            ),
            (["key", "trust", "\(root)/b.pub"], "key \(b) was revoked at "),
            (["key", "revoke", "xyz"], "key id must be 16 lowercase hex digits, got \"xyz\""),
            (["key", "revoke", "0123456789ABCDEF"], "key id must be 16 lowercase hex digits, got \"0123456789ABCDEF\""),
            (["key", "revoke", "0123456789abcdef"], "key 0123456789abcdef is not trusted here (see curfew key show)"),
            (["key", "revoke", c, "--yes"], "key \(c) is this computer's own parent key and cannot be revoked"),
            (["key", "revoke"], "Missing expected argument '<id>'"),
        ]
        for (arguments, message) in cases {
            let before = try family.runner.snapshot()
            let result = try family.run("c", arguments)
            #expect(result.status == 64, "\(arguments): \(result)")
            #expect(result.stderr.hasPrefix("curfew: \(message)"), "\(arguments): \(result)")
            #expect(result.stderr.filter { $0 == "\n" }.count == 1, "\(arguments): \(result)")
            #expect(try family.runner.snapshot() == before, "\(arguments)")
        }
    }

    /// Key commands are for parents: another account cannot read the state directory.
    @Test(.enabled(if: getuid() == 0, "needs root to switch to another account"))
    func otherAccountsAreNotPermitted() throws {
        let family = try Family()
        defer { family.runner.cleanUp() }
        // Let nobody reach the state directories' parent and the key file, so only the state's own
        // permissions refuse.
        chmod(family.root, 0o755)
        chmod("\(family.root)/b.pub", 0o644)
        let b = try family.keyID("b")
        let before = try family.runner.snapshot()
        for arguments in [["key", "show"], ["key", "export"], ["key", "trust", "\(family.root)/b.pub"], ["key", "revoke", b, "--yes"]] {
            let result = try family.runner.run(arguments, stateDir: family.state("c"), asUser: "nobody")
            #expect(result.status == 77, "\(arguments): \(result)")
            #expect(
                result.stderr == "curfew: cannot read the state directory \(family.state("c")) (only a parent may do this; try sudo)\n")
        }
        #expect(try family.runner.snapshot() == before)
    }
}

/// Every ordering of a short list.
private func permutations<T>(_ items: [T]) -> [[T]] {
    guard items.count > 1 else { return [items] }
    return items.indices.flatMap { index in
        var rest = items
        let item = rest.remove(at: index)
        return permutations(rest).map { [item] + $0 }
    }
}
