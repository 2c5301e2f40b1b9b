import Logging
import Synchronization

/// A log handler that keeps every message at or above its level with its metadata rendered as `key=value`, so a
/// test can assert what an operator would have read.
struct RecordingLogHandler: LogHandler {
    /// The lines logged through every handler made from one recorder.
    final class Lines: Sendable {
        private let lines = Mutex<[String]>([])
        func append(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    let lines: Lines
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    /// A logger recording into `lines` from `level` up.
    static func logger(_ lines: Lines, level: Logger.Level = .warning) -> Logger {
        Logger(label: "test.recording") { _ in RecordingLogHandler(lines: lines, logLevel: level) }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        let rendered = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        lines.append("\(event.level) \(event.message) \(rendered)")
    }
}
