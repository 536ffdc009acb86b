import CurfewPOSIX
import SystemPackage
import CLinux
import CurfewCore
import Glibc

/// The `network` lockout in the kernel: one nftables table of Curfew's own, `inet curfew`, whose
/// output chain drops every packet a locked-out user's sockets send, loopback excepted:
///
///     table inet curfew {
///         chain output {
///             type filter hook output priority filter; policy accept;
///             oif "lo" accept
///             meta skuid 1001 counter drop comment "curfew: kid"
///         }
///     }
///
/// The `inet` family covers IPv4 and IPv6 alike. Only locally generated traffic passes the output
/// hook, and `meta skuid` is the owner of the sending socket: a child's programs, whatever they are,
/// but not root's nor another user's. Without a locked-out user the table does not exist at all.
///
/// Through the `nft` command (Debian's nftables) with a JSON rule set on standard input (`nft -j -f -`),
/// not libnftables linked in: the rule set changes only when a decision does (a few times a day), so
/// a fork and exec of a few milliseconds is nothing; nothing is linked into `curfew` and `curfewd`,
/// so a computer that never uses the `network` lockout needs no nftables at all (the package only
/// recommends it); the JSON is built as a value, never by pasting text into nft's syntax; and a fault
/// in the library cannot take the root agent down with it. One `-f` input is one netlink transaction:
/// the table is replaced whole (add, delete, add again, then its chain and rules), so it is never
/// seen half built, and a failed input changes nothing.
///
/// Rules live in a network namespace: the agent's own (the computer's, under systemd).
public struct NetworkFilter: Sendable {
    public static let family = "inet"
    public static let table = "curfew"
    public static let chain = "output"
    static let nftCandidates = ["/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft"]

    /// The program and leading arguments to run instead of `nft` (tests: `ip netns exec NS nft`).
    public var command: [String]?
    public var timeoutMilliseconds: Int

