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
    /// Errors thrown by `body` are rethrown unchanged.
    ///
    /// - Parameters:
    ///   - configuration: Where to connect; its TLS mode is applied as documented on ``DatabaseConfiguration/SSLMode``.
    ///   - logger: Receives the client's background messages.
    ///   - body: Uses the client; it must not let the client escape.
    /// - Returns: What `body` returns.
    /// - Throws: ``StoreError`` when the configuration is unusable or the server cannot be reached; whatever
    ///   `body` throws.
    public static func withClient<R: Sendable>(
        _ configuration: DatabaseConfiguration,
        logger: Logger,
        _ body: (PostgresClient) async throws -> R
    ) async throws -> R {
        let client = PostgresClient(
            configuration: try configuration.postgresClientConfiguration(),
            backgroundLogger: logger
        )
        // The client runs in its own task. After a connection was lost mid-query, a call the runner abandoned (see
        // BugleRunner's OperationDeadline) can keep its connection leased and the client's `run()` from ever
        // returning; shutting down therefore waits at most `shutdownGrace` for it, then leaves it behind.
        let running = Task { await client.run() }
        do {
            try await Self.checkConnection(client, configuration: configuration, logger: logger)
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
                try await client.query("CREATE DATABASE \(unescaped: name)", logger: logger)
            } catch {
                throw StoreError(.query, "cannot create database \(name)", underlying: error)
            }
        }
    }

    /// Opens and closes one direct connection, so a refused TLS upgrade, bad credentials or a missing socket are
    /// reported with their cause instead of the pool retrying silently.
    private static func checkConnection(
        _ client: PostgresClient,
        configuration: DatabaseConfiguration,
        logger: Logger
    ) async throws {
        let connectionConfiguration = try configuration.postgresConnectionConfiguration()
        let limit = configuration.connectTimeout + .seconds(5)
        do {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    let connection = try await PostgresConnection.connect(
                        configuration: connectionConfiguration,
                        id: 0,
                        logger: logger
                    )
                    try? await connection.close()
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: limit)
                    return false
                }
                defer { group.cancelAll() }
                guard let answered = try await group.next(), answered else {
                    throw StoreError(
                        .connectionFailed,
                        "no answer from \(configuration) within \(limit.components.seconds) s"
                    )
                }
            }
        } catch let error as StoreError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw StoreError(.connectionFailed, "cannot connect to \(configuration)", underlying: error)
        }
    }
}
