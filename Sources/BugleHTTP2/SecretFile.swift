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
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue
        else {
            return .unreadable
        }
        if !allowReadableByOthers && (mode & 0o077) != 0 {
            return .readableByOthers(mode: mode & 0o777)
        }
        return nil
    }

    /// Why `path` cannot be read, in the system's words ("No such file or directory", "Permission denied", "Is a
    /// directory"), for an error message; nil when it can be opened after all.
    public static func unreadableReason(_ path: String) -> String? {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue { return "Is a directory" }
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
