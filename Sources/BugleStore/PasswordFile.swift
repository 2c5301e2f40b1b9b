import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A libpq password file (`~/.pgpass`, `PGPASSFILE`, or the URL's `passfile`): lines of
/// `hostname:port:database:username:password`, each of the first four a literal or `*`, with `\:` and `\\` as
/// escapes; `#` starts a comment line. The first matching line gives the password.
///
/// As libpq does, a line with fewer than five fields is skipped, and a file other users can read or write is not
/// used; unlike libpq, Bugle says so when such a file has the line it would have used (see ``lookup(_:)``), rather
/// than leaving the server's "password authentication failed" to explain it. Passwords never appear in errors or
/// descriptions: only the file's path and line number do.
public struct PasswordFile: Sendable, Hashable {
    /// One usable line of the file.
    struct Entry: Sendable, Hashable {
        /// `nil` is a `*`: any value.
        var host: String?
        var port: String?
        var database: String?
        var username: String?
        var password: String
        /// 1-based, for messages.
        var line: Int

        func matches(_ key: Key) -> Bool {
            Self.field(self.host, matches: key.hosts) && Self.field(self.port, matches: [key.port])
                && Self.field(self.database, matches: [key.database]) && Self.field(self.username, matches: [key.username])
        }

        private static func field(_ field: String?, matches values: [String]) -> Bool {
            field.map { values.contains($0) } ?? true
        }
    }

    /// What a line is matched against: libpq's host name (for a Unix socket, its directory, and `localhost` for the
    /// default directories), port, database and user.
    public struct Key: Sendable, Hashable {
        var hosts: [String]
        var port: String
        var database: String
        var username: String

        /// The key for a connection: the database defaults to the user name, as the server's does.
        public init(_ configuration: DatabaseConfiguration) {
            switch configuration.endpoint {
            case .tcp(let host, let port):
                self.hosts = [host]
                self.port = String(port)
            case .unixSocket(let directory, let port):
                let trimmed = directory.count > 1 && directory.hasSuffix("/") ? String(directory.dropLast()) : directory
                self.hosts = PasswordFile.defaultSocketDirectories.contains(trimmed) ? [trimmed, "localhost"] : [trimmed]
                self.port = String(port)
            }
            self.database = configuration.database ?? configuration.username
            self.username = configuration.username
        }

        /// `host:port:database:user`, for messages (no password).
        var description: String { "\(self.hosts[0]):\(self.port):\(self.database):\(self.username)" }
    }

    /// What a lookup found.
    public enum Lookup: Sendable, Hashable {
        /// The file has a matching line.
        case password(String, line: Int)
        /// The file does not exist (libpq ignores a missing file, and so does Bugle).
        case noFile
        /// No line matches.
        case noMatch
    }

    /// Socket directories libpq's builds use by default: their sockets also match a line for `localhost`.
    static let defaultSocketDirectories: Set<String> = ["/var/run/postgresql", "/run/postgresql", "/tmp"]

    /// The file's path.
    public var path: String

    /// A password file at `path` (read at each ``lookup(_:)``).
    public init(path: String) {
        self.path = path
    }

    /// The first line matching `key`.
    /// - Throws: ``StoreError`` with code `fileUnreadable` when the file exists but cannot be read or is not a plain
    ///   file, or `unsupportedConfiguration` when it has a matching line but group or others can read or write it.
    public func lookup(_ key: Key) throws -> Lookup {
        var info = stat()
        guard stat(self.path, &info) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { return .noFile }
            throw StoreError(.fileUnreadable, "cannot read the password file \(self.path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw StoreError(.fileUnreadable, "the password file \(self.path) is not a plain file")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: self.path))
        } catch {
            throw StoreError(.fileUnreadable, "cannot read the password file \(self.path)")
        }
        guard let entry = Self.entries(in: String(decoding: data, as: UTF8.self)).first(where: { $0.matches(key) }) else {
            return .noMatch
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw StoreError(
                .unsupportedConfiguration,
                "the password file \(self.path) has a line for \(key.description) (line \(entry.line)), but group or "
                    + "others can read or write it (mode \(String(mode, radix: 8))): chmod 600 it; like libpq, Bugle will "
                    + "not take a password from it until then"
            )
        }
        return .password(entry.password, line: entry.line)
    }

    /// The usable lines of a password file's text, in order.
    static func entries(in text: String) -> [Entry] {
        var entries: [Entry] = []
        var number = 0
        // "\r\n" is one Character in Swift, so both endings are named.
        for line in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            number += 1
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let fields = Self.fields(of: line)
            guard fields.count >= 5 else { continue }
            // As libpq reads it, the password ends at the next unescaped colon.
            entries.append(Entry(
                host: fields[0], port: fields[1], database: fields[2], username: fields[3],
                password: fields[4] ?? "*", line: number))
        }
        return entries
    }

    /// Splits a line at unescaped colons, removing the escapes (`\:` → `:`, `\\` → `\`, `\x` → `x`). A field that
    /// is a lone unescaped `*` comes back as `nil` (`\*` is a literal star).
    private static func fields(of line: Substring) -> [String?] {
        var fields: [String?] = []
        var current = ""
        var escapes = 0
        var escaped = false
        func close() {
            fields.append(current == "*" && escapes == 0 ? nil : current)
            current = ""
            escapes = 0
        }
        for character in line {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
                escapes += 1
            } else if character == ":" {
                close()
            } else {
                current.append(character)
            }
        }
        close()
        return fields
    }
}