    public init(command: [String]? = nil, timeoutMilliseconds: Int = 5_000) {
        self.command = command
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    /// One user whose traffic is dropped: the uid the rule matches, the name its comment gives.
    public struct Blocked: Sendable, Equatable, Hashable {
        public var uid: UInt32
        public var user: String

        public init(uid: UInt32, user: String) {
            self.uid = uid
            self.user = user
        }
    }

    /// The nft JSON input that makes the table hold exactly `blocked` (uid 0 is never added: root
    /// is never managed); without anyone, it removes the table.
    public static func ruleset(_ blocked: [Blocked]) -> JSONValue {
        let table = NFT.Object.table(NFT.Table(family: family, name: Self.table))
        // `add` first, so the `delete` never fails on a table that is not there.
        var commands: [NFT.Command] = [.add(table), .delete(table)]
        let users = blocked.filter { $0.uid != 0 }.sorted { $0.uid < $1.uid }
        if !users.isEmpty {
            commands.append(.add(table))
            commands.append(.add(.chain(NFT.Chain(family: family, table: Self.table, name: chain))))
            let rule = { (expressions: [NFT.Expression], comment: String?) in
                NFT.Command.add(.rule(NFT.Rule(family: family, table: Self.table, chain: chain, comment: comment, expr: expressions)))
            }
            commands.append(rule([.match(key: "oif", right: .string("lo")), .verdict("accept")], nil))
            for user in users {
                // User names are validated login names; the comment is only for people reading `nft list ruleset`.
                commands.append(rule([.match(key: "skuid", right: .int(Int64(user.uid))), .counter, .verdict("drop")], "curfew: \(user.user)"))
            }
        }
        return JSONValueEncoder().value(of: NFT.Ruleset(nftables: commands))
    }

    /// Replaces the table with one that drops the traffic of `blocked` (removes it when empty), in one
    /// transaction (`nft -j -f -`).
    public func apply(_ blocked: [Blocked]) throws(LinuxError) {
        let input = Array(Self.ruleset(blocked).canonicalBytes) + [UInt8(ascii: "\n")]
        let result = try run(["-j", "-f", "-"], input: input)
        guard result.status == 0 else {
            throw LinuxError(operation: "nft -j -f -: \(Self.describe(result.status)): \(Self.firstLine(result.errors))", errno: .ioError)
        }
    }

    /// The uids the table drops now; empty when there is no table. It lists the family's whole
    /// ruleset (`nft -j list ruleset inet`), which succeeds whether or not the table is there, so no
    /// error text of nft's is ever read for an answer.
    public func blockedUIDs() throws(LinuxError) -> Set<UInt32> {
        let result = try run(["-j", "list", "ruleset", Self.family], input: [])
        guard result.status == 0 else {
            throw LinuxError(operation: "nft -j list ruleset: \(Self.describe(result.status)): \(Self.firstLine(result.errors))", errno: .ioError)
        }
        do {
            return Self.uids(inListing: try JSONValue.parse(result.output))
        } catch {
            throw LinuxError(operation: "nft -j list ruleset: unreadable JSON (\(error))", errno: .ioError)
        }
    }

    /// The uids of `meta skuid == N` rules with a `drop` verdict in the chain of a `nft -j list` answer.
    public static func uids(inListing listing: JSONValue) -> Set<UInt32> {
        guard case .object(let top) = listing, case .array(let items)? = top["nftables"] else { return [] }
        var uids = Set<UInt32>()
        for item in items {
            guard case .object(let object) = item, case .object(let rule)? = object["rule"],
                rule["table"] == .string(table), rule["chain"] == .string(chain), case .array(let expressions)? = rule["expr"]
            else { continue }
            var uid: UInt32?
            var drops = false
            for expression in expressions {
                guard case .object(let entry) = expression else { continue }
                if entry["drop"] != nil { drops = true }
                if case .object(let match)? = entry["match"], case .object(let left)? = match["left"],
                    case .object(let meta)? = left["meta"], meta["key"] == .string("skuid"), case .int(let value)? = match["right"],
                    let small = UInt32(exactly: value)
                {
                    uid = small
                }
            }
            if drops, let uid { uids.insert(uid) }
        }
        return uids
    }

    /// Runs nft with `arguments`, `input` on its standard input; its exit status, output and errors
    /// (each up to 1 MiB), waiting at most `timeoutMilliseconds` (then SIGKILL).
    func run(_ arguments: [String], input: [UInt8]) throws(LinuxError) -> (status: Int32, output: String, errors: String) {
        let program: [String]
        if let command {
            program = command
        } else {
            guard let nft = Self.nftCandidates.first(where: { access($0, X_OK) == 0 }) else {
                throw LinuxError(operation: "nft (nftables) not found", errno: .noSuchFileOrDirectory)
            }
            program = [nft]
        }
        let deadline = ClockReading.read(CLOCK_MONOTONIC) + Int64(timeoutMilliseconds)
        // nft reads `-f -` by opening /dev/stdin, which a socket cannot be opened as: the input goes
        // in an unlinked temporary file instead (mkstemp(3): a new name, O_EXCL, mode 0600).
        let inputFile = try Self.temporaryFile(holding: input)
        defer { try? inputFile.close() }
        // Socket pairs rather than pipes for what nft says: they take SOCK_CLOEXEC (Swift does not
        // import pipe2), so children other threads spawn meanwhile do not keep an end open.
        let stdout = try LinuxError.socketPair("socketpair for nft")
        defer { try? stdout.ours.close() }
        let stderr: (ours: FileDescriptor, theirs: FileDescriptor)
        do {
            stderr = try LinuxError.socketPair("socketpair for nft")
        } catch {
            try? stdout.theirs.close()
            throw error
        }
        defer { try? stderr.ours.close() }
        let pid: Int32
        do {
            defer {
                try? stdout.theirs.close()
                try? stderr.theirs.close()
            }
            let options = SpawnOptions(
                environment: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"], input: inputFile.rawValue,
                passing: [
                    SpawnOptions.Passing(from: stdout.theirs.rawValue, to: 1), SpawnOptions.Passing(from: stderr.theirs.rawValue, to: 2),
                ])
            pid = try spawnProcess(program[0], Array(program.dropFirst()) + arguments, options: options)
        }
        for descriptor in [stdout.ours, stderr.ours] { _ = fcntl(descriptor.rawValue, F_SETFL, O_NONBLOCK) }
        var output: [UInt8] = []
        var errors: [UInt8] = []
        var outputOpen = true
        var errorsOpen = true
        // Our unreaped child: its PID cannot be reused until we reap it, so kill(pid) is safe.
        while outputOpen || errorsOpen {
            let left = deadline - ClockReading.read(CLOCK_MONOTONIC)
            if left <= 0 {
                killAndReap(pid)
                throw LinuxError(operation: "nft: no answer within \(timeoutMilliseconds) ms", errno: .timedOut)
            }
            var pollers = [
                pollfd(fd: outputOpen ? stdout.ours.rawValue : -1, events: Int16(POLLIN), revents: 0),
                pollfd(fd: errorsOpen ? stderr.ours.rawValue : -1, events: Int16(POLLIN), revents: 0),
            ]
            _ = poll(&pollers, 2, Int32(min(left, 1_000)))
            if outputOpen && pollers[0].revents != 0 { outputOpen = stdout.ours.drainAvailable(into: &output, keeping: 1 << 20) }
            if errorsOpen && pollers[1].revents != 0 { errorsOpen = stderr.ours.drainAvailable(into: &errors, keeping: 1 << 20) }
        }
        guard let status = reap(pid) else { throw LinuxError(operation: "waitpid nft", errno: .noChildProcess) }
        return (status, String(decoding: output, as: UTF8.self), String(decoding: errors, as: UTF8.self))
    }

    /// A descriptor of an unlinked temporary file holding `bytes`, at its start (close-on-exec); the
    /// caller closes it.
    static func temporaryFile(holding bytes: [UInt8]) throws(LinuxError) -> FileDescriptor {
        var template = Array("/tmp/curfew-nft-XXXXXX".utf8CString)
        let fd = FileDescriptor(
            rawValue: try LinuxError.check("mkstemp /tmp/curfew-nft-XXXXXX") { template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) } })
        unlink(template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        _ = fcntl(fd.rawValue, F_SETFD, FD_CLOEXEC)
        var written = 0
        while written < bytes.count {
            let count: Int
            do throws(LinuxError) {
                count = try LinuxError.check("write the nft input") {
                    bytes[written...].withUnsafeBytes { Glibc.write(fd.rawValue, $0.baseAddress, $0.count) }
                }
                guard count > 0 else { throw LinuxError(operation: "write the nft input", errno: .ioError) }
            } catch {
                try? fd.close()
                throw error
            }
            written += count
        }
        lseek(fd.rawValue, 0, SEEK_SET)
        return fd
    }

