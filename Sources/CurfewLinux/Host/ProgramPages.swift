import CurfewPOSIX
import Glibc
import SystemPackage

/// The pages of the program's own file that startup brought into memory.
///
/// The package's program is one static executable of about 120 MB (the Swift runtime, Foundation
/// and ICU inside; docs/performance.md). Starting up (arguments, the database, the catalog, the first listing
/// of /proc) runs code scattered over it, and each page fault maps the 64 KiB around it that the page
/// cache holds, after readahead of more: an idle agent had 26 MiB of its file resident of which it
/// referenced none over the next 20 s (`/proc/PID/clear_refs`, then `Referenced:` in smaps). Once
/// started, a long-running program (the agent, the child's indicator) asks the kernel to read its
/// code and read-only data at random from then on (`MADV_RANDOM`: no readahead, so a later fault
/// brings one page) and to reclaim what startup faulted in (`MADV_PAGEOUT`, Linux 5.4): the pages it
/// does use come back one by one as it runs. Writable mappings are left alone (their written pages
/// are the program's own memory, which would go to swap). Pages another process also maps (a
/// `curfew` command running the same file) stay where they are: the kernel skips them. The kernel
/// pages out a file's pages only for a process that could open the file for writing (its owner,
/// or root): the agent can; the child's indicator, running root's program as the child, cannot
/// (measured: 12 MiB of the program stayed resident). What stays of a mapping that holds none of the
/// process's own pages (smaps `Anonymous: 0 kB`: nothing relocated or written there) is then dropped
/// from the process's page tables (`MADV_DONTNEED`): a private mapping of a file that nobody wrote
/// reads the same bytes from the file again at the next touch, so the pages go back to the page
/// cache, shared and reclaimable, and leave the process's resident set.
public enum ProgramPages {
    /// What `release()` did: the mappings it advised, and the resident KiB of the process before and
    /// after (VmRSS).
    public struct Release: Sendable, Equatable {
        public var mappings: Int
        public var residentBeforeKiB: Int
        public var residentAfterKiB: Int
        /// The mappings whose resident pages were all the file's and were dropped: `drop(_:)` drops
        /// them again (they cannot gain pages of the process's own: none of them is writable).
        public var clean: [Range<UInt>] = []
    }

    /// Advises and reclaims the read-only mappings of `/proc/self/exe`. Throws the errno when the
    /// program's file or its mappings cannot be read, or the kernel refuses the advice (before 5.4:
    /// EINVAL).
    ///
    /// `withLibraries`: the shared libraries' read-only mappings too (libc, libstdc++, libsystemd in
    /// the package's build), for a process that runs as another user than the files' owner (the
    /// child's indicator): the page-out advice does nothing for it, and the drop gives back what those
    /// files' pages take of its resident set. The agent leaves libraries be (root could page out
    /// libc's pages for every process).
    public static func release(withLibraries: Bool = false) throws(Errno) -> Release {
        let program = try executablePath()
        guard let maps = SmallFile.read("/proc/self/maps", limit: 1 << 20) else { throw Errno.last }
        let text = String(decoding: maps, as: UTF8.self)
        let ranges = readOnlyRanges(maps: text, program: program)
        guard !ranges.isEmpty else { throw Errno.noSuchFileOrDirectory }
        let libraries = withLibraries ? readOnlyRanges(maps: text, program: program, files: true) : []
        let before = residentKiB()
        for range in ranges {
            guard let start = UnsafeMutableRawPointer(bitPattern: range.lowerBound) else { continue }
            let length = Int(range.upperBound - range.lowerBound)
            try Errno.check { madvise(start, length, MADV_RANDOM) }
            try Errno.check { madvise(start, length, pageOut) }
        }
        var clean: [Range<UInt>] = []
        if let smaps = SmallFile.read("/proc/self/smaps", limit: 8 << 20) {
            clean = withoutOwnPages(ranges + libraries, smaps: String(decoding: smaps, as: UTF8.self))
            try drop(clean)
        }
        return Release(mappings: ranges.count, residentBeforeKiB: before, residentAfterKiB: residentKiB(), clean: clean)
    }

