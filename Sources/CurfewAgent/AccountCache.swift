import CurfewLinux

/// The accounts of the managed users, looked up through NSS at most every 30 s (or when the set of
/// users changes): loops that ask several times a second need not read the password database each time.
struct AccountCache {
    private(set) var accounts: [String: Accounts.Account?] = [:]
    private var readAt: Int64? = nil

    /// The cache brought up to date for `users` at `monotonic` milliseconds.
    mutating func refresh(for users: some Collection<String>, monotonic: Int64) {
        guard readAt.map({ monotonic - $0 > 30_000 }) ?? true || Set(users) != Set(accounts.keys) else { return }
        accounts = [:]
        // An account of uid 0 is never tracked or enforced, whatever name a record gave it.
        for user in users { accounts.updateValue(Accounts.account(named: user).flatMap { $0.uid == 0 ? nil : $0 }, forKey: user) }
        readAt = monotonic
    }

    subscript(user: String) -> Accounts.Account? { accounts[user] ?? nil }
}
