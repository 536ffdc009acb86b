import Testing

@testable import CurfewCore

@Suite struct SyncWaitTests {
    @Test(arguments: [
        (nil, 5.0), (0.0, 5.0), (-3.0, 5.0), (Double.nan, 5.0), (1.0, 5.0), (2.0, 7.0), (10.0, 23.0), (60.0, 123.0),
        (3600.0, 3600.0), (Double.infinity, 5.0),
    ] as [(Double?, Double)])
    func theDefaultWaitCoversTheWayOutAndBackPlusAMarginAndNeverLessThanFiveSeconds(delay: Double?, expected: Double) {
        #expect(SyncWait.defaultSeconds(syncDelaySeconds: delay) == expected)
    }

    @Test func aWaitIsTooShortBelowTwiceTheDelayPlusTheMargin() {
        #expect(SyncWait.isTooShort(5, syncDelaySeconds: 10))
        #expect(!SyncWait.isTooShort(23, syncDelaySeconds: 10))
        #expect(!SyncWait.isTooShort(5, syncDelaySeconds: 1))
        #expect(SyncWait.isTooShort(4.9, syncDelaySeconds: 1))
    }
}
