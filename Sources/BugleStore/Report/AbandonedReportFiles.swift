import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Removes the temporary files (`REPORT.tmp-PID`) that writers of a report left beside it when they were killed
/// before they could remove them (`kill -9` while writing: each try left one, up to the report's size, for good).
///
/// A file is removed only when no process of that PID is alive on this machine and nothing has written to it for a
/// minute, so a writer on another machine sharing the directory (whose PID means nothing here) is left alone while it
/// writes.
enum AbandonedReportFiles {
    /// Seconds without a write after which a file of a dead process counts as abandoned.
    static let quietSeconds: Double = 60

    /// Removes the abandoned temporary files of `target` (a path after its links were followed).
    /// - Returns: The files removed.
    @discardableResult
    static func remove(besides target: String, now: Date = Date()) -> [String] {
        let url = URL(fileURLWithPath: target)
        let prefix = url.lastPathComponent + ".tmp-"
        let directory = url.deletingLastPathComponent().path
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        var removed: [String] = []
        for name in names where name.hasPrefix(prefix) {
            let digits = name.dropFirst(prefix.count)
            guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber), let pid = pid_t(digits),
                pid != getpid(), kill(pid, 0) != 0, errno == ESRCH
            else { continue }
            let path = directory + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG,
                now.timeIntervalSince1970 - Double(info.st_mtim.tv_sec) >= quietSeconds
            else { continue }
            if unlink(path) == 0 { removed.append(path) }
        }
        return removed
    }
}
