import CurfewCore
import Foundation
import Glibc
import Testing

@testable import CurfewLinux

/// App identity: build-ids read from real ELF files, and /proc/PID/maps.
@Suite struct ExecutableIdentityTests {
    /// `readelf -n`'s build-id of `path`.
    static func readelfBuildID(_ path: String) throws -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/readelf")
        process.arguments = ["-n", path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard let line = output.split(separator: "\n").first(where: { $0.contains("Build ID:") }) else { return nil }
        return "build-id:" + line.split(separator: " ").last!
    }

    static func buildID(ofFile path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return ElfBuildID.read(fd: fd)
    }

    @Test(arguments: ["/bin/sleep", "/bin/sh", "/bin/bash", "/usr/bin/env", "/lib64/ld-linux-x86-64.so.2", "/usr/lib/x86_64-linux-gnu/libc.so.6"])
    func buildIDsOfRealFilesAreWhatReadelfSays(_ path: String) throws {
        let expected = try Self.readelfBuildID(path)
        #expect(expected != nil, "readelf finds a build-id in \(path)")
        #expect(Self.buildID(ofFile: path) == expected)
    }

    @Test func notELFOrNoBuildIDIsNil() throws {
        #expect(Self.buildID(ofFile: "/etc/passwd") == nil)
        #expect(Self.buildID(ofFile: "/dev/null") == nil)
        // An ELF header claiming a huge program header table is refused, not read.
        var header = [UInt8](repeating: 0, count: 64)
        header[0...3] = [0x7f, 0x45, 0x4c, 0x46]
        header[4] = 2
        header[5] = 1
        header[54] = 56
        header[56] = 0xff
        header[57] = 0xff
        #expect(ElfBuildID.parse(header: header) { _, _ in Issue.record("read past the bound"); return nil } == nil)
    }

    /// A file whose 256 program headers each point at the same 64 KiB of empty notes (the exec guard
    /// flood of docs/security.md) costs one 64 KiB read of notes, not 256.
    @Test func noteSegmentsAreReadWithinOneBoundForTheWholeFile() {
        var header = [UInt8](repeating: 0, count: 64)
        header[0...7] = [0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]
        header[32] = 64  // e_phoff
        header[54] = 56  // e_phentsize
        header[56] = 0  // e_phnum: 256
        header[57] = 1
        var table = [UInt8](repeating: 0, count: 256 * 56)
        for index in 0..<256 {
            table[index * 56] = 4  // PT_NOTE
            table[index * 56 + 8 + 2] = 1  // p_offset 65,536
            table[index * 56 + 32 + 2] = 1  // p_filesz 65,536
        }
        var noteBytes = 0
        var reads = 0
        let found = ElfBuildID.parse(header: header) { offset, count in
            if offset == 64 { return count == table.count ? table : nil }
            reads += 1
            noteBytes += count
            return [UInt8](repeating: 0, count: count)
        }
        #expect(found == nil)
        #expect(noteBytes <= ElfBuildID.maxNoteBytes && reads <= ElfBuildID.maxNoteSegments, "\(reads) reads, \(noteBytes) bytes")
    }

