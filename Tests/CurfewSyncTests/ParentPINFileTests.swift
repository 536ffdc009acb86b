import CurfewCore
import Foundation
import Testing

@testable import CurfewSync

@Suite struct ParentPINFileTests {
    /// RFC 7914, section 12, the second vector: scrypt("password", "NaCl", N=1024, r=8, p=16, 64 bytes).
    @Test func scryptMatchesRFC7914() throws {
        let derived = try ParentPINHash.derive("password", salt: Array("NaCl".utf8), cost: 1024, blockSize: 8, parallelism: 16, bytes: 64)
        #expect(
            hexString(derived)
                == "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b3731622eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640"
        )
    }

    @Test func theDailyMaximumIsKeptWithTheHash() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-pin-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let file = ParentPINFile(stateDirectory: root)
        let hash = try ParentPINHash.make(pin: "2468", cost: 1024, maxMinutesPerDay: 30)
        try file.store(hash)
        #expect(try file.load().maxMinutesPerDay == 30)
        #expect(String(decoding: hash.fileBytes, as: UTF8.self).contains(#""maxMinutesPerDay":30,"#))
        // A file written before there was a maximum has the default one.
        let salt = Data(hash.salt).base64EncodedString()
        let digest = Data(hash.hash).base64EncodedString()
        let older = #"{"N":1024,"algorithm":"scrypt","hash":"\#(digest)","p":1,"r":8,"salt":"\#(salt)"}"#
        try Files.writeAtomically(Array(older.utf8), directory: root, name: ParentPINHash.fileName, mode: 0o600)
        #expect(try file.load().maxMinutesPerDay == PINRules.defaultMaxMinutesPerDay)
        #expect(try file.load().matches("2468"))
        // A maximum out of range is a damaged file.
        for maximum in ["0", "481", "-5"] {
            let bad = #"{"N":1024,"algorithm":"scrypt","hash":"\#(digest)","maxMinutesPerDay":\#(maximum),"p":1,"r":8,"salt":"\#(salt)"}"#
            try Files.writeAtomically(Array(bad.utf8), directory: root, name: ParentPINHash.fileName, mode: 0o600)
            #expect(throws: ParentPINFile.LoadError.damaged(path: file.path)) { try file.load() }
        }
    }

    @Test func storesASaltedHashOnlyRootMayReadAndChecksIt() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("curfew-pin-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let file = ParentPINFile(stateDirectory: root)
        #expect(throws: ParentPINFile.LoadError.notSet) { try file.load() }
        let hash = try ParentPINHash.make(pin: "2468", cost: 1024)
        try file.store(hash)
        var info = stat()
        #expect(stat(file.path, &info) == 0)
        #expect(info.st_mode & 0o7777 == 0o600)
        let loaded = try file.load()
        #expect(loaded == hash)
        #expect(try loaded.matches("2468"))
        #expect(try !loaded.matches("2469"))
        #expect(try !loaded.matches("24680"))
        #expect(try !loaded.matches(""))
        // Another hash of the same PIN has another salt.
        #expect(try ParentPINHash.make(pin: "2468", cost: 1024).hash != hash.hash)
        // A damaged file is damaged, never "any PIN is right".
        for bytes in ["", "{}", #"{"algorithm":"scrypt","N":3,"r":8,"p":1,"salt":"AAAAAAAAAAA=","hash":"AAAA"}"#] {
            try Files.writeAtomically(Array(bytes.utf8), directory: root, name: ParentPINHash.fileName, mode: 0o600)
            #expect(throws: ParentPINFile.LoadError.damaged(path: file.path)) { try file.load() }
        }
        #expect(try file.remove())
        #expect(try !file.remove())
    }

    @Test func safeCompareComparesEveryByte() {
        #expect(safeCompare([1, 2, 3], [1, 2, 3]))
        #expect(!safeCompare([1, 2, 3], [1, 2, 4]))
        #expect(!safeCompare([1, 2, 3], [1, 2]))
        #expect(safeCompare([], []))
    }
}
