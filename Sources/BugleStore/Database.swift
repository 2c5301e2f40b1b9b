import BugleCore
import Logging
import PostgresNIO

/// Opens PostgreSQL connection pools with a structured lifetime.
public enum Database {
    /// Creates a `PostgresClient`, runs it in a child task, checks the server answers, calls `body`, then shuts the
    /// client down (by cancelling its `run()`), whether `body` returns or throws.
    ///
    /// The connectivity check (`SELECT 1`, bounded by the configuration's connect timeout plus five seconds) turns
    /// an unreachable or misconfigured server into a ``StoreError`` with code `connectionFailed` instead of a hang.
    /// Errors thrown by `body` are rethrown unchanged. When the server refuses Bugle's session settings as startup
    /// parameters (a connection pooler: see ``connect(_:logger:)``), the client is made again without them.
    ///
    /// - Parameters:
    ///   - configuration: Where to connect; its TLS mode is applied as documented on ``DatabaseConfiguration/SSLMode``.
    ///   - logger: Receives the client's background messages.
    ///   - body: Uses the client; it must not let the client escape.
    /// - Returns: What `body` returns.
    /// - Throws: ``StoreError`` when the configuration is unusable or the server cannot be reached; whatever
    ///   `body` throws.
    @discardableResult
    public static func withClient<R: Sendable>(
        _ configuration: DatabaseConfiguration,
        logger: Logger,
        _ body: (PostgresClient) async throws -> R
    ) async throws -> R {
        var configuration = configuration
        while true {
            let client = PostgresClient(
                configuration: try configuration.postgresClientConfiguration(),
                backgroundLogger: logger
            )
            // The client runs in its own task. After a connection was lost mid-query, a call the runner abandoned (see
            // BugleRunner's OperationDeadline) can keep its connection leased and the client's `run()` from ever
            // returning; shutting down therefore waits at most `shutdownGrace` for it, then leaves it behind.
            let running = Task { await client.run() }
            let usable: DatabaseConfiguration
            do {
                usable = try await Self.checkConnection(configuration, logger: logger)
            } catch {
                await Self.shutDown(running, logger: logger)
                throw error
            }
            // The server refused Bugle's session settings at startup: a client without them (checked again).
            guard usable.sessionSettingsAtStartup == configuration.sessionSettingsAtStartup else {
                await Self.shutDown(running, logger: logger)
                configuration = usable
                continue
            }
            return try await Self.use(client, running: running, logger: logger, body)
        }
    }

    /// Runs `body` with the running `client`, then shuts it down, whether `body` returns or throws.
    private static func use<R: Sendable>(
        _ client: PostgresClient, running: Task<Void, Never>, logger: Logger, _ body: (PostgresClient) async throws -> R
    ) async throws -> R {
        do {
            let result = try await body(client)
            await Self.shutDown(running, logger: logger)
            return result
        } catch {
            await Self.shutDown(running, logger: logger)
            throw error
        }
    }

    /// How long shutting a client down may wait for its connections to close.
    static let shutdownGrace: Duration = .seconds(5)

    private static func shutDown(_ running: Task<Void, Never>, logger: Logger) async {
        running.cancel()
        do {
            try await OperationDeadline.run(within: shutdownGrace) { await running.value }
        } catch {
            logger.notice("the database client did not close within \(shutdownGrace); leaving it behind")
        }
    }