    @Test func aCopyWithAByteAppendedKeepsItsBuildIDNotItsHash() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ident-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let copy = directory.appendingPathComponent("renamed").path
        var bytes = try Data(contentsOf: URL(fileURLWithPath: "/bin/sleep"))
        bytes.append(0x2a)
        try bytes.write(to: URL(fileURLWithPath: copy))
        let cache = FileIdentityCache()
        let original = try #require(cache.identities(ofFile: "/bin/sleep"))
        let modified = try #require(cache.identities(ofFile: copy))
        #expect(original.buildID != nil)
        #expect(modified.buildID == original.buildID)
        #expect(modified.contentHash != original.contentHash)
        #expect(original.owner == 0)
        #expect(modified.all.count == 2)
    }

    @Test func mapsParse() {
        let text = """
            55d0c0a00000-55d0c0a02000 r--p 00000000 fe:00 254651                     /usr/bin/sleep
            7f8520f5a000-7f8520f80000 r--p 00000000 fe:00 333151                     /usr/lib/x86_64-linux-gnu/libc.so.6
            7f8520f80000-7f85210d6000 r-xp 00026000 fe:00 333151                     /usr/lib/x86_64-linux-gnu/libc.so.6
            7f852113c000-7f852113d000 r--p 00000000 fe:00 323411                     /usr/lib/locale/C.utf8/LC_MEASUREMENT
            7f8521147000-7f8521149000 r--p 00000000 fe:00 254651                     /home/kid/my game (1)
            7f8521149000-7f852114e000 r-xp 00002000 fe:00 254651                     /home/kid/my game (1)
            7f8521150000-7f8521151000 r-xp 00000000 00:01 4242                       /memfd:game (deleted)
            7f852115a000-7f852115b000 r--p 00000000 fe:00 332717                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
            7f852115b000-7f8521181000 r-xp 00001000 fe:00 332717                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
            7f85211a0000-7f85211a4000 rw-p 00000000 00:00 0
            7ffc60692000-7ffc606b3000 rw-p 00000000 00:00 0                          [stack]
            not a line
            """
        let mappings = MemoryMapping.parse(text)
        #expect(mappings.count == 11)
        #expect(mappings[4].path == "/home/kid/my game (1)")
        #expect(mappings[5].executable && !mappings[4].executable)
        #expect(mappings[5].range == "7f8521149000-7f852114e000")
        #expect(mappings[6].path == "/memfd:game (deleted)" && mappings[6].inode == 4242)
        #expect(!mappings[9].isFile && !mappings[10].isFile)
        // The program the loader mapped: the highest executable file mapping that is not the loader.
        #expect(MemoryMapping.programRunByLoader(mappings, loaderInode: 332717)?.path == "/memfd:game (deleted)")
        #expect(MemoryMapping.programRunByLoader(Array(mappings.prefix(6)) + mappings[7...], loaderInode: 332717)?.path == "/home/kid/my game (1)")
        // Only the loader mapped yet.
        #expect(MemoryMapping.programRunByLoader(Array(mappings[7...]), loaderInode: 332717) == nil)
    }

    /// `setarch -L`: mappings go bottom up and libc lies above the program, which the system's
    /// libraries being set aside still finds.
    @Test func theLegacyLayoutStillNamesTheProgram() {
        let text = """
            2b46be55a000-2b46be580000 r-xp 00001000 fe:00 332717                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
            2b46be598000-2b46be59d000 r-xp 00002000 fe:00 254651                     /usr/bin/sleep
            2b46be5d2000-2b46be728000 r-xp 00026000 fe:00 333151                     /usr/lib/x86_64-linux-gnu/libc.so.6
            """
        let mappings = MemoryMapping.parse(text)
        let systemLibrary = { (mapping: MemoryMapping) in MemoryMapping.hasLibraryName(mapping.path) }
        #expect(MemoryMapping.programRunByLoader(mappings, loaderInode: 332717, isSystemLibrary: systemLibrary)?.path == "/usr/bin/sleep")
        // libc itself run by the loader: the only candidate.
        #expect(
            MemoryMapping.programRunByLoader([mappings[0], mappings[2]], loaderInode: 332717, isSystemLibrary: systemLibrary)?.path
                == "/usr/lib/x86_64-linux-gnu/libc.so.6")
        #expect(MemoryMapping.hasLibraryName("/usr/lib/x86_64-linux-gnu/libc.so.6"))
        #expect(MemoryMapping.hasLibraryName("/usr/lib/libfoo.so"))
        #expect(MemoryMapping.hasLibraryName("/usr/lib/libstdc++.so.6.0.30"))
        #expect(!MemoryMapping.hasLibraryName("/home/kid/game.sober"))
        #expect(!MemoryMapping.hasLibraryName("/usr/games/game"))
    }

    /// A real `ld.so PROGRAM`: the sampler reports the program, with its identity, and the loader.
    @Test func aProcessRunByTheLoaderIsTheProgram() throws {
        let sampler = ProcessSampler()
        sampler.isLoader = { path, _ in path.hasSuffix("ld-linux-x86-64.so.2") }
        let pid = try spawnProcess("/lib64/ld-linux-x86-64.so.2", ["/bin/sleep", "30"], options: SpawnOptions())
        defer {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        var process: TrackedProcess?
        let deadline = Date().addingTimeInterval(3)
        while Date() < deadline {
            process = sampler.refresh(pid: pid)
            if process?.facts.loader != nil { break }
            usleep(2_000)
        }
        let facts = try #require(process?.facts)
        #expect(facts.loader == "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
        #expect(facts.executablePath == "/usr/bin/sleep")
        #expect(facts.buildID == (try Self.readelfBuildID("/bin/sleep")))
        #expect(facts.fileIdentity == FileIdentityCache().identity(ofFile: "/bin/sleep"))
    }
}

