import CurfewCore
import Foundation
import Glibc
import Testing

@testable import CurfewLinux

@Suite struct CPUTimeTests {
    /// The sampler reads a process's CPU time (`/proc/PID/stat` utime + stime): ours grows by what we
    /// burn, and a PID whose start time does not match is another process.
    @Test func cpuTimeOfARealProcessGrowsWithItsWork() throws {
        let sampler = ProcessSampler()
        _ = sampler.sample()
        let me = try #require(sampler.cached[getpid()])
        let ref = ProcessRef(pid: me.pid, startTime: me.startTime)
        let before = try #require(sampler.cpuMilliseconds(of: ref))
        // Burn 300 ms of this process's CPU time (however loaded the machine is).
        func cpuNow() -> Int64 {
            var spec = timespec()
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &spec)
            return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
        }
        let start = cpuNow()
        var sink: UInt64 = 0
        while cpuNow() - start < 300 { for step in 0..<10_000 { sink &+= UInt64(step) ^ sink } }
        #expect(sink != 1)
        let after = try #require(sampler.cpuMilliseconds(of: ref))
        #expect(after - before >= 250 && after - before <= 5_000, "before \(before) ms, after \(after) ms")
        #expect(sampler.cpuMilliseconds(of: ProcessRef(pid: me.pid, startTime: me.startTime + 1)) == nil)
    }

    @Test func statParsingAddsUserAndSystemTime() throws {
        let line = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 123456 1000 10 0\n"
        let stat = try #require(Array(line.utf8).withUnsafeBytes { ProcFiles.parseStat($0) })
        #expect(stat.cpuTicks == 325 && stat.startTime == 123456 && stat.threads == 3 && stat.comm == "a (b) c")
    }
}
