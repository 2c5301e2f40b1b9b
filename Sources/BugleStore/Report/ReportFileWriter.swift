import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a report to a ``ReportDestination`` without replacing what the destination is:
///
/// - A path that does not exist yet, or that names a regular file, is written under a temporary name beside the
///   file the path resolves to (symlinks are followed: a link keeps pointing at its target, and the target is what
///   changes), fsync'd and renamed over it. An existing file keeps its permission bits (and its owner and group,
///   where this process may set them). Until ``commit()`` the file is untouched; ``abandon()`` removes the
///   temporary file.
/// - A path that exists and is not a regular file (a FIFO, a character device such as a terminal or `/dev/null`)
///   is opened and written to directly: it cannot be replaced, so nothing is atomic there, and what was written
///   before a failure stays written.
/// - Standard output (``ReportDestination/standardOutput(descriptor:)``) is written to directly likewise; its
///   descriptor is left open.
public final class ReportFileWriter {
    /// Where the report goes.
    public let destination: ReportDestination
    private let descriptor: Int32
    private let mode: Mode
    private var isOpen = true

    private enum Mode {
        /// Written under `temporary`, renamed over `target` by ``commit()``.
        case replacing(temporary: String, target: String)
        /// Written in place; the descriptor is closed at the end when this writer opened it.
        case direct(closes: Bool)
    }

    /// Opens the destination (for a file that is replaced, a temporary file beside it).
    /// - Parameter destination: Where the report goes.
    /// - Throws: ``FileWriteError`` when it cannot be opened: a directory, a path whose directory is missing or
    ///   not writable, a socket.
    public init(_ destination: ReportDestination) throws {
        self.destination = destination
        switch destination {
        case .standardOutput(let descriptor):
            self.descriptor = descriptor
            self.mode = .direct(closes: false)
        case .path(let path):
            let opened = try Self.opening(path)
            self.descriptor = opened.descriptor
            self.mode = opened.mode
        }
    }

    /// Appends bytes.
    /// - Throws: ``FileWriteError`` when the write fails (a full disk, a file-size limit, a reader gone).
    public func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return Foundation.write(descriptor, base + offset, raw.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                throw FileWriteError(path: destination.description, reason: Self.lastError())
            }
            offset += written
        }
    }

    /// Finishes the report: a file that is replaced is fsync'd, closed and renamed into place; a destination written
    /// directly is closed when this writer opened it.
    /// - Throws: ``FileWriteError`` when the fsync or the rename fails (the temporary file is then removed).
    public func commit() throws {
        guard isOpen else { return }
        switch mode {
        case .direct(let closes):
            isOpen = false
            if closes { close(descriptor) }
        case .replacing(let temporary, let target):
            guard fsync(descriptor) == 0 else {
                let reason = Self.lastError()
                abandon()
                throw FileWriteError(path: destination.description, reason: reason)
            }
            isOpen = false
            close(descriptor)
            guard rename(temporary, target) == 0 else {
                let reason = Self.lastError()
                unlink(temporary)
                throw FileWriteError(path: destination.description, reason: reason)
            }
        }
    }

    /// Stops writing: the temporary file of a file that is replaced is closed and deleted; a destination written
    /// directly keeps what it was given. Does nothing after ``commit()``.
    public func abandon() {
        guard isOpen else { return }
        isOpen = false
        switch mode {
        case .direct(let closes):
            if closes { close(descriptor) }
        case .replacing(let temporary, _):
            close(descriptor)
            unlink(temporary)
        }
    }

    /// Opens `path` as the class documents: directly when it exists and is not a regular file, else a temporary
    /// file beside the file it resolves to.
    private static func opening(_ path: String) throws -> (descriptor: Int32, mode: Mode) {
        guard !path.isEmpty else { throw FileWriteError(path: path, reason: "no path given") }
        var existing = stat()
        if stat(path, &existing) == 0 {
            switch existing.st_mode & S_IFMT {
            case S_IFREG:
                break
            case S_IFDIR:
                throw FileWriteError(path: path, reason: "it is a directory")
            default:
                // A FIFO, a terminal, /dev/null: written as it is, never replaced by a regular file.
                let descriptor = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY)
                guard descriptor >= 0 else { throw FileWriteError(path: path, reason: lastError()) }
                return (descriptor, .direct(closes: true))
            }
        } else if errno != ENOENT {
            throw FileWriteError(path: path, reason: lastError())
        }
        let replaces = existing.st_mode & S_IFMT == S_IFREG
        let target = try resolvingLinks(path)
        AbandonedReportFiles.remove(besides: target)
        let temporary = target + ".tmp-\(getpid())"
        // Readable by this user alone until it has the permissions of the file it replaces.
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, replaces ? 0o600 : 0o644)
        guard descriptor >= 0 else { throw FileWriteError(path: path, reason: lastError()) }
        if replaces {
            // Not permitted unless this process owns the file or is privileged; the permission bits are kept anyway.
            _ = fchown(descriptor, existing.st_uid, existing.st_gid)
            guard fchmod(descriptor, existing.st_mode & 0o7777) == 0 else {
                let reason = lastError()
                close(descriptor)
                unlink(temporary)
                throw FileWriteError(path: path, reason: reason)
            }
        }
        return (descriptor, .replacing(temporary: temporary, target: target))
    }

    /// `path` with the symlinks of its last component followed to the path they name, which need not exist yet.
    private static func resolvingLinks(_ path: String) throws -> String {
        var current = path
        // Linux's own limit on links followed in one lookup.
        for _ in 0..<40 {
            var info = stat()
            guard lstat(current, &info) == 0, info.st_mode & S_IFMT == S_IFLNK else { return current }
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let count = buffer.withUnsafeMutableBufferPointer { raw -> Int in
                guard let base = raw.baseAddress else { return -1 }
                return readlink(current, base, raw.count - 1)
            }
            guard count >= 0 else { throw FileWriteError(path: path, reason: lastError()) }
            let target = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            current = target.hasPrefix("/") ? target : directory(of: current) + target
        }
        throw FileWriteError(path: path, reason: String(cString: strerror(ELOOP)))
    }

    /// The directory part of `path` with its trailing slash; empty for a bare name.
    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return String(path[...slash])
    }

    private static func lastError() -> String {
        String(cString: strerror(errno))
    }
}

/// A report could not be written (a full disk, permissions, a reader gone). A file that is replaced was not touched;
/// a destination written directly (a FIFO, a device, standard output) keeps what was written before the failure.
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
