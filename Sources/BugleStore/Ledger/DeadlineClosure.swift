import Logging
import PostgresNIO

/// Closes a run whose `delivery.not_after` has passed: nothing can send its recipients any more (`resume` and `tick`
/// refuse a campaign past its deadline), so those not yet sent become `cancelled` with outcome `not_after_passed`,
/// their users' dedupe reservations and frequency-cap slots are released, and the run is `completed` with the reason.
/// Such a run used to stay `paused` for good, holding its reservations: users it never reached were skipped by later
/// campaigns of the same type (for ever with `dedupe: once`).
enum DeadlineClosure {
    /// The outcome code of recipients the deadline left unsent.
    static let outcomeCode = "not_after_passed"

    /// Closes run `runID` in the caller's transaction, which holds the run row's lock and has checked that no worker
    /// is live on it.
    /// - Returns: true when the run was closed (it was not already final).
    static func close(runID: Int64, reason: String, _ connection: PostgresConnection, logger: Logger) async throws -> Bool {
        try await UnsentRecipients.cancel(runID: runID, code: outcomeCode, connection, logger: logger)
        let rows = try await connection.answeredQuery(
            """
            UPDATE bugle.runs
               SET status = 'completed', pause_reason = \(reason), finished_at = now(), lease_owner = NULL, lease_expires_at = NULL
             WHERE id = \(runID) AND status IN ('ready', 'running', 'paused')
            RETURNING id
            """,
            logger: logger
        )
        var closed = false
        for try await _ in rows { closed = true }
        if closed { try await RunSummaries.releaseUnusedReservations(runID: runID, connection, logger: logger) }
        try await RunSummaries.rebuild(runID: runID, connection, logger: logger)
        return closed
    }
}
