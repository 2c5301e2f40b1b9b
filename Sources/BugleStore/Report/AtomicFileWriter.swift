import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a file under a temporary name in the same directory, then fsyncs and renames it into place.
/// Until ``commit()`` the final path is untouched; ``abandon()`` removes the temporary file.
public final class AtomicFileWriter {
    public let path: String
    private let temporaryPath: String
    private let descriptor: Int32

    /// - Throws: ``FileWriteError`` when the temporary file cannot be created.
    public init(path: String) throws {
        self.path = path
        self.temporaryPath = path + ".tmp-\(getpid())"
        let fd = open(temporaryPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw FileWriteError(path: path, reason: String(cString: strerror(errno))) }
        self.descriptor = fd
    }

    /// Appends bytes.
    public func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return Foundation.write(descriptor, base + offset, raw.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                throw FileWriteError(path: path, reason: String(cString: strerror(errno)))
            }
            offset += written
        }
    }

    /// fsyncs, closes and renames the file into place.
    public func commit() throws {
        guard fsync(descriptor) == 0 else {
            let reason = String(cString: strerror(errno))
            abandon()
            throw FileWriteError(path: path, reason: reason)
        }
        close(descriptor)
        guard rename(temporaryPath, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporaryPath)
            throw FileWriteError(path: path, reason: reason)
        }
    }

    /// Closes and deletes the temporary file.
    public func abandon() {
        close(descriptor)
        unlink(temporaryPath)
    }
}

/// A report file could not be written (disk full, permissions); the final path was not touched.
public struct FileWriteError: Error, CustomStringConvertible, Sendable {
    public var path: String
    public var reason: String
    /// What the user can do about it, when the caller knows (appended to the description).
    public var hint: String?

    public init(path: String, reason: String, hint: String? = nil) {
        self.path = path
        self.reason = reason
        self.hint = hint
    }

    public var description: String { "cannot write \(path): \(reason)" + (hint.map { "; \($0)" } ?? "") }
}
