import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Reads files that hold secrets (provider keys, service accounts), refusing — as ssh does — files that
/// group or others can read unless the caller allows it.
public enum SecretFile {
    /// Why a secret file cannot be used.
    public enum Problem: Error, Sendable, Equatable {
        /// Missing or unreadable.
        case unreadable
        /// Readable by group or others; `mode` is the permission bits.
        case readableByOthers(mode: Int)
    }

    /// Checks the permission bits of `path`.
    /// - Parameters:
    ///   - path: The file.
    ///   - allowReadableByOthers: Skip the group/other check.
    /// - Returns: nil when usable, else the problem.
    public static func check(_ path: String, allowReadableByOthers: Bool) -> Problem? {
        // Only a regular file of key size is read: opening a FIFO waited for ever for a writer, and a directory's
        // mode (755) was reported as a key readable by others.
        guard let status = status(path), status.isRegular, status.size <= maximumSize else { return .unreadable }
        if !allowReadableByOthers && (status.mode & 0o077) != 0 {
            return .readableByOthers(mode: status.mode & 0o777)
        }
        return nil
    }

    /// The largest secret file read: keys, certificates and service accounts are a few KiB.
    public static let maximumSize = 1 << 20

    /// What `stat` says of `path` (symbolic links followed), or nil when it fails.
    private static func status(_ path: String) -> (isRegular: Bool, isDirectory: Bool, mode: Int, size: Int)? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let type = info.st_mode & S_IFMT
        return (type == S_IFREG, type == S_IFDIR, Int(info.st_mode & 0o7777), Int(info.st_size))
    }

    /// Why `path` cannot be read, in the system's words ("No such file or directory", "Permission denied", "Is a
    /// directory") or Bugle's (not a regular file, too large), for an error message; nil when it can be read after all.
    public static func unreadableReason(_ path: String) -> String? {
        if let status = status(path) {
            if status.isDirectory { return "Is a directory" }
            if !status.isRegular { return "not a regular file (a FIFO, a socket or a device); give the key file itself" }
            if status.size > maximumSize { return "larger than \(maximumSize / 1024 / 1024) MiB, which no key or service-account file is" }
        }
        let descriptor = open(path, O_RDONLY)
        guard descriptor < 0 else {
            close(descriptor)
            return nil
        }
        return String(cString: strerror(errno))
    }

    /// Checks the permissions, then reads the file as bytes.
    /// - Parameters:
    ///   - path: The file.
    ///   - allowReadableByOthers: Skip the group/other check.
    /// - Returns: The contents, or the problem.
    public static func read(_ path: String, allowReadableByOthers: Bool) -> Result<Data, Problem> {
        if let problem = check(path, allowReadableByOthers: allowReadableByOthers) { return .failure(problem) }
        guard let data = FileManager.default.contents(atPath: path) else { return .failure(.unreadable) }
        return .success(data)
    }
}
