import Logging
import PostgresNIO

/// Builds the per-run summary tables from the ledger, so CSV and summary always agree.
enum RunSummaries {
    /// Rewrites `bugle.run_summary` and `runs.totals` for a run from `bugle.run_recipients`.
    static func rebuild(runID: Int64, _ connection: PostgresConnection, logger: Logger) async throws {
        // Rebuilds of one run take turns (two workers finishing at once, or a report beside a finish): the run row's
        // lock orders them, so each DELETE sees the other's INSERT.
        _ = try await connection.answeredQuery("SELECT 1 FROM bugle.runs WHERE id = \(runID) FOR NO KEY UPDATE", logger: logger).collect()
        _ = try await connection.answeredQuery("DELETE FROM bugle.run_summary WHERE run_id = \(runID)", logger: logger).collect()
        _ = try await connection.answeredQuery(
            """
            INSERT INTO bugle.run_summary (run_id, platform, status, reason, count)
            SELECT \(runID), platform, state, coalesce(outcome_code, ''), count(*)
              FROM bugle.run_recipients WHERE run_id = \(runID)
             GROUP BY platform, state, coalesce(outcome_code, '')
            """,
            logger: logger
        ).collect()
        _ = try await connection.answeredQuery("DELETE FROM bugle.run_variant_summary WHERE run_id = \(runID)", logger: logger).collect()
        _ = try await connection.answeredQuery(
            """
            INSERT INTO bugle.run_variant_summary (run_id, variant, status, count)
            SELECT \(runID), variant, state, count(*) FROM bugle.run_recipients
             WHERE run_id = \(runID) AND variant IS NOT NULL GROUP BY variant, state
            """,
            logger: logger
        ).collect()
        _ = try await connection.answeredQuery(
            """
            UPDATE bugle.runs SET totals = coalesce(
                (SELECT jsonb_object_agg(status, n) FROM
                    (SELECT status, sum(count)::bigint AS n FROM bugle.run_summary WHERE run_id = \(runID) GROUP BY status) x),
                '{}'::jsonb)
             WHERE id = \(runID)
            """,
            logger: logger
        ).collect()
    }

    /// Frees dedupe reservations and frequency-cap slots of users none of whose devices was notified (so a later
    /// campaign may reach them). A dedupe reservation of a recipient's own period (local-time delivery) is kept by the
    /// user's devices in that period only. A recipient that ended `unknown` may have been notified (a timeout, a lost
    /// connection, a crash), so it keeps its user's reservation and slot: they were released, and the next campaign of
    /// the type notified the user again the same period, even under `ambiguous: drop`.
    static func releaseUnusedReservations(runID: Int64, _ connection: PostgresConnection, logger: Logger) async throws {
        for (table, samePeriod) in [("notification_log", "AND coalesce(r.period_key, l.period_key) = l.period_key"), ("user_sends", "")] {
            _ = try await connection.answeredQuery(
                PostgresQuery(
                    unsafeSQL: """
                        DELETE FROM bugle.\(table) l
                         WHERE l.run_id = $1 AND l.status = 'reserved'
                           AND NOT EXISTS (SELECT 1 FROM bugle.run_recipients r
                                            WHERE r.run_id = $1 AND r.user_id = l.user_id \(samePeriod)
                                              AND r.state IN ('sent', 'unknown', 'pending', 'in_flight', 'retry_wait'))
                        """,
                    binds: Self.bind(runID)),
                logger: logger
            ).collect()
        }
    }

    private static func bind(_ runID: Int64) -> PostgresBindings {
        var binds = PostgresBindings(capacity: 1)
        binds.append(runID)
        return binds
    }
}
