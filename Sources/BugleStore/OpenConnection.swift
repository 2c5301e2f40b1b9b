import BugleCore
import Logging
import NIOCore
import PostgresNIO

// postgres-nio 1.33.2 never answers a statement written to a connection that has already closed (the server ended
// the session: a restart, a failover, `pg_terminate_backend`, an idle-in-transaction limit). The write fails with no
// promise to fail, and the caller waits for ever, cancellation included. A statement in flight when the session ends
// fails as it should, so its `withTransaction` hung in the `ROLLBACK` it sends after that failure, holding the pooled
// connection. Bugle's transactions and the connections it holds across statements go through these instead: each
// asks whether the connection is still open before writing, and a closed one is an error at once. The connection can
// still close between that question and the write (the server killed, all sessions ending at once): a statement (or a
// `COPY`) then also watches its connection while it waits, and ends with an error once the connection has stayed
// closed without an answer (``PostgresConnection/answeredQuery(_:logger:file:line:)``,
// ``PostgresConnection/answeredCopy(table:columns:logger:writeData:)``).

extension PostgresConnection {
    /// Throws ``StoreError/Code/connectionFailed`` when the connection has closed, instead of a statement that would
    /// never be answered.
    func requireOpen() throws {
        if isClosed {
            throw StoreError(.connectionFailed, "the database ended this session (a restart, a failover or a terminated backend)")
        }
    }

    /// How often a statement waiting for its answer looks whether its connection has closed; one closed at two looks
    /// in a row without an answer was never going to get one (postgres-nio fails a statement in flight as the
    /// connection closes, at once).
    static let closeCheckInterval = TimeAmount.milliseconds(500)

    /// `query(_:logger:)` that cannot wait for ever on a closed connection: it throws
    /// ``StoreError/Code/connectionFailed`` at once when the connection has closed, and within about a second when it
    /// closes before the statement reached it. A statement left unanswered that way stays behind, waiting; it holds
    /// nothing but its own memory.
    @discardableResult
    func answeredQuery(_ query: PostgresQuery, logger: Logger, file: String = #fileID, line: Int = #line) async throws -> PostgresRowSequence {
        try requireOpen()
        return try await watchedQuery(query, logger: logger, file: file, line: line)
    }

    /// The statement of ``answeredQuery(_:logger:file:line:)`` past its check that the connection is open.
    func watchedQuery(_ query: PostgresQuery, logger: Logger, file: String = #fileID, line: Int = #line) async throws -> PostgresRowSequence {
        try await watched(logger: logger) { try await self.query(query, logger: logger, file: file, line: line) }
    }

    /// `copyFrom(table:columns:logger:writeData:)` that cannot wait for ever on a closed connection, as
    /// ``answeredQuery(_:logger:file:line:)``: postgres-nio writes a `COPY` as it writes a statement, and one written to
    /// a closed connection is never answered either.
    func answeredCopy(
        table: String, columns: [String], logger: Logger, writeData: @escaping @Sendable (PostgresCopyFromWriter) async throws -> Void
    ) async throws {
        try requireOpen()
        try await watchedCopy(table: table, columns: columns, logger: logger, writeData: writeData)
    }

    /// The `COPY` of ``answeredCopy(table:columns:logger:writeData:)`` past its check that the connection is open.
    func watchedCopy(
        table: String, columns: [String], logger: Logger, writeData: @escaping @Sendable (PostgresCopyFromWriter) async throws -> Void
    ) async throws {
        try await watched(logger: logger) { try await self.copyFrom(table: table, columns: columns, logger: logger, writeData: writeData) }
    }

