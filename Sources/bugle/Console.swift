import Foundation

/// Where human-readable output goes: stdout normally, stderr when stdout carries `--json`.
struct Console: Sendable {
    /// True when stdout is reserved for the JSON summary.
    var jsonOnStdout = false

    /// Prints one human-readable line.
    func say(_ line: String) {
        if jsonOnStdout {
            FileHandle.standardError.write(Data((line + "\n").utf8))
        } else {
            // Flushed at once: redirected to a log, stdout is block-buffered, and a line such as "waiting 90 s for
            // send_at" appeared only when the run ended.
            print(line)
            fflush(nil)
        }
    }

    /// Writes raw text to stderr (progress display).
    static func toStderr(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
