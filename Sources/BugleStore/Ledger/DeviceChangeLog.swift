import Logging
import PostgresNIO

/// `bugle.device_changes`: the devices whose owner changed or that were deleted, noted by triggers on `bugle.devices`
/// (migration 14) and probed by the claim (``CurrentDevice``).
enum DeviceChangeLog {
    /// Margin kept before the oldest unfinished run's creation: a change whose transaction began before the run was
    /// made can commit after the run read its segment.
    static let margin = "1 day"

    /// Forgets the changes no unfinished run can need: older than every unfinished run (and with no run unfinished,
    /// than now), less ``margin``. Called when a run finishes; the delete walks the time index.
    static func prune(_ connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.answeredQuery(
            """
            DELETE FROM bugle.device_changes
             WHERE changed_at < (SELECT coalesce(min(created_at), now()) FROM bugle.runs
                                  WHERE status IN ('materializing', 'ready', 'running', 'paused')) - interval '\(unescaped: margin)'
            """,
            logger: logger
        ).collect()
    }
}