@Suite struct DesktopEntriesTests {
    @Test func theProgramOfAnEntry() {
        #expect(DesktopEntries.program(of: "[Desktop Entry]\nType=Application\nName=Maps\nExec=gnome-maps %U\n") == "gnome-maps")
        #expect(DesktopEntries.program(of: "[Desktop Entry]\nType=Application\nExec=htop\nTerminal=true\n") == nil)
        #expect(DesktopEntries.program(of: "[Desktop Entry]\nType=Application\nExec=x\nNoDisplay=true\n") == nil)
        #expect(DesktopEntries.program(of: "[Desktop Entry]\nType=Link\nExec=x\n") == nil)
        #expect(DesktopEntries.program(of: "[Desktop Action new]\nExec=other\n[Desktop Entry]\nExec=main --new\n") == "main")
    }

    @Test func entriesOfADirectory() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("desktop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data("[Desktop Entry]\nType=Application\nExec=/usr/bin/gedit %U\n".utf8)
            .write(to: directory.appendingPathComponent("org.gnome.gedit.desktop"))
        try Data("[Desktop Entry]\nType=Application\nExec=htop\nTerminal=true\n".utf8)
            .write(to: directory.appendingPathComponent("htop.desktop"))
        try Data("not a desktop file".utf8).write(to: directory.appendingPathComponent("README"))
        #expect(DesktopEntries.load(directories: [directory.path, "/nonexistent"]) == ["gedit": "org.gnome.gedit"])
    }
}

/// A loader that maps its program late: looked at quickly, then every tick, until it does.
@Suite struct LoaderLooksTests {
    @Test func aLoaderIsLookedAtUntilItsProgramIsMapped() throws {
        let root = ProcTestDirectory()
        let game = try root.copyExecutable("/bin/sleep", to: "games/game")
        try root.write("loadavg", "0.00 0.00 0.00 1/3 300\n")
        let loader = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
        try root.writeProcess(
            FakeProcess(pid: 100, startTime: 5000, comm: "ld-linux-x86-64", commandLine: [loader, game], executable: loader))
        // The loader's own mapping carries its real inode, which is how it is told from the program.
        var status = stat()
        #expect(stat(loader, &status) == 0)
        let loaderLine = "7f852115b000-7f8521181000 r-xp 00001000 fe:00 \(status.st_ino) \(loader)\n"
        try root.write("100/maps", loaderLine)
        let sampler = ProcessSampler(procRoot: root.path)
        sampler.isLoader = { path, _ in path.hasSuffix("ld-linux-x86-64.so.2") }
        _ = sampler.sample()
        #expect(sampler.cached[100]?.facts.executablePath == loader, "nothing mapped yet: the loader itself")
        #expect(sampler.unresolvedLoaders[100] != nil)
        for _ in 0..<60 { sampler.lookAgainAtLoaders() }
        #expect(sampler.unresolvedLoaders.isEmpty && sampler.slowLoaders == [100], "past its quick looks: slow")
        sampler.lookAgainAtSlowLoaders()
        #expect(sampler.slowLoaders == [100] && sampler.unresolvedLoaders.isEmpty, "still unmapped: stays slow, not quick")
        // The program is mapped at last.
        try root.write("100/maps", "7f8521149000-7f852114e000 r-xp 00002000 fe:00 4242 \(game)\n" + loaderLine)
        #expect(sampler.lookAgainAtSlowLoaders())
        let facts = try #require(sampler.cached[100]?.facts)
        #expect(facts.executablePath == game && facts.loader == loader)
        #expect(facts.fileIdentity == FileIdentityCache().identity(ofFile: game))
        #expect(sampler.slowLoaders.isEmpty && sampler.unresolvedLoaders.isEmpty)
    }
}
