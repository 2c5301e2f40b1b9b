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
            print(line)
        }
    }

    /// Writes raw text to stderr (progress display).
    static func toStderr(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
