import Logging
import PostgresNIO

/// Ends a run's recipients that were not sent and never will be (`bugle cancel`, a passed `delivery.not_after`):
/// those waiting (`pending`, `retry_wait`) become `cancelled` with an outcome code saying why.
enum UnsentRecipients {
    /// In the caller's transaction.
    static func cancel(runID: Int64, code: String, _ connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.answeredQuery(
            """
            UPDATE bugle.run_recipients SET state = 'cancelled', outcome_code = \(code), finished_at = now()
             WHERE run_id = \(runID) AND state IN ('pending', 'retry_wait')
            """,
            logger: logger
        ).collect()
    }
}