    /// `operation` (one statement or `COPY` on this connection), answered by its own result, or failed with
    /// ``StoreError/Code/connectionFailed`` once the connection has stayed closed for two looks without an answer.
    private func watched<T: Sendable>(logger: Logger, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let answer = FirstAnswer(continuation)
            let interval = Self.closeCheckInterval
            let closedLooks = NIOLoopBoundBox.makeBoxSendingValue(0, as: Int.self, eventLoop: eventLoop)
            let watch = eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { [self] task in
                guard isClosed else { return }
                closedLooks.value += 1
                guard closedLooks.value >= 2 else { return }
                task.cancel()
                if answer.resume(with: .failure(StoreError(.connectionFailed, "the database ended this session before answering (a restart, a failover or a terminated backend)"))) {
                    logger.warning("a statement was left unanswered on a closed database connection; it failed instead of waiting")
                }
            }
            Task {
                do {
                    answer.resume(with: .success(try await operation()))
                } catch {
                    answer.resume(with: .failure(error))
                }
                watch.cancel()
            }
        }
    }

    /// `ROLLBACK` after `error` ended a transaction's body, unless the connection has closed or `error` is the server
    /// ending the session (57P0x, 25P03, 08xxx: the connection is closing): the server rolled that transaction back, and
    /// the statement would never be answered.
    func rollBack(after error: any Error, logger: Logger) async throws {
        guard !isClosed, !StoreError.isEndedSession(error) else { return }
        try await answeredQuery("ROLLBACK", logger: logger)
    }
}

extension PostgresClient {
    /// One statement on a leased connection through ``PostgresConnection/watchedQuery(_:logger:file:line:)``, instead
    /// of `query(_:logger:)`. The pool may hand out a connection that has just closed (it learns of the close a moment
    /// later), where postgres-nio would never answer: such a connection is given back unused and another leased, a
    /// few times, a little later each time. The rows are read before the connection goes back to the pool: for
    /// statements with small answers.
    @discardableResult
    public func answeredQuery(_ query: PostgresQuery, logger: Logger, file: String = #fileID, line: Int = #line) async throws -> AnsweredRows {
        for attempt in 1...Self.closedLeaseAttempts {
            let rows = try await withConnection { connection -> [PostgresRow]? in
                guard !connection.isClosed else { return nil }
                return try await connection.watchedQuery(query, logger: logger, file: file, line: line).collect()
            }
            if let rows { return AnsweredRows(rows: rows) }
            if attempt < Self.closedLeaseAttempts { try await Task.sleep(for: .milliseconds(20 * attempt)) }
        }
        throw StoreError(.connectionFailed, "the database ended every session this client leased (a restart, a failover or a terminated backend)")
    }

    /// How many closed connections in a row ``answeredQuery(_:logger:file:line:)`` gives back before failing.
    static let closedLeaseAttempts = 5

    /// `BEGIN`, `body` and `COMMIT` on one leased connection, as postgres-nio's `withTransaction`, except that after a
    /// failure `ROLLBACK` is sent only while the connection is open (the server rolls back a session it ended), and
    /// errors come as thrown, not wrapped in `PostgresTransactionError`.
    func withOpenTransaction<Result>(
        logger: Logger,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> sending Result
    ) async throws -> sending Result {
        try await withConnection(isolation: isolation) { connection in
            try await connection.answeredQuery("BEGIN", logger: logger)
            let result: Result
            do {
                result = try await body(connection)
            } catch {
                try? await connection.rollBack(after: error, logger: logger)
                throw error
            }
            try await connection.answeredQuery("COMMIT", logger: logger)
            return result
        }
    }
}

/// The rows of ``PostgresClient/answeredQuery(_:logger:file:line:)``, read already; iterated and decoded as
/// postgres-nio's row sequence is.
public struct AnsweredRows: AsyncSequence, Sendable {
    public let rows: [PostgresRow]

    public struct AsyncIterator: AsyncIteratorProtocol {
        var rows: IndexingIterator<[PostgresRow]>

        public mutating func next() async throws -> PostgresRow? { rows.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(rows: rows.makeIterator()) }

    public func collect() -> [PostgresRow] { rows }
}
