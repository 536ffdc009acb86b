import Foundation
import Testing

@testable import CurfewLinux

/// The pages of the program's own file given back after startup (the agent's RSS, docs/performance.md).
struct ProgramPagesTests {
    /// Only the program's own mappings without write permission, from maps lines as the kernel writes them.
    @Test func theReadOnlyMappingsOfTheProgramAreChosen() {
        let maps = """
            55fa9174d000-55fa935b6000 r-xp 00000000 fe:00 5367407                    /usr/lib/curfew/curfew
            55fa935b7000-55fa93680000 r--p 01e69000 fe:00 5367407                    /usr/lib/curfew/curfew
            55fa93680000-55fa95b17000 rw-p 01f32000 fe:00 5367407                    /usr/lib/curfew/curfew
            55fa95b17000-55fa95c00000 rw-p 00000000 00:00 0                          [heap]
            7f0000000000-7f0000100000 r-xp 00000000 fe:00 42                         /usr/lib/x86_64-linux-gnu/libc.so.6
            7f0000200000-7f0000300000 r--p 00000000 fe:00 43                         /usr/lib/curfew/curfew-other
            7f0000400000-7f0000300000 r--p 00000000 fe:00 5367407                    /usr/lib/curfew/curfew
            garbage line
            """
        let ranges = ProgramPages.readOnlyRanges(maps: maps, program: "/usr/lib/curfew/curfew")
        #expect(ranges == [0x55fa_9174_d000..<0x55fa_935b_6000, 0x55fa_935b_7000..<0x55fa_9368_0000])
        // The libraries' instead: other files' private read-only mappings.
        let libraries = """
            \(maps)
            7f0000500000-7f0000600000 r--s 00000000 fe:00 44                         /usr/lib/shared-file
            7f0000600000-7f0000700000 r--p 00000000 00:05 45                         /dev/dri/card0
            7fff00000000-7fff00001000 r-xp 00000000 00:00 0                          [vdso]
            """
        #expect(
            ProgramPages.readOnlyRanges(maps: libraries, program: "/usr/lib/curfew/curfew", files: true) == [
                0x7f00_0000_0000..<0x7f00_0010_0000, 0x7f00_0020_0000..<0x7f00_0030_0000,
            ])
        // A path with blanks (the kernel pads before it, the name keeps its own).
        let spaced = "1000-2000 r-xp 00000000 fe:00 7          /opt/my apps/curfew\n"
        #expect(ProgramPages.readOnlyRanges(maps: spaced, program: "/opt/my apps/curfew") == [0x1000..<0x2000])
    }

    /// The kernel takes the advice for this very process (the test bundle's own read-only mappings),
    /// and the program keeps running the code it reclaimed.
    @Test func theKernelTakesTheAdviceAndTheProgramRunsOn() throws {
        let release = try ProgramPages.release()
        #expect(release.mappings >= 1)
        #expect(release.residentBeforeKiB > 0 && release.residentAfterKiB > 0)
        // The code it reclaimed comes back on use: the same code runs again.
        #expect(throws: Never.self) { try ProgramPages.release() }
    }
}

extension ProgramPagesTests {
    /// A mapping with pages of the process's own (relocated or written: `Anonymous` above 0) keeps
    /// them; one whose resident pages are all the file's may be dropped. From smaps as the kernel writes it.
    @Test func onlyMappingsWithNoPageOfTheirOwnAreDropped() {
        let smaps = """
            55fa9174d000-55fa935b6000 r-xp 00000000 fe:00 5367407                    /usr/lib/curfew/curfew
            Size:              30116 kB
            Rss:                8192 kB
            Anonymous:             0 kB
            VmFlags: rd ex mr mw me dw
            55fa935b7000-55fa93680000 r--p 01e69000 fe:00 5367407                    /usr/lib/curfew/curfew
            Size:                804 kB
            Anonymous:           804 kB
            VmFlags: rd mr mw me dw ac
            55fa93680000-55fa93690000 r--p 01f32000 fe:00 5367407                    /usr/lib/curfew/curfew
            Size:                 64 kB
            VmFlags: rd mr mw me dw
            """
        let ranges: [Range<UInt>] = [
            0x55fa_9174_d000..<0x55fa_935b_6000, 0x55fa_935b_7000..<0x55fa_9368_0000, 0x55fa_9368_0000..<0x55fa_9369_0000,
            0x1000..<0x2000,
        ]
        #expect(ProgramPages.withoutOwnPages(ranges, smaps: smaps) == [0x55fa_9174_d000..<0x55fa_935b_6000])
    }
}