    /// Creates a database on the server `configuration` points at (connecting to its configured database).
    ///
    /// The name is used as an identifier, so it must match `[a-z_][a-z0-9_]{0,62}`; anything else is rejected
    /// rather than quoted.
    /// - Parameters:
    ///   - name: The new database's name.
    ///   - configuration: A connection to the server, with `CREATEDB` privilege.
    ///   - logger: For the query.
    /// - Throws: ``StoreError`` with code `invalidInput` for a bad name, `connectionFailed`, or `query` (for example
    ///   when it already exists: SQLSTATE 42P04).
    public static func createDatabase(
        named name: String,
        using configuration: DatabaseConfiguration,
        logger: Logger
    ) async throws {
        let isIdentifier = name.utf8.count <= 63
            && name.utf8.first.map { $0 == UInt8(ascii: "_") || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) }
                == true
            && name.utf8.allSatisfy {
                $0 == UInt8(ascii: "_") || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
            }
        guard isIdentifier else {
            throw StoreError(.invalidInput, "database names must match [a-z_][a-z0-9_]{0,62}")
        }
        try await Self.withClient(configuration, logger: logger) { client in
            do {
                // Safe: `name` was checked above to be a plain lower-case identifier.
                try await client.answeredQuery("CREATE DATABASE \(unescaped: name)", logger: logger)
            } catch {
                throw StoreError(.query, "cannot create database \(name)", underlying: error)
            }
        }
    }

    /// Opens and closes one direct connection, so a refused TLS upgrade, bad credentials, a missing socket or a pooler
    /// in statement mode are reported with their cause instead of the pool retrying silently.
    /// - Returns: `configuration`, without session settings at startup when the server refused them (see
    ///   ``connect(_:logger:)``).
    private static func checkConnection(_ configuration: DatabaseConfiguration, logger: Logger) async throws -> DatabaseConfiguration {
        let limit = configuration.connectTimeout + .seconds(5)
        do {
            return try await withThrowingTaskGroup(of: DatabaseConfiguration?.self) { group in
                group.addTask {
                    let (connection, usable) = try await Self.connect(configuration, logger: logger)
                    do {
                        try await Self.requireTransactions(connection, logger: logger)
                    } catch {
                        try? await connection.close()
                        throw error
                    }
                    try? await connection.close()
                    return usable
                }
                group.addTask {
                    try await Task.sleep(for: limit)
                    return nil
                }
                defer { group.cancelAll() }
                guard let answered = try await group.next(), let usable = answered else {
                    throw StoreError(
                        .connectionFailed,
                        "no answer from \(configuration) within \(limit.components.seconds) s"
                    )
                }
                return usable
            }
        } catch let error as StoreError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch let error as PSQLError where error.code == .sslUnsupported {
            // postgres-nio says only `sslUnsupported`.
            throw StoreError(
                .connectionFailed,
                "cannot connect to \(configuration): the server does not offer TLS, and sslmode=\(configuration.sslMode.rawValue) "
                    + "requires it: turn TLS on in the server (ssl = on), or use sslmode=prefer or disable on a network you trust")
        } catch {
            throw StoreError(.connectionFailed, "cannot connect to \(configuration)" + configuration.refusedLoginNote(error), underlying: error)
        }
    }

    /// Opens and ends an empty transaction on `connection`: a pooler in statement mode (PgBouncer's
    /// `pool_mode = statement`) refuses it, as it would refuse every transaction Bugle runs. Refused here once, plainly,
    /// instead of by whichever transaction a command happens to run first (`cannot create schema bugle` for `run`, a
    /// bare SQLSTATE 08P01 for `--dry-run` or `report`).
    /// - Throws: ``StoreError/Code-swift.struct/unsupportedConfiguration`` (``StoreError/statementPoolingRefusal``) for
    ///   such a pooler; other errors unchanged.
    private static func requireTransactions(_ connection: PostgresConnection, logger: Logger) async throws {
        do {
            try await connection.answeredQuery("BEGIN", logger: logger)
            try await connection.answeredQuery("ROLLBACK", logger: logger)
        } catch where StoreError.isStatementPoolingRefusal(error) {
            throw StoreError(.unsupportedConfiguration, StoreError.statementPoolingRefusal)
        }
    }

    /// Opens one connection. When the server refuses one of Bugle's session settings as a startup parameter (PgBouncer
    /// answers `unsupported startup parameter` unless its `ignore_startup_parameters` lists it), connects again
    /// without them: ledger transactions set what they need for themselves.
    /// - Returns: The connection, and the configuration it was opened with.
    public static func connect(_ configuration: DatabaseConfiguration, logger: Logger) async throws -> (PostgresConnection, DatabaseConfiguration) {
        do {
            return (try await PostgresConnection.connect(configuration: try configuration.postgresConnectionConfiguration(), id: 0, logger: logger), configuration)
        } catch where configuration.sessionSettingsAtStartup && refusedStartupParameter(error) {
            var plain = configuration
            plain.sessionSettingsAtStartup = false
            logger.notice(
                "the server refused a startup parameter (a connection pooler?); connecting without Bugle's session settings, which its ledger transactions set for themselves",
                metadata: ["error": "\(StoreError.safeDescription(of: error))"])
            return (try await PostgresConnection.connect(configuration: try plain.postgresConnectionConfiguration(), id: 0, logger: logger), plain)
        }
    }

    /// Whether `error` is a server's refusal of a startup parameter (PgBouncer: `unsupported startup parameter: jit`).
    static func refusedStartupParameter(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError, let message = error.serverInfo?[.message] else { return false }
        return message.hasPrefix("unsupported startup parameter")
    }
}
