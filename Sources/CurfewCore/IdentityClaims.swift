/// Which apps have claimed which executable identities (content hashes and build-ids), so that a
/// renamed, copied or modified binary stays the app it was first seen as.
///
/// Claims are made only from trustworthy matches (a catalog app's executable path, or a parent's
/// `--by-name` rule for a program seen under that name) and never for an interpreter or loader; the
/// tracker decides that. A claim holds for everyone when the file belongs to the system (root owns
/// it, a child cannot have put it there), else only for the user whose process taught it: what one
/// child does with files in their home never changes how another child's programs are matched.
/// When several apps claim one identity, all are kept and `AppCatalog.resolve` picks the strictest
/// for the user at hand.
public struct IdentityClaims: Sendable {
    public enum Scope: Hashable, Sendable {
        case everyone
        case user(UInt32)

        /// `everyone`, or the uid.
        public var word: String {
            switch self {
            case .everyone: "everyone"
            case .user(let uid): String(uid)
            }
        }
    }

    /// A second app claiming an identity: the caller logs it once (each pair is reported once).
    public struct Conflict: Equatable, Sendable {
        public var identity: String
        public var apps: [String]

        public init(identity: String, apps: [String]) {
            self.identity = identity
            self.apps = apps
        }
    }

    private var claims: [String: [String: Set<Scope>]] = [:]
    /// Changes whenever a claim is added or dropped, so cached matches can be checked.
    public private(set) var generation: UInt64 = 0
    /// Past this many identities, the claims of single users are dropped (a child producing binaries
    /// in a claimed directory must not grow the table without bound); claims for everyone stay.
    public let capacity: Int

    public init(capacity: Int = 8192) {
        self.capacity = max(1, capacity)
    }

    public var count: Int { claims.count }

    /// Records that `app` claims each of `identities` for `scope`; returns the conflicts this made
    /// (an identity that another app had already claimed), each once.
    @discardableResult
    public mutating func claim(_ identities: [String], app: String, scope: Scope) -> [Conflict] {
        var conflicts: [Conflict] = []
        for identity in identities {
            var apps = claims[identity] ?? [:]
            if apps[app]?.contains(scope) == true { continue }
            let isNewApp = apps[app] == nil
            apps[app, default: []].insert(scope)
            if isNewApp && apps.count > 1 { conflicts.append(Conflict(identity: identity, apps: apps.keys.sorted())) }
            if claims[identity] == nil && claims.count >= capacity { dropUserClaims() }
            claims[identity] = apps
            generation &+= 1
        }
        return conflicts
    }

    /// The apps that claimed any of `identities` for everyone or for `uid`.
    public func apps(claiming identities: [String], uid: UInt32) -> Set<String> {
        var result = Set<String>()
        for identity in identities {
            guard let apps = claims[identity] else { continue }
            for (app, scopes) in apps where scopes.contains(.everyone) || scopes.contains(.user(uid)) { result.insert(app) }
        }
        return result
    }

    /// Every claim, as (identity, app, scope), in a stable order.
    public var entries: [(identity: String, app: String, scope: Scope)] {
        var result: [(identity: String, app: String, scope: Scope)] = []
        for (identity, apps) in claims.sorted(by: { $0.key < $1.key }) {
            for (app, scopes) in apps.sorted(by: { $0.key < $1.key }) {
                for scope in scopes.sorted(by: { $0.word < $1.word }) { result.append((identity, app, scope)) }
            }
        }
        return result
    }

    /// The claims as the agent keeps them across restarts (`AgentStateKeys.identityClaims`): one line
    /// each, `identity TAB app TAB everyone|UID`. What was learnt from a binary seen once (a renamed
    /// `--by-name` copy, a glob path's game) then holds after a restart or a reboot too.
    public var persisted: String {
        entries.filter { !$0.identity.contains(where: \.isNewline) && !$0.app.contains(where: { $0 == "\t" || $0.isNewline }) }
            .map { "\($0.identity)\t\($0.app)\t\($0.scope.word)" }.joined(separator: "\n")
    }

    /// `persisted` read back, each line claimed as it was; a malformed line is skipped.
    public mutating func restore(_ text: String) {
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count == 3, !fields[0].isEmpty, !fields[1].isEmpty else { continue }
            let scope: Scope
            if fields[2] == "everyone" {
                scope = .everyone
            } else if let uid = UInt32(fields[2]) {
                scope = .user(uid)
            } else {
                continue
            }
            claim([String(fields[0])], app: String(fields[1]), scope: scope)
        }
    }

    private mutating func dropUserClaims() {
        var kept: [String: [String: Set<Scope>]] = [:]
        for (identity, apps) in claims {
            let everyone = apps.filter { $0.value.contains(.everyone) }.mapValues { _ in Set([Scope.everyone]) }
            if !everyone.isEmpty { kept[identity] = everyone }
        }
        claims = kept
        generation &+= 1
    }
}

extension AppRuleKind {
    /// For choosing among apps that claim one process: block (3) over limit (2) over no rule (1)
    /// over allow (0).
    public var strictness: Int {
        switch self {
        case .block: 3
        case .limit: 2
        case .allow: 0
        }
    }

    public static let noRuleStrictness = 1
}
