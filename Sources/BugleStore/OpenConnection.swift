import Logging
import PostgresNIO

// postgres-nio 1.33.2 never answers a statement written to a connection that has already closed (the server ended
// the session: a restart, a failover, `pg_terminate_backend`, an idle-in-transaction limit). The write fails with no
// promise to fail, and the caller waits for ever, cancellation included. A statement in flight when the session ends
// fails as it should, so its `withTransaction` hung in the `ROLLBACK` it sends after that failure, holding the pooled
// connection. Bugle's transactions and the connections it holds across statements go through these instead: each
// asks whether the connection is still open before writing, and a closed one is an error at once.

extension PostgresConnection {
    /// Throws ``StoreError/Code/connectionFailed`` when the connection has closed, instead of a statement that would
    /// never be answered.
    func requireOpen() throws {
        if isClosed {
            throw StoreError(.connectionFailed, "the database ended this session (a restart, a failover or a terminated backend)")
        }
    }

    /// `ROLLBACK` after `error` ended a transaction's body, unless the connection has closed or `error` is the server
    /// ending the session (57P0x, 25P03, 08xxx: the connection is closing): the server rolled that transaction back, and
    /// the statement would never be answered.
    func rollBack(after error: any Error, logger: Logger) async throws {
        guard !isClosed, !Self.endedSession(error) else { return }
        try await query("ROLLBACK", logger: logger)
    }

    /// Whether `error` is the server ending the session (an administrator's or a shutdown's 57P0x, an
    /// idle-in-transaction limit's 25P03, a connection exception's 08xxx): its connection is closing, if not closed yet.
    private static func endedSession(_ error: any Error) -> Bool {
        guard let state = StoreError.sqlState(of: error) else { return false }
        return state.hasPrefix("57P") || state.hasPrefix("08") || state == "25P03"
    }
}

extension PostgresClient {
    /// `BEGIN`, `body` and `COMMIT` on one leased connection, as postgres-nio's `withTransaction`, except that after a
    /// failure `ROLLBACK` is sent only while the connection is open (the server rolls back a session it ended), and
    /// errors come as thrown, not wrapped in `PostgresTransactionError`.
    func withOpenTransaction<Result>(
        logger: Logger,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> sending Result
    ) async throws -> sending Result {
        try await withConnection(isolation: isolation) { connection in
            try connection.requireOpen()
            try await connection.query("BEGIN", logger: logger)
            let result: Result
            do {
                result = try await body(connection)
            } catch {
                try? await connection.rollBack(after: error, logger: logger)
                throw error
            }
            try connection.requireOpen()
            try await connection.query("COMMIT", logger: logger)
            return result
        }
    }
}