    static func describe(_ status: Int32) -> String {
        status & 0x7F == 0 ? "exited with status \((status >> 8) & 0xFF)" : "killed by signal \(status & 0x7F)"
    }

    static func firstLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
    }
}

/// The part of nft's JSON schema (libnftables-json(5)) the filter writes: `{"nftables": [commands]}`,
/// each command `{"add": {"table": {...}}}`, each rule's expressions `{"match": ...}`, `{"counter":
/// null}` or a verdict `{"drop": null}`.
enum NFT {
    struct Ruleset: Encodable {
        var nftables: [Command]
    }

    enum Command: Encodable {
        case add(Object)
        case delete(Object)

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: JSONKey.self)
            switch self {
            case .add(let object): try container.encode(object, forKey: JSONKey("add"))
            case .delete(let object): try container.encode(object, forKey: JSONKey("delete"))
            }
        }
    }

    enum Object: Encodable {
        case table(Table)
        case chain(Chain)
        case rule(Rule)

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: JSONKey.self)
            switch self {
            case .table(let table): try container.encode(table, forKey: JSONKey("table"))
            case .chain(let chain): try container.encode(chain, forKey: JSONKey("chain"))
            case .rule(let rule): try container.encode(rule, forKey: JSONKey("rule"))
            }
        }
    }

    struct Table: Encodable {
        var family: String
        var name: String
    }

    /// A base chain on the output hook that accepts what no rule drops.
    struct Chain: Encodable {
        var family: String
        var table: String
        var name: String
        var type = "filter"
        var hook = "output"
        var prio = 0
        var policy = "accept"
    }

    struct Rule: Encodable {
        var family: String
        var table: String
        var chain: String
        var comment: String?
        var expr: [Expression]
    }

    enum Expression: Encodable {
        /// `meta <key> == <right>`.
        case match(key: String, right: JSONValue)
        case counter
        /// `accept`, `drop`.
        case verdict(String)

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: JSONKey.self)
            switch self {
            case .match(let key, let right):
                try container.encode(Match(left: .init(meta: .init(key: key)), right: right), forKey: JSONKey("match"))
            case .counter: try container.encodeNil(forKey: JSONKey("counter"))
            case .verdict(let word): try container.encodeNil(forKey: JSONKey(word))
            }
        }
    }

    struct Match: Encodable {
        struct Meta: Encodable {
            struct Key: Encodable { var key: String }
            var meta: Key
        }

        var op = "=="
        var left: Meta
        var right: JSONValue
    }
}
