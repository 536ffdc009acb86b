import CurfewPOSIX
import CurfewCore
import Glibc

/// The GNU build-id of an ELF file: the `NT_GNU_BUILD_ID` note the linker writes into a `PT_NOTE`
/// segment (elf(5)). It names the build, not the bytes: a renamed copy, a copy with bytes appended
/// and one run from a memfd keep it, while the content hash changes.
enum ElfBuildID {
    /// At most this much of the note segments is read, all of them together: a file whose headers
    /// point at the same 64 KiB of empty notes 256 times costs no more than one that points once.
    static let maxNoteBytes = 64 * 1024
    /// At most this many program headers are looked at, this many note segments read and this many
    /// notes parsed (a linker writes two to four of each).
    static let maxProgramHeaders = 256
    static let maxNoteSegments = 16
    static let maxNotes = 256

    /// `build-id:<hex>` of the ELF file open as `fd` (read with pread); nil when it is not an ELF
    /// file or has no build-id of 8 to 64 bytes.
    static func read(fd: Int32) -> String? {
        var header = [UInt8](repeating: 0, count: 64)
        guard preadFully(fd, &header, offset: 0) else { return nil }
        return parse(header: header) { offset, count in
            var bytes = [UInt8](repeating: 0, count: count)
            return preadFully(fd, &bytes, offset: offset) ? bytes : nil
        }
    }

    /// The build-id of an ELF file whose first 64 bytes are `header`; `read(offset, count)` gives
    /// other bytes of the file (nil if they are not there). Nothing in the file is trusted: sizes are
    /// bounded and checked before use.
    static func parse(header: [UInt8], read: (_ offset: Int, _ count: Int) -> [UInt8]?) -> String? {
        guard header.count >= 52, header[0] == 0x7f, header[1] == UInt8(ascii: "E"), header[2] == UInt8(ascii: "L"),
            header[3] == UInt8(ascii: "F")
        else { return nil }
        let is64: Bool
        switch header[4] {
        case 1: is64 = false
        case 2: is64 = true
        default: return nil
        }
        let little: Bool
        switch header[5] {
        case 1: little = true
        case 2: little = false
        default: return nil
        }
        guard !is64 || header.count >= 64 else { return nil }
        func number(_ bytes: [UInt8], _ at: Int, _ size: Int) -> Int? {
            guard at >= 0, at + size <= bytes.count else { return nil }
            var value: UInt64 = 0
            for index in 0..<size {
                let byte = UInt64(bytes[little ? at + size - 1 - index : at + index])
                value = value << 8 | byte
            }
            return value > UInt64(Int.max) ? nil : Int(value)
        }
        guard let programHeaders = number(header, is64 ? 32 : 28, is64 ? 8 : 4),
            let entrySize = number(header, is64 ? 54 : 42, 2),
            let entryCount = number(header, is64 ? 56 : 44, 2),
            entrySize >= (is64 ? 56 : 32), entryCount > 0, entryCount <= maxProgramHeaders,
            let table = read(programHeaders, entrySize * entryCount)
        else { return nil }
        var noteBytesLeft = maxNoteBytes
        var segmentsLeft = maxNoteSegments
        var notesLeft = maxNotes
        for index in 0..<entryCount where segmentsLeft > 0 && noteBytesLeft >= 12 && notesLeft > 0 {
            let entry = index * entrySize
            guard number(table, entry, 4) == 4 else { continue }  // PT_NOTE
            guard let offset = number(table, entry + (is64 ? 8 : 4), is64 ? 8 : 4),
                let size = number(table, entry + (is64 ? 32 : 16), is64 ? 8 : 4),
                size >= 12
            else { continue }
            segmentsLeft -= 1
            let count = min(size, noteBytesLeft)
            noteBytesLeft -= count
            guard let notes = read(offset, count) else { continue }
            var position = 0
            while position + 12 <= notes.count && notesLeft > 0 {
                notesLeft -= 1
                guard let nameSize = number(notes, position, 4), let descriptionSize = number(notes, position + 4, 4),
                    let type = number(notes, position + 8, 4)
                else { break }
                let name = position + 12
                let description = name + (nameSize + 3) / 4 * 4
                let next = description + (descriptionSize + 3) / 4 * 4
                guard nameSize <= notes.count, descriptionSize <= notes.count, next <= notes.count else { break }
                if type == 3, nameSize == 4, notes[name..<(name + 4)].elementsEqual([0x47, 0x4e, 0x55, 0]),  // "GNU\0"
                    (8...64).contains(descriptionSize)
                {
                    return "build-id:" + hexString(notes[description..<(description + descriptionSize)])
                }
                position = next
            }
        }
        return nil
    }

