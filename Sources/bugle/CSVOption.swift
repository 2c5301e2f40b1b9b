import ArgumentParser
import BugleStore
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `--csv PATH`: where a command writes its CSV report; `-` is standard output.
enum CSVOption {
    /// Refuses an empty path, and `-` with `--json` (both would write to standard output).
    /// - Throws: `ValidationError` (exit 1, before anything is written).
    static func validate(_ argument: String?, json: Bool) throws {
        guard let argument else { return }
        if argument.isEmpty { throw ValidationError("--csv needs a path (or - for standard output)") }
        if argument == "-", json { throw ValidationError("--csv - and --json would both write to standard output; give --csv a path") }
    }

    /// Where `--csv` sends the report (nil when it was not given). Standard output (`-`, or a path that is this
    /// process's standard output, such as `/dev/stdout`) is given to the report alone: it is moved aside for it, and
    /// everything the command prints from here on goes to stderr, so stdout carries nothing but the CSV.
    /// - Throws: ``UsageError`` when standard output is named with `--json`; ``FileWriteError`` when it cannot be
    ///   moved aside.
    static func destination(_ argument: String?, json: Bool) throws -> ReportDestination? {
        guard let argument else { return nil }
        guard argument == "-" || isStandardOutput(argument) else {
            try requireWritable(argument)
            return .path(argument)
        }
        if json { throw UsageError("--csv \(argument) is standard output, where --json writes too; give --csv a path") }
        fflush(nil)
        let report = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)
        guard report >= 0, dup2(STDERR_FILENO, STDOUT_FILENO) >= 0 else {
            throw FileWriteError(path: "standard output", reason: String(cString: strerror(errno)))
        }
        return .standardOutput(descriptor: report)
    }

    /// Refuses, before anything is sent or written, a report path that cannot be created: a directory, a missing or
    /// unwritable parent directory, an unwritable file. (A write that fails later, a full disk, is reported then.)
    /// - Throws: ``UsageError`` naming the path and the reason.
    private static func requireWritable(_ path: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            if isDirectory.boolValue { throw UsageError("--csv \(path): it is a directory; give the report's file path") }
            if access(path, W_OK) != 0 { throw UsageError("--csv \(path): cannot write it: \(String(cString: strerror(errno)))") }
            return
        }
        let parent = URL(fileURLWithPath: path).deletingLastPathComponent().path
        guard FileManager.default.fileExists(atPath: parent, isDirectory: &isDirectory) else {
            throw UsageError("--csv \(path): the directory \(parent) does not exist")
        }
        if !isDirectory.boolValue { throw UsageError("--csv \(path): \(parent) is not a directory") }
        if access(parent, W_OK) != 0 { throw UsageError("--csv \(path): cannot create it in \(parent): \(String(cString: strerror(errno)))") }
    }

    /// Refuses, before anything is sent or written, a directory where the default report (`bugle-run-<id>.csv`, written
    /// when `--csv` is not given) cannot be created: it used to be found only once the whole campaign was sent (exit 2
    /// for a delivered run, its report missing).
    /// - Parameter directory: Where the report goes (nil: the current directory).
    /// - Throws: ``UsageError`` naming the directory and the reason.
    static func requireDefaultReportDirectory(_ directory: String? = nil) throws {
        let path = directory ?? FileManager.default.currentDirectoryPath
        let place = directory == nil ? "the current directory \(path)" : path
        if access(path, W_OK) != 0 {
            throw UsageError(
                "the report (bugle-run-<id>.csv) goes into \(place), which cannot be written: \(String(cString: strerror(errno))); "
                    + "give --csv PATH or run from a writable directory")
        }
    }

    /// Whether `path` is the file this process's standard output is (`/dev/stdout`, `/proc/self/fd/1`, or the file
    /// stdout is redirected to).
    private static func isStandardOutput(_ path: String) -> Bool {
        var named = stat()
        var output = stat()
        return stat(path, &named) == 0 && fstat(STDOUT_FILENO, &output) == 0 && named.st_dev == output.st_dev && named.st_ino == output.st_ino
    }
}
