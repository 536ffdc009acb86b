/// What the exec guard denies now: for each managed user, the apps that would be stopped if they ran
/// (blocked, past their own limit, or every tracked app under the `apps` lockout), and what it takes
/// to name the app of a program from its file alone, exactly as the tracker names a process
/// (`AppCatalog.resolve` over the same claims and rules, the strictest claim winning).
///
/// An immutable value: the tracker builds a new one whenever a decision changes and the guard reads
/// the latest whole, never one half-updated.
public struct ExecRules: Sendable {
    /// One managed user's part.
    public struct User: Sendable, Equatable {
        public var name: String
        /// The user's app rules, for the strictness of apps claiming one file.
        public var rules: [String: AppRuleKind]
        /// Apps that must not run now, and why.
        public var denied: [String: StopReason]

        public init(name: String, rules: [String: AppRuleKind], denied: [String: StopReason]) {
            self.name = name
            self.rules = rules
            self.denied = denied
        }
    }

    /// An exec the guard denies: whose, which app, and why (the child is told as for a stop).
    public struct Denial: Sendable, Equatable {
        public var user: String
        public var app: String
        public var reason: StopReason

        public init(user: String, app: String, reason: StopReason) {
            self.user = user
            self.app = app
            self.reason = reason
        }
    }

    /// Managed users with something denied now, by uid; users with nothing denied are left out, so
    /// their execs are answered without a look at the file.
    public var users: [UInt32: User]
    /// Subordinate uid ranges of managed users (`/etc/subuid`): a process in a child's user namespace is theirs.
    public var subordinates: [OwnedSubordinateRange]
    public var catalog: AppCatalog
    public var claims: IdentityClaims
    /// Identities of the installed interpreters and loaders: their execs are never denied (the
    /// script or program they run is decided after it starts).
    public var interpreterIdentities: Set<String>

    public init(
        users: [UInt32: User] = [:], subordinates: [OwnedSubordinateRange] = [],
        catalog: AppCatalog = AppCatalog([]), claims: IdentityClaims = IdentityClaims(),
        interpreterIdentities: Set<String> = []
    ) {
        self.users = users
        self.subordinates = subordinates
        self.catalog = catalog
        self.claims = claims
        self.interpreterIdentities = interpreterIdentities
    }

    /// Whether nothing is denied to anyone: then every exec is allowed at once.
    public var isEmpty: Bool { users.isEmpty }

    /// The managed user (by uid) a process of real uid `uid` belongs to, if any has something denied.
    public func owner(of uid: UInt32) -> UInt32? {
        if users[uid] != nil { return uid }
        for owned in subordinates where owned.range.contains(uid) { return users[owned.ownerUID] != nil ? owned.ownerUID : nil }
        return nil
    }

    /// Whether the exec of the file at `path` (with its known identities; empty when not known yet)
    /// by a process of `uid` is denied, and as which app. An interpreter's or loader's exec never is (by
    /// identity, or by name for a file of root's: `fileOwner`, nil when not known).
    public func denial(uid: UInt32, path: String, identities: [String], fileOwner: UInt32? = nil) -> Denial? {
        guard let owner = owner(of: uid), let user = users[owner] else { return nil }
        if catalog.interpreters.isInterpreter(path, owner: fileOwner) || identities.contains(where: interpreterIdentities.contains) {
            return nil
        }
        let facts = ProcessFacts(
            executablePath: path, fileIdentity: identities.first { $0.hasPrefix("sha256:") },
            buildID: identities.first { $0.hasPrefix("build-id:") })
        let rules = user.rules
        let match = catalog.resolve(facts, claimed: claims.apps(claiming: identities, uid: owner), isInterpreter: false) {
            rules[$0]?.strictness ?? AppRuleKind.noRuleStrictness
        }
        guard let reason = user.denied[match.app] else { return nil }
        return Denial(user: user.name, app: match.app, reason: reason)
    }

    /// The apps an exec could be, for the plan that says which must not run now: every catalog app
    /// and every app a rule of `policy` names (the plan's `stopApps` for a user running all of them).
    public static func candidates(policy: Policy, catalog: AppCatalog) -> Set<String> {
        var candidates = Set(catalog.definitions.map(\.name))
        for rule in policy.apps { candidates.insert(rule.app) }
        return candidates
    }
}