    private static func preadFully(_ fd: Int32, _ bytes: inout [UInt8], offset: Int) -> Bool {
        guard offset >= 0 else { return false }
        var done = 0
        while done < bytes.count {
            let read = valueOrErrno {
                bytes.withUnsafeMutableBytes { buffer in pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done)) }
            }
            guard case .success(let count) = read, count > 0 else { return false }
            done += count
        }
        return true
    }
}

/// One line of `/proc/PID/maps` (proc(5)): `start-end perms offset dev inode path`.
struct MemoryMapping: Equatable {
    var start: UInt64
    var end: UInt64
    var executable: Bool
    var offset: UInt64
    var inode: UInt64
    /// The file, or `[heap]`, `[stack]`, ...; empty for anonymous memory. A deleted file ends in
    /// ` (deleted)`; a memfd reads `/memfd:NAME (deleted)`.
    var path: String

    /// The `map_files` entry name of this mapping, `start-end` in lowercase hex.
    var range: String { String(start, radix: 16) + "-" + String(end, radix: 16) }

    var isFile: Bool { inode != 0 && path.hasPrefix("/") }

    /// Parses the whole file; lines that do not parse are skipped.
    static func parse(_ text: String) -> [MemoryMapping] {
        var mappings: [MemoryMapping] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            // Five fields separated by single spaces, then padding, then the path (which may hold spaces).
            var fields: [Substring] = []
            var rest = line[...]
            while fields.count < 5, let space = rest.firstIndex(of: " ") {
                fields.append(rest[..<space])
                rest = rest[rest.index(after: space)...]
            }
            if fields.count < 5 {
                guard fields.count == 4, !rest.isEmpty else { continue }
                fields.append(rest)
                rest = ""
            }
            let bounds = fields[0].split(separator: "-")
            guard bounds.count == 2, let start = UInt64(bounds[0], radix: 16), let end = UInt64(bounds[1], radix: 16),
                fields[1].count == 4, let offset = UInt64(fields[2], radix: 16), let inode = UInt64(fields[4])
            else { continue }
            let path = rest.drop(while: { $0 == " " })
            mappings.append(
                MemoryMapping(
                    start: start, end: end, executable: fields[1].dropFirst(2).first == "x", offset: offset, inode: inode,
                    path: String(path)))
        }
        return mappings
    }

    /// The program the dynamic loader runs (`ld.so PROGRAM`): the loader maps it before anything
    /// else, and mappings are placed top down, so it is the file-backed executable mapping at the
    /// highest address that is not the loader itself (libraries and later mappings lie below it).
    /// Under the legacy layout (`setarch -L`, which any user may ask for) mappings go bottom up and
    /// libc lies above the program: the system's own shared libraries (`isSystemLibrary`: root's files
    /// named like one, `libc.so.6`) are never taken for the program while another candidate is
    /// mapped. nil while the loader has not mapped it yet.
    static func programRunByLoader(
        _ mappings: [MemoryMapping], loaderInode: UInt64, isSystemLibrary: (MemoryMapping) -> Bool = { _ in false }
    ) -> MemoryMapping? {
        let candidates = mappings.filter { $0.isFile && $0.executable && $0.inode != loaderInode }
        let programs = candidates.filter { !isSystemLibrary($0) }
        return (programs.isEmpty ? candidates : programs).max { $0.start < $1.start }
    }

    /// Whether the file's name is a shared library's: `NAME.so` or `NAME.so.VERSION` (`libc.so.6`): a
    /// `so` part after a non-empty start, followed only by parts of ASCII digits.
    static func hasLibraryName(_ path: String) -> Bool {
        let parts = (path.split(separator: "/").last ?? Substring(path)).split(separator: ".", omittingEmptySubsequences: false)
        return parts.indices.dropFirst().contains { index in
            parts[index] == "so" && !(index == 1 && parts[0].isEmpty)
                && parts[(index + 1)...].allSatisfy { $0.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } }
        }
    }
}