    /// Drops the resident pages of `clean` (from `Release.clean`) from the process's page tables
    /// again. A fault on a file's page maps the pages around it that the page cache holds (up to
    /// 64 KiB, fault-around, whatever MADV_RANDOM says), so a few hundred faults of a status update
    /// leave megabytes of the program resident; a long-running program that sleeps between updates
    /// (the child's indicator) drops them after each. One madvise a mapping, no reading of /proc.
    public static func drop(_ clean: [Range<UInt>]) throws(Errno) {
        for range in clean {
            guard let start = UnsafeMutableRawPointer(bitPattern: range.lowerBound) else { continue }
            try Errno.check { madvise(start, Int(range.upperBound - range.lowerBound), MADV_DONTNEED) }
        }
    }

    /// Those of `ranges` that `/proc/PID/smaps` shows with `Anonymous: 0 kB`: every resident page
    /// is the file's. A mapping smaps does not list, or lists without the field, is left out.
    static func withoutOwnPages(_ ranges: [Range<UInt>], smaps: String) -> [Range<UInt>] {
        var clean: Set<UInt> = []
        var current: UInt? = nil
        for line in smaps.split(separator: "\n") {
            if line.hasPrefix("Anonymous:") {
                let value = line.dropFirst("Anonymous:".count).split(separator: " ").first
                if let current, value == "0" { clean.insert(current) }
                continue
            }
            // A mapping's first line: `start-end perms offset dev inode path`; field lines start with a name and ':'.
            guard let first = line.split(separator: " ", maxSplits: 1).first, !first.hasSuffix(":") else { continue }
            let bounds = first.split(separator: "-")
            current = bounds.count == 2 ? UInt(bounds[0], radix: 16) : nil
        }
        return ranges.filter { clean.contains($0.lowerBound) }
    }

    /// MADV_PAGEOUT (Linux 5.4, `<linux/mman.h>`; glibc's headers in Debian 12 name it too, Swift's
    /// Glibc module does not import it).
    static let pageOut: Int32 = 21

    /// The address ranges of `program`'s mappings without write permission, from `/proc/PID/maps`
    /// lines (`start-end perms offset dev inode path`).
    /// With `files`, those of every other regular file instead (a path, not under /dev).
    static func readOnlyRanges(maps: String, program: String, files: Bool = false) -> [Range<UInt>] {
        var ranges: [Range<UInt>] = []
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count == 6, fields[1].count == 4, fields[1].dropFirst().first == "-" else { continue }
            let path = fields[5].trimmingLeadingBlanks
            if files {
                // A private mapping of a file (a device's pages are not the page cache's).
                guard path != program, path.hasPrefix("/"), !path.hasPrefix("/dev/"), fields[1].last == "p" else { continue }
            } else {
                guard path == program else { continue }
            }
            let bounds = fields[0].split(separator: "-")
            guard bounds.count == 2, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16), start < end
            else { continue }
            ranges.append(start..<end)
        }
        return ranges
    }

    /// The path of the running program as the kernel names it in `/proc/self/maps`.
    static func executablePath() throws(Errno) -> String { try linkTarget("/proc/self/exe") }

    /// VmRSS of this process in KiB (0 when unreadable).
    static func residentKiB() -> Int {
        guard let status = SmallFile.read("/proc/self/status", limit: 16_384) else { return 0 }
        for line in String(decoding: status, as: UTF8.self).split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.dropFirst(6).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") ?? 0
        }
        return 0
    }
}

extension Substring {
    fileprivate var trimmingLeadingBlanks: Substring { drop(while: { $0 == " " }) }
}

/// What the symbolic link at `path` names (`readlink`, up to PATH_MAX bytes).
func linkTarget(_ path: String) throws(Errno) -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = try Errno.check { readlink(path, &buffer, buffer.count - 1) }
    return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
