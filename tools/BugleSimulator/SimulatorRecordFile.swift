import Foundation
import NIOConcurrencyHelpers

/// The append-only JSON-lines file every simulator records accepted notifications to: records are encoded
/// outside the lock (sorted keys), buffered, and written in 64 KiB chunks and at least every 200 ms; ``flush()`` writes the rest.
final class SimulatorRecordFile: Sendable {
    private struct State {
        var pending: [UInt8] = []
        var file: FileHandle?
        /// Writes what is buffered every ``flushInterval``, so the file trails the simulator by at most that (a file
        /// read mid-run, by a test or by someone tailing it, used to lag by up to 64 KiB of records until the exit).
        var flusher: Task<Void, Never>?
    }

    private let state: NIOLockedValueBox<State>
    private let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
    private static let flushThreshold = 64 * 1024
    /// The longest a record waits in the buffer.
    static let flushInterval = Duration.milliseconds(200)

    /// Opens (creating if needed) `path` for appending.
    /// - Throws: ``SimulatorCertificates/Failure`` when it cannot be opened.
    init(path: String) throws {
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
        }
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw SimulatorCertificates.Failure(description: "cannot open record file \(path)")
        }
        handle.seekToEndOfFile()
        state = NIOLockedValueBox(State(file: handle))
        let flusher = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.flushInterval)
                guard let self else { return }
                self.flush()
            }
        }
        state.withLockedValue { $0.flusher = flusher }
    }

    /// Appends one record as a JSON line.
    func append(_ record: some Encodable) {
        guard var line = try? encoder.encode(record).map({ $0 }) else { return }
        line.append(UInt8(ascii: "\n"))
        let toWrite: (FileHandle, [UInt8])? = state.withLockedValue { state in
            guard let file = state.file else { return nil }
            state.pending.append(contentsOf: line)
            guard state.pending.count >= Self.flushThreshold else { return nil }
            defer { state.pending.removeAll(keepingCapacity: true) }
            return (file, state.pending)
        }
        if let (file, bytes) = toWrite { file.write(Data(bytes)) }
    }

    /// Writes buffered lines.
    func flush() {
        let toWrite: (FileHandle, [UInt8])? = state.withLockedValue { state in
            guard let file = state.file, !state.pending.isEmpty else { return nil }
            defer { state.pending.removeAll() }
            return (file, state.pending)
        }
        if let (file, bytes) = toWrite { file.write(Data(bytes)) }
    }

    /// Flushes and closes the file.
    func close() {
        flush()
        let (file, flusher) = state.withLockedValue { state -> (FileHandle?, Task<Void, Never>?) in
            defer {
                state.file = nil
                state.flusher = nil
            }
            return (state.file, state.flusher)
        }
        flusher?.cancel()
        try? file?.close()
    }
}
