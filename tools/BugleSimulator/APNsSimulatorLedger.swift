import Foundation
import NIOConcurrencyHelpers

/// The simulator's shared mutable state: accepted records, counters, the seeded random generator and the
/// optional JSONL record file. Everything sits behind one `NIOLockedValueBox`; no lock is held across I/O
/// other than a buffered append to the record file.
final class APNsSimulatorLedger: Sendable {
    private struct State {
        var records: [APNsRecord] = []
        var rejections: [APNsRejection] = []
        var counters = APNsSimulatorCounters()
        var random: SplitMix64
        var nextConnectionID = 0
    }

    private let state: NIOLockedValueBox<State>
    private let keepRecords: Bool
    private let recordFile: SimulatorRecordFile?

    /// Creates the ledger.
    /// - Parameters:
    ///   - seed: Seed of the fault generator.
    ///   - keepRecords: Keep records in memory.
    ///   - recordFile: Optional JSONL file (appended).
    /// - Throws: When the record file cannot be opened.
    init(seed: UInt64, keepRecords: Bool, recordFile: String?) throws {
        self.recordFile = try (recordFile).map { try SimulatorRecordFile(path: $0) }
        self.state = NIOLockedValueBox(State(random: SplitMix64(seed: seed)))
        self.keepRecords = keepRecords
    }

    /// Draws a uniform random number in 0..<1 from the seeded generator.
    func nextUnitRandom() -> Double {
        state.withLockedValue { state in
            Double(state.random.next() >> 11) * 0x1.0p-53
        }
    }

    /// Records an accepted notification.
    /// - Parameter record: The record.
    func recordAccepted(_ record: APNsRecord) {
        let keep = keepRecords
        state.withLockedValue { state in
            state.counters.accepted += 1
            if keep { state.records.append(record) }
        }
        recordFile?.append(record)
    }

    /// Counts an error answer, and keeps it when records are kept in memory.
    /// - Parameter rejection: The answer.
    func recordRejected(_ rejection: APNsRejection) {
        let keep = keepRecords
        state.withLockedValue { state in
            state.counters.rejectedByReason[rejection.reason, default: 0] += 1
            if keep { state.rejections.append(rejection) }
        }
    }

    /// A snapshot of the error answers kept.
    func rejections() -> [APNsRejection] { state.withLockedValue { $0.rejections } }

    /// Applies a change to the counters.
    /// - Parameter body: The change.
    func updateCounters(_ body: (inout APNsSimulatorCounters) -> Void) {
        state.withLockedValue { body(&$0.counters) }
    }

    /// Allocates the next connection id and counts the connection.
    func connectionOpened() -> Int {
        state.withLockedValue { state in
            state.nextConnectionID += 1
            state.counters.connections += 1
            state.counters.openConnections += 1
            return state.nextConnectionID
        }
    }

    /// A snapshot of the accepted records.
    func records() -> [APNsRecord] { state.withLockedValue { $0.records } }

    /// A snapshot of the counters.
    func counters() -> APNsSimulatorCounters { state.withLockedValue { $0.counters } }

    /// Writes buffered JSONL lines to the record file.
    func flush() {
        recordFile?.flush()
    }

    /// Flushes and closes the record file.
    func close() {
        recordFile?.close()
    }
}

/// SplitMix64: a tiny, fast, seedable generator (fault injection only, not cryptographic).
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
