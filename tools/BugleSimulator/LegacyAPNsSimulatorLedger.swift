import Crypto
import Foundation
import NIOConcurrencyHelpers

/// The legacy simulator's shared mutable state: accepted records, counters, the fault counter, the
/// feedback list and the optional JSONL record file, all behind one `NIOLockedValueBox`. No lock is held
/// across I/O other than a buffered append to the record file.
final class LegacyAPNsSimulatorLedger: Sendable {
    /// What the gateway does after accepting a notification.
    enum Fault: Equatable {
        case shutdown
        case silentClose
    }

    private struct State {
        var records: [LegacyAPNsRecord] = []
        var counters = LegacyAPNsSimulatorCounters()
        var feedback: [(time: UInt32, token: [UInt8])] = []
        var nextConnectionID = 0
    }

    private let state: NIOLockedValueBox<State>
    private let keepRecords: Bool
    private let faults: LegacyAPNsSimulatorConfiguration.Faults
    private let wallClock: @Sendable () -> Double
    private let recordFile: SimulatorRecordFile?

    /// Creates the ledger.
    /// - Parameters:
    ///   - configuration: Faults, record keeping and the clock.
    /// - Throws: When the record file cannot be opened.
    init(configuration: LegacyAPNsSimulatorConfiguration) throws {
        self.recordFile = try configuration.recordFile.map { try SimulatorRecordFile(path: $0) }
        self.state = NIOLockedValueBox(State())
        self.keepRecords = configuration.keepRecordsInMemory
        self.faults = configuration.faults
        self.wallClock = configuration.wallClock
    }

    /// Records an accepted notification and decides the injected fault, if any.
    /// - Parameters:
    ///   - notification: The notification.
    ///   - connectionID: The connection that carried it.
    ///   - uninstalled: The token joins the feedback list.
    /// - Returns: The fault to inject after it, or nil.
    func accept(_ notification: LegacyAPNsFrameParser.Notification, connectionID: Int, uninstalled: Bool) -> Fault? {
        let now = wallClock()
        let record = LegacyAPNsRecord(
            token: Self.hex(notification.token),
            command: Int(notification.command),
            identifier: notification.identifier,
            expiry: notification.expiry,
            priority: Int(notification.priority ?? 10),
            payloadSHA256: Self.hex(Array(SHA256.hash(data: notification.payload))),
            time: now,
            connectionID: connectionID
        )
        let keep = keepRecords
        let faults = self.faults
        let fault = state.withLockedValue { state -> Fault? in
            state.counters.accepted += 1
            state.counters.packetsByCommand[Int(notification.command), default: 0] += 1
            if keep { state.records.append(record) }
            if uninstalled { state.feedback.append((UInt32(clamping: Int64(now)), notification.token)) }
            var fault: Fault?
            if let every = faults.shutdownEvery, every > 0, state.counters.accepted % every == 0 {
                fault = .shutdown
                state.counters.shutdownsSent += 1
            } else if let every = faults.silentCloseEvery, every > 0, state.counters.accepted % every == 0 {
                fault = .silentClose
                state.counters.silentCloses += 1
            }
            return fault
        }
        recordFile?.append(record)
        return fault
    }

    /// Counts a refused packet.
    /// - Parameters:
    ///   - command: Its command.
    ///   - status: The status it got (or would have got, for command 0).
    func reject(command: UInt8, status: UInt8) {
        state.withLockedValue {
            $0.counters.rejectedByStatus[Int(status), default: 0] += 1
            $0.counters.packetsByCommand[Int(command), default: 0] += 1
        }
    }

    /// Applies a change to the counters.
    /// - Parameter body: The change.
    func updateCounters(_ body: (inout LegacyAPNsSimulatorCounters) -> Void) {
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

    /// Adds a tuple to the feedback list.
    /// - Parameters:
    ///   - token: The binary token.
    ///   - time: UNIX seconds when the app was seen gone.
    func queueFeedback(token: [UInt8], time: UInt32) {
        state.withLockedValue { $0.feedback.append((time, token)) }
    }

    /// Takes the whole feedback list (the service empties it once read).
    func takeFeedback() -> [(time: UInt32, token: [UInt8])] {
        state.withLockedValue { state in
            defer { state.feedback.removeAll() }
            state.counters.feedbackConnections += 1
            state.counters.feedbackTuplesSent += state.feedback.count
            return state.feedback
        }
    }

    /// The feedback list without emptying it.
    func peekFeedback() -> [(time: UInt32, token: [UInt8])] { state.withLockedValue { $0.feedback } }

    /// A snapshot of the accepted records.
    func records() -> [LegacyAPNsRecord] { state.withLockedValue { $0.records } }

    /// A snapshot of the counters.
    func counters() -> LegacyAPNsSimulatorCounters { state.withLockedValue { $0.counters } }

    /// Writes buffered JSONL lines to the record file.
    func flush() {
        recordFile?.flush()
    }

    /// Flushes and closes the record file.
    func close() {
        recordFile?.close()
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
