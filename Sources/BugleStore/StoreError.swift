import Foundation
import NIOCore
import NIOPosix
import PostgresNIO

/// An error raised by BugleStore: configuration parsing, the embedded cluster, migrations and device storage.
///
/// Like `PSQLError`, the ``description`` is written for operators and never contains secrets: no passwords,
/// no device tokens, no query binds. Underlying errors are kept for programmatic inspection only and are
/// summarised through ``safeDescription(of:)``, which prints the SQLSTATE and the server's primary message
/// (never its `DETAIL`, which can echo row values).
public struct StoreError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What went wrong, as an open-ended set of static members.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case invalidDatabaseURL = "invalid_database_url"
            case unsupportedConfiguration = "unsupported_configuration"
            case connectionFailed = "connection_failed"
            case postgresNotInstalled = "postgres_not_installed"
            case clusterCommandFailed = "cluster_command_failed"
            case clusterDirectory = "cluster_directory"
            case migrationFailed = "migration_failed"
            case unknownMigration = "unknown_migration"
            case readOnlyServer = "read_only_server"
            case invalidInput = "invalid_input"
            case fileUnreadable = "file_unreadable"
            case query = "query_failed"
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// A database URL could not be parsed; the message names the part at fault.
        public static let invalidDatabaseURL = Self(.invalidDatabaseURL)
        /// The configuration asks for something Bugle cannot honour (for example TLS over a Unix socket).
        public static let unsupportedConfiguration = Self(.unsupportedConfiguration)
        /// The database server could not be reached or refused the connection.
        public static let connectionFailed = Self(.connectionFailed)
        /// `initdb`/`pg_ctl`/`postgres` were not found on this machine.
        public static let postgresNotInstalled = Self(.postgresNotInstalled)
        /// `initdb` or `pg_ctl` exited with a failure status.
        public static let clusterCommandFailed = Self(.clusterCommandFailed)
        /// The embedded cluster's directory could not be created or is unusable.
        public static let clusterDirectory = Self(.clusterDirectory)
        /// A schema migration failed and was rolled back.
        public static let migrationFailed = Self(.migrationFailed)
        /// The server cannot be written through this login: a standby in recovery, or read-only sessions.
        public static let readOnlyServer = Self(.readOnlyServer)
        /// The database has migrations applied that this build of Bugle does not know (it is newer).
        public static let unknownMigration = Self(.unknownMigration)
        /// A value passed to a store API was rejected (for example a malformed device token).
        public static let invalidInput = Self(.invalidInput)
        /// A file (for example a device CSV) could not be opened or read.
        public static let fileUnreadable = Self(.fileUnreadable)
        /// A query failed.
        public static let query = Self(.query)

        /// The stable snake_case name of the code.
        public var description: String { self.base.rawValue }
    }

    /// What went wrong.
    public var code: Code
    /// A human-readable, secret-free explanation.
    public var message: String
    /// The error that caused this one, if any. Not printed by ``description``.
    public var underlying: (any Error)?

    /// Creates a store error.
    /// - Parameters:
    ///   - code: What went wrong.
    ///   - message: A secret-free explanation; never put passwords, tokens or bind values in it.
    ///   - underlying: The error that caused this one, kept for inspection but not printed.
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// `"<code>: <message>"`, plus a secret-free summary of the underlying error.
    public var description: String {
        if let underlying {
            return "\(self.code): \(self.message) (\(Self.safeDescription(of: underlying)))"
        }
        return "\(self.code): \(self.message)"
    }

    /// Same as ``description``: the debug form must not leak secrets either.
    public var debugDescription: String { self.description }

    /// A description of any error that is safe to print: for `PSQLError` the code, SQLSTATE and the server's
    /// primary message (never `DETAIL`, the query or its binds), also when it ended a transaction (postgres-nio's
    /// `PostgresTransactionError` prints the statement); for ``StoreError`` its description; otherwise
    /// `String(describing:)`.
    /// - Parameter error: The error to describe.
    /// - Returns: A single line of text.
    public static func safeDescription(of error: any Error) -> String {
        switch error {
        case let error as StoreError:
            return error.description
        case let error as PostgresTransactionError:
            // Its own description prints the statement that failed; the error inside is what happened.
            guard let inner = failure(in: error) else {
                return error.rollbackError.map { "rolling back failed: " + safeDescription(of: $0) } ?? "transaction failed"
            }
            return safeDescription(of: inner)
        case let error as PSQLError where error.serverInfo == nil && connectionWords.contains { $0.code == error.code }:
            let words = connectionWords.first { $0.code == error.code }?.words ?? ""
            return error.underlying.map { "\(words): \(connectFailure($0))" } ?? words
        case let error as PSQLError:
            var parts = ["postgres error \(error.code)"]
            if let state = error.serverInfo?[.sqlState] {
                parts.append("SQLSTATE \(state)")
            }
            if let message = error.serverInfo?[.message] {
                parts.append(message)
            }
            if error.serverInfo == nil, let underlying = error.underlying {
                parts.append(String(describing: underlying))
            }
            return parts.joined(separator: ": ")
        case let error as CocoaError:
            // Foundation's file errors print as `Error Domain=NSCocoaErrorDomain Code=642 "…" UserInfo={…}`.
            let reason = (error.underlying as? POSIXError).map { String(cString: strerror($0.code.rawValue)) } ?? error.localizedDescription
            return (error.filePath ?? error.url?.path).map { "\($0): \(reason)" } ?? reason
        default:
            let text = String(describing: error)
            // postgres-nio's pool errors print their internal type path (`ConnectionPoolError(base: _ConnectionPoolModule…`).
            if String(reflecting: type(of: error)).hasSuffix("ConnectionPoolError") {
                if text.contains("CircuitBreaker") { return "no connection to the database could be opened for a while" }
                if text.contains("poolShutdown") { return "the database connection pool is shut down" }
                if text.contains("requestCancelled") { return "the wait for a database connection was cancelled" }
            }
            return text
        }
    }

    /// Why a connection could not be opened, per address tried (`127.0.0.1:5432: Connection refused`), where the
    /// networking library's own text was `Connection errors: SingleConnectionFailure(target: [IPv4]127.0.0.1/…,
    /// error: connection reset (error set): Connection refused (errno: 111))`.
    private static func connectFailure(_ error: any Error) -> String {
        guard let connect = error as? NIOConnectionError, !connect.connectionErrors.isEmpty else { return String(describing: error) }
        return connect.connectionErrors.map { failure in
            let address = failure.target.ipAddress.map { failure.target.protocol == .inet6 ? "[\($0)]" : $0 } ?? "\(failure.target)"
            let reason = (failure.error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? String(describing: failure.error)
            return failure.target.port.map { "\(address):\($0): \(reason)" } ?? "\(address): \(reason)"
        }.joined(separator: "; ")
    }

    /// What a PostgreSQL client error with no server message says, in words (its code's name was printed). A list,
    /// not a dictionary: some codes of postgres-nio are equal to others (`connectionClosed` is `serverClosedConnection`).
    private static let connectionWords: [(code: PSQLError.Code, words: String)] = [
        (.serverClosedConnection, "the database server closed the connection"),
        (.clientClosedConnection, "the connection to the database was closed"),
        (.connectionError, "could not reach the database"),
        (.uncleanShutdown, "the database connection ended uncleanly"),
        (.poolClosed, "the database connection pool is closed"),
        (.queryCancelled, "the statement was cancelled"),
        (.sslUnsupported, "the server does not offer TLS, which the sslmode asks for"),
    ]

    /// What ended a failed transaction: its `BEGIN`, its body or its `COMMIT` (nil when only the rollback failed).
    private static func failure(in transaction: PostgresTransactionError) -> (any Error)? {
        transaction.beginError ?? transaction.closureError ?? transaction.commitError
    }

    /// Whether `error` is the server ending the session (an administrator's or a shutdown's 57P0x, an
    /// idle-in-transaction limit's 25P03, a connection exception's 08xxx): its connection is closing, if not closed yet.
    /// A pooler in statement mode refusing a transaction ends the session too, but is no outage: waiting does not help.
    public static func isEndedSession(_ error: any Error) -> Bool {
        guard let state = sqlState(of: error), !isStatementPoolingRefusal(error) else { return false }
        return state.hasPrefix("57P") || state.hasPrefix("08") || state == "25P03"
    }

    /// Whether `error` means the connection to the database is gone (the server ended the session, the socket broke,
    /// a statement found its connection closed), as opposed to a statement the server refused: the same work on a new
    /// session once the server answers will do.
    public static func isConnectionLoss(_ error: any Error) -> Bool {
        if isEndedSession(error) { return true }
        switch error {
        case let segment as SegmentError:
            return segment.connectionLost
        case let store as StoreError:
            return store.code == .connectionFailed || (store.underlying.map(isConnectionLoss) ?? false)
        case let transaction as PostgresTransactionError:
            return failure(in: transaction).map(isConnectionLoss) ?? false
        case let psql as PSQLError:
            return [.serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown].contains(psql.code)
        default:
            return false
        }
    }

    /// What a connection through a pooler in statement mode comes to: Bugle's work is transactions (claims, outcome
    /// writes, migrations under their lock, segment reads in one snapshot), and such a pooler refuses every one.
    public static let statementPoolingRefusal =
        "the database connection goes through a pooler in statement mode, which Bugle cannot use (it needs transactions): "
        + "use session or transaction pooling (PgBouncer's pool_mode), or connect to PostgreSQL directly"

    /// Whether `error` is a connection pooler in statement mode refusing a transaction (PgBouncer ends the session with
    /// SQLSTATE 08P01 `transaction blocks not allowed in statement pooling mode`), also inside a failed transaction or
    /// under a ``StoreError``.
    public static func isStatementPoolingRefusal(_ error: any Error) -> Bool {
        sqlState(of: error) == "08P01" && serverMessage(of: error)?.contains("statement pooling mode") == true
    }

    /// The server's primary message of a server error (never its `DETAIL`), looked for as ``sqlState(of:)`` does.
    public static func serverMessage(of error: any Error) -> String? {
        serverField(.message, of: error)
    }

    /// The SQLSTATE of a server error, if `error` is one.
    /// - Parameter error: Any error.
    /// - Returns: The five-character SQLSTATE (of the error inside a failed transaction, or under a ``StoreError``,
    ///   too), or `nil` when `error` is not a server error.
    public static func sqlState(of error: any Error) -> String? {
        serverField(.sqlState, of: error)
    }

    /// One field of a server error's report: of `error` itself, of the error inside a failed transaction, or of the one
    /// under a ``StoreError``.
    private static func serverField(_ field: PSQLError.ServerInfo.Field, of error: any Error) -> String? {
        if let transaction = error as? PostgresTransactionError {
            return failure(in: transaction).flatMap { serverField(field, of: $0) }
        }
        if let store = error as? StoreError {
            return store.underlying.flatMap { serverField(field, of: $0) }
        }
        return (error as? PSQLError)?.serverInfo?[field]
    }
}
