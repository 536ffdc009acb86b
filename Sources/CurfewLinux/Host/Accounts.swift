#if canImport(Glibc)
    import Glibc
    import CLinux
#endif

/// Account names and ids (getpwnam_r / getpwuid_r).
public enum Accounts {
    public struct Account: Sendable, Equatable {
        public var name: String
        public var uid: UInt32
        public var gid: UInt32
        public var home: String
    }

    public static func account(named name: String) -> Account? {
        lookup { pwd, buffer, size, result in getpwnam_r(name, &pwd, buffer, size, &result) }
    }

    public static func account(uid: UInt32) -> Account? {
        lookup { pwd, buffer, size, result in getpwuid_r(uid, &pwd, buffer, size, &result) }
    }

    /// Groups whose members administer the machine (sudo on Debian, wheel on Fedora and Arch, admin on
    /// older Ubuntu): managing one of them could lock a parent out of their own computer.
    public static let administratorGroups: Set<String> = ["sudo", "wheel", "admin"]

    /// The administrator groups `name` belongs to (primary group included), sorted; empty when none
    /// or when the account does not exist (getgrouplist).
    public static func administratorGroups(of name: String) -> [String] {
        guard let account = account(named: name) else { return [] }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        while getgrouplist(name, account.gid, &groups, &count) < 0 {
            groups = [gid_t](repeating: 0, count: Int(count))
        }
        return Set(groups.prefix(Int(count)).compactMap(groupName)).intersection(administratorGroups).sorted()
    }

    /// The name of group `gid` (getgrgid_r).
    public static func groupName(_ gid: gid_t) -> String? {
        let size = 65_536
        let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
        defer { buffer.deallocate() }
        var group = Glibc.group()
        var result: UnsafeMutablePointer<Glibc.group>? = nil
        guard getgrgid_r(gid, &group, buffer, size, &result) == 0, result != nil else { return nil }
        return String(cString: group.gr_name)
    }

    /// Whether `name` is an account with uid 0 (root, or another name for it such as toor): never managed.
    public static func isSuperuser(_ name: String) -> Bool {
        name == "root" || account(named: name)?.uid == 0
    }

    private static func lookup(
        _ call: (inout passwd, UnsafeMutablePointer<CChar>, Int, inout UnsafeMutablePointer<passwd>?) -> Int32
    ) -> Account? {
        let size = 16_384
        let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
        defer { buffer.deallocate() }
        var pwd = passwd()
        var result: UnsafeMutablePointer<passwd>? = nil
        // The strings in `pwd` point into `buffer`: copy them out before it is freed.
        guard call(&pwd, buffer, size, &result) == 0, result != nil else { return nil }
        return Account(
            name: String(cString: pwd.pw_name), uid: pwd.pw_uid, gid: pwd.pw_gid, home: String(cString: pwd.pw_dir))
    }
}
