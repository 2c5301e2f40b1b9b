import Foundation
import NIOConcurrencyHelpers

/// The FCM simulator's shared mutable state: accepted records, the send-request log, counters, the quota
/// window, the seeded random generator, message ids and the optional JSONL record file. Everything sits
/// behind one `NIOLockedValueBox`; no lock is held across I/O other than a buffered append to the file.
final class FCMSimulatorLedger: Sendable {
    private struct State {
        var records: [FCMRecord] = []
        var requests: [FCMRequestEntry] = []
        var counters = FCMSimulatorCounters()
        var quota: FCMQuotaWindow
        var random: SplitMix64
        var nextConnectionID = 0
        var nextMessageNumber: UInt64 = 0
    }

    private let state: NIOLockedValueBox<State>
    private let keepRecords: Bool
    private let messageIDSalt: UInt64
    private let recordFile: SimulatorRecordFile?

    /// Creates the ledger.
    /// - Parameters:
    ///   - seed: Seed of the fault generator.
    ///   - quota: The empty quota window.
    ///   - keepRecords: Keep records and the request log in memory.
    ///   - recordFile: Optional JSONL file (appended).
    /// - Throws: When the record file cannot be opened.
    init(seed: UInt64, quota: FCMQuotaWindow, keepRecords: Bool, recordFile: String?) throws {
        self.recordFile = try (recordFile).map { try SimulatorRecordFile(path: $0) }
        var salt = SystemRandomNumberGenerator()
        self.messageIDSalt = salt.next()
        self.state = NIOLockedValueBox(State(quota: quota, random: SplitMix64(seed: seed)))
        self.keepRecords = keepRecords
    }

    /// Draws a uniform random number in 0..<1 from the seeded generator.
    func nextUnitRandom() -> Double {
        state.withLockedValue { state in
            Double(state.random.next() >> 11) * 0x1.0p-53
        }
    }

    /// A fresh message id in Google's shape (`0:<ms>%<16 hex>`), unique within this simulator.
    /// - Parameter now: Wall-clock seconds.
    func nextMessageID(now: Double) -> String {
        let number = state.withLockedValue { state -> UInt64 in
            state.nextMessageNumber += 1
            return state.nextMessageNumber
        }
        let hex = String(number ^ messageIDSalt, radix: 16)
        return "0:\(Int64(now * 1000))%" + String(repeating: "0", count: max(0, 16 - hex.count)) + hex
    }

    /// Reserves a quota slot (see ``FCMQuotaWindow``); counts a rejection when there is no room.
    /// - Parameter now: Wall-clock seconds.
    func reserveQuota(now: Double) -> FCMQuotaWindow.Decision {
        state.withLockedValue { state in
            let decision = state.quota.reserve(now: now)
            if case .exhausted = decision { state.counters.quotaRejections += 1 }
            return decision
        }
    }

    /// Commits (`counts == true`) or releases a reserved quota slot.
    /// - Parameters:
    ///   - counts: Whether the answer counts toward the quota.
    ///   - now: The reservation's time.
    func settleQuota(counts: Bool, now: Double) {
        state.withLockedValue { state in
            if counts {
                state.quota.commit(at: now)
            } else {
                state.quota.release()
            }
        }
    }

    /// Records an accepted message (and its send-request log entry).
    /// - Parameters:
    ///   - record: The record.
    ///   - entry: The request-log entry.
    func recordAccepted(_ record: FCMRecord, entry: FCMRequestEntry) {
        let keep = keepRecords
        state.withLockedValue { state in
            state.counters.sendRequests += 1
            state.counters.accepted += 1
            if keep {
                state.records.append(record)
                state.requests.append(entry)
            }
        }
        recordFile?.append(record)
    }

    /// Logs a send request that was not delivered (an error, a hang, or `validate_only`).
    /// - Parameter entry: The request-log entry; its `reason` is counted in `rejectedByReason` when the
    ///   status is not 200.
    func recordSendAnswer(_ entry: FCMRequestEntry) {
        let keep = keepRecords
        state.withLockedValue { state in
            state.counters.sendRequests += 1
            if entry.status == 200 {
                state.counters.validateOnly += 1
            } else if entry.status == 0 {
                state.counters.hung += 1
            } else if let reason = entry.reason {
                state.counters.rejectedByReason[reason, default: 0] += 1
                if entry.status == 401 && reason == "UNAUTHENTICATED" { state.counters.unauthenticated += 1 }
            }
            if keep { state.requests.append(entry) }
        }
    }

    /// Counts an error answer outside the send route (unknown path, wrong method).
    /// - Parameter reason: `NOT_FOUND` or `METHOD_NOT_ALLOWED`.
    func recordRouteError(_ reason: String) {
        state.withLockedValue { $0.counters.rejectedByReason[reason, default: 0] += 1 }
    }

    /// Counts a `POST /token` answer.
    /// - Parameter error: The OAuth error, or nil for a granted token.
    func recordTokenAnswer(error: String?) {
        state.withLockedValue { state in
            if let error {
                state.counters.tokenErrors[error, default: 0] += 1
            } else {
                state.counters.tokenGrants += 1
            }
        }
    }

    /// Applies a change to the counters.
    /// - Parameter body: The change.
    func updateCounters(_ body: (inout FCMSimulatorCounters) -> Void) {
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
    func records() -> [FCMRecord] { state.withLockedValue { $0.records } }

    /// A snapshot of the send-request log.
    func requests() -> [FCMRequestEntry] { state.withLockedValue { $0.requests } }

    /// A snapshot of the counters.
    func counters() -> FCMSimulatorCounters { state.withLockedValue { $0.counters } }

    /// Writes buffered JSONL lines to the record file.
    func flush() {
        recordFile?.flush()
    }

    /// Flushes and closes the record file.
    func close() {
        recordFile?.close()
    }
}
