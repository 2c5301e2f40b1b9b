import BugleCore
import Crypto
import Foundation
import Logging
import PostgresNIO

/// Creates runs and reads them back (`bugle runs`, `bugle report`), and acts on them from outside a worker.
public struct RunRepository: Sendable {
    private let client: PostgresClient
    private let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Inserts a run in state `materializing`.
    /// - Parameters:
    ///   - yaml: the campaign file's text (kept so `resume` rebuilds the exact campaign).
    ///   - periodKey: the dedupe period key (nil when `dedupe: none`, and for test sends).
    ///   - isTest: a `bugle send-test` run: no dedupe, no frequency cap, no copy rotation recorded.
    public func createRun(campaign: Campaign, yaml: String, periodKey: String?, isTest: Bool = false) async throws -> Int64 {
        let cap = isTest ? nil : campaign.delivery.frequencyCap
        let rotates = campaign.rotatesCopy && !isTest
        let scheduled = !isTest && (campaign.delivery.localTime.isActive || campaign.delivery.sendAt != nil)
        // Local-time devices are due on different days: each recipient's dedupe period is the one it is due in.
        let recipientPeriods = !isTest && periodKey != nil && campaign.delivery.localTime.isActive
        let sha = SHA256.hash(data: Array(yaml.utf8)).map { String(format: "%02x", $0) }.joined()
        let segmentSHA = SHA256.hash(data: Array(campaign.segment.sql.utf8)).map { String(format: "%02x", $0) }.joined()
        // Absolute: `resume` and `tick` rebuild the campaign from its text and this path, and resolve its relative
        // `providers:` against the path's folder; a path as typed (`relA.yaml`) resolved it against whatever directory
        // they ran in.
        let file = campaign.sourcePath.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        let rows = try await client.answeredQuery(
            """
            INSERT INTO bugle.runs (campaign, notification_type, period_key, status, campaign_file, campaign_yaml, campaign_sha256,
                                    ambiguous_policy, in_flight_window, max_attempts, segment_sha256,
                                    kind, rotates_copy, cap_count, cap_seconds, scheduled, recipient_periods)
            VALUES (\(campaign.name), \(campaign.notificationType), \(isTest ? nil : periodKey), 'materializing', \(file), \(yaml), \(sha),
                    \(campaign.delivery.ambiguousPolicy.rawValue), \(campaign.delivery.inFlightWindow), \(campaign.delivery.maxAttempts), \(segmentSHA),
                    \(isTest ? "test" : "campaign"), \(rotates), \(cap?.count), \(cap?.perSeconds), \(scheduled), \(recipientPeriods))
            RETURNING id
            """,
            logger: logger
        )
        for try await (id,) in rows.decode((Int64,).self) { return id }
        throw StoreError(.query, "could not create the run")
    }

    private static let columns = """
        id, campaign, notification_type, period_key, status, campaign_file, campaign_yaml, recipients_total, rows_scanned,
        duplicates_collapsed, pause_reason, failure_reason,
        to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
        to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
        to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
        extract(epoch FROM finished_at - started_at)::float8, kind, paused_seconds
        """

    /// One run, or nil.
    public func run(id: Int64) async throws -> RunRecord? {
        try await fetch(PostgresQuery(unsafeSQL: "SELECT \(Self.columns) FROM bugle.runs WHERE id = $1", binds: Self.bind(id))).first
    }

    /// The most recent runs, newest first.
    public func list(limit: Int = 50) async throws -> [RunRecord] {
        try await fetch(PostgresQuery(unsafeSQL: "SELECT \(Self.columns) FROM bugle.runs ORDER BY id DESC LIMIT $1", binds: Self.bind(Int64(limit))))
    }

    private static func bind(_ value: Int64) -> PostgresBindings {
        var binds = PostgresBindings(capacity: 1)
        binds.append(value)
        return binds
    }

    private func fetch(_ query: PostgresQuery) async throws -> [RunRecord] {
        let rows = try await client.answeredQuery(query, logger: logger)
        var result: [RunRecord] = []
        for try await row in rows {
            let c = row.makeRandomAccess()
            let status = RunStatus(rawValue: try c[4].decode(String.self)) ?? .failed
            result.append(
                RunRecord(
                    id: try c[0].decode(Int64.self), campaign: try c[1].decode(String.self),
                    notificationType: try c[2].decode(String.self), periodKey: try c[3].decode(String?.self),
                    status: status, campaignFile: try c[5].decode(String?.self), campaignYAML: try c[6].decode(String.self),
                    recipientsTotal: try c[7].decode(Int64?.self), rowsScanned: try c[8].decode(Int64?.self),
                    duplicatesCollapsed: try c[9].decode(Int64.self), pauseReason: try c[10].decode(String?.self),
                    failureReason: try c[11].decode(String?.self), createdAt: try c[12].decode(String.self),
                    startedAt: try c[13].decode(String?.self), finishedAt: try c[14].decode(String?.self),
                    durationSeconds: try c[15].decode(Double?.self), kind: try c[16].decode(String.self),
                    pausedSeconds: try c[17].decode(Double.self)
                )
            )
        }
        return result
    }

    /// The run's summary lines (rebuilt from the ledger first when `rebuild` is set).
    public func summary(runID: Int64, rebuild: Bool = true) async throws -> [SummaryLine] {
        if rebuild {
            let logger = self.logger
            try await client.withOpenTransaction(logger: logger) { connection in
                try await RunSummaries.rebuild(runID: runID, connection, logger: logger)
            }
        }
        let rows = try await client.answeredQuery(
            "SELECT platform, status, reason, count FROM bugle.run_summary WHERE run_id = \(runID) ORDER BY platform, status, reason",
            logger: logger
        )
        var lines: [SummaryLine] = []
        for try await (platform, status, reason, count) in rows.decode((String, String, String, Int64).self) {
            lines.append(SummaryLine(platform: platform, status: status, reason: reason, count: count))
        }
        return lines
    }

    /// Per A/B variant and status counts of the run (rebuilt with the summary; empty without variants).
    public func variantSummary(runID: Int64) async throws -> [VariantSummaryLine] {
        let rows = try await client.answeredQuery(
            "SELECT variant, status, count FROM bugle.run_variant_summary WHERE run_id = \(runID) ORDER BY variant, status",
            logger: logger
        )
        var lines: [VariantSummaryLine] = []
        for try await (variant, status, count) in rows.decode((String, String, Int64).self) {
            lines.append(VariantSummaryLine(variant: variant, status: status, count: count))
        }
        return lines
    }

    /// Scheduled runs (`send_at`, local-time delivery) that no worker holds and that have recipients due now:
    /// what `bugle tick` sends. Runs paused by `bugle pause` or a halt are left alone.
    public func dueScheduledRuns() async throws -> [Int64] {
        let rows = try await client.answeredQuery(
            """
            SELECT r.id FROM bugle.runs r
             WHERE r.scheduled AND (r.status IN ('ready', 'running') OR (r.status = 'paused' AND r.pause_reason LIKE 'scheduled%'))
               AND NOT EXISTS (SELECT 1 FROM bugle.run_workers w WHERE w.run_id = r.id AND w.expires_at >= now())
               AND EXISTS (SELECT 1 FROM bugle.run_recipients x
                            WHERE x.run_id = r.id AND x.state IN ('pending', 'retry_wait') AND x.next_attempt_at <= now())
             ORDER BY r.id
            """,
            logger: logger
        )
        var ids: [Int64] = []
        for try await (id,) in rows.decode((Int64,).self) { ids.append(id) }
        return ids
    }

    /// Deletes the ledger rows of a run whose materialization died part-way (status still `materializing`), so it can
    /// be materialized again from zero. The caller holds the run's ``MaterializerLease``.
    /// - Returns: The rows deleted.
    public func discardPartialLedger(runID: Int64) async throws -> Int64 {
        let rows = try await client.answeredQuery(
            """
            WITH gone AS (
              DELETE FROM bugle.run_recipients
               WHERE run_id = \(runID) AND EXISTS (SELECT 1 FROM bugle.runs WHERE id = \(runID) AND status = 'materializing')
              RETURNING 1)
            SELECT count(*)::bigint FROM gone
            """,
            logger: logger
        )
        for try await (count,) in rows.decode((Int64,).self) { return count }
        return 0
    }

    /// Closes a run no worker holds whose `delivery.not_after` has passed (``DeadlineClosure``): what `bugle tick` does
    /// with a scheduled run it finds past its deadline.
    /// - Returns: false when a worker is live on it, or it is already final.
    public func closeAtDeadline(runID: Int64, reason: String) async throws -> Bool {
        let logger = self.logger
        return try await client.withOpenTransaction(logger: logger) { connection -> Bool in
            _ = try await connection.answeredQuery("SELECT 1 FROM bugle.runs WHERE id = \(runID) FOR UPDATE", logger: logger).collect()
            let live = try await connection.answeredQuery(
                "SELECT count(*)::bigint FROM bugle.run_workers WHERE run_id = \(runID) AND expires_at >= now()", logger: logger)
            for try await (count,) in live.decode((Int64,).self) where count > 0 { return false }
            return try await DeadlineClosure.close(runID: runID, reason: reason, connection, logger: logger)
        }
    }

    /// Sets a run's status from outside its worker (`bugle pause`, `bugle cancel`). Running workers are fenced
    /// at their next claim. Cancel also moves unsent recipients to `cancelled`.
    /// - Returns: false when the run does not exist or is already final, or when it is still reading its segment and
    ///   `status` is not `cancelled`: a run paused mid-materialization would later be resumed with part of its audience.
    public func setStatus(runID: Int64, to status: RunStatus, reason: String) async throws -> Bool {
        let logger = self.logger
        return try await client.withOpenTransaction(logger: logger) { connection -> Bool in
            let rows = try await connection.answeredQuery(
                """
                UPDATE bugle.runs SET status = \(status.rawValue), pause_reason = \(reason),
                       finished_at = CASE WHEN \(status.rawValue) = 'cancelled' THEN now() ELSE finished_at END
                 WHERE id = \(runID) AND status NOT IN ('completed', 'failed', 'cancelled')
                   AND (status <> 'materializing' OR \(status.rawValue) = 'cancelled')
                RETURNING id
                """,
                logger: logger
            )
            var changed = false
            for try await _ in rows { changed = true }
            guard changed, status == .cancelled else { return changed }
            try await UnsentRecipients.cancel(runID: runID, code: "run_cancelled", connection, logger: logger)
            // A run cancelled while reading its segment was never made `ready`: its recipients are the rows written
            // before the cancel (its reader writes nothing after it: each page locks the run row and checks the status).
            _ = try await connection.answeredQuery(
                """
                UPDATE bugle.runs
                   SET recipients_total = (SELECT count(*) FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'cancelled'),
                       materializer = NULL, materializer_expires_at = NULL
                 WHERE id = \(runID) AND recipients_total IS NULL
                """,
                logger: logger
            ).collect()
            try await RunSummaries.releaseUnusedReservations(runID: runID, connection, logger: logger)
            try await RunSummaries.rebuild(runID: runID, connection, logger: logger)
            return true
        }
    }

    /// What ``settleCancelled(runID:)`` ended.
    public struct Settled: Sendable, Equatable {
        /// Rows left in flight by workers that are gone, now `unknown` (they may have been delivered).
        public var inFlight: Int64
        /// Rows waiting to be sent (handed back by a worker after the cancel), now `cancelled`.
        public var unsent: Int64
        public var isEmpty: Bool { inFlight == 0 && unsent == 0 }
    }

    /// Ends what a cancelled run's workers left behind: rows in flight whose worker's lease has lapsed (killed with
    /// kill -9, or still holding when the cancel came) become `unknown` (`crash_recovered`: they may have been
    /// delivered; under `resend` too, as a cancelled run sends nothing again), and rows handed back unsent after the
    /// cancel become `cancelled`; then the reservations of users nobody will notify are released and the summary is
    /// rebuilt. Rows of a worker whose lease is live are left to it: it records their answers as it leaves. Nothing
    /// happens to a run that is not cancelled.
    public func settleCancelled(runID: Int64) async throws -> Settled {
        let logger = self.logger
        return try await client.withOpenTransaction(logger: logger) { connection -> Settled in
            let status = try await connection.answeredQuery(
                "SELECT status FROM bugle.runs WHERE id = \(runID) FOR UPDATE", logger: logger)
            var cancelled = false
            for try await (value,) in status.decode((String,).self) { cancelled = value == RunStatus.cancelled.rawValue }
            guard cancelled else { return Settled(inFlight: 0, unsent: 0) }
            let unheld = try await connection.answeredQuery(
                """
                UPDATE bugle.run_recipients r
                   SET state = 'unknown', outcome_code = 'crash_recovered', finished_at = now()
                 WHERE r.run_id = \(runID) AND r.state = 'in_flight'
                   AND NOT EXISTS (SELECT 1 FROM bugle.run_workers w
                                    WHERE w.run_id = \(runID) AND w.epoch = r.claim_epoch AND w.expires_at > now())
                RETURNING r.seq
                """,
                logger: logger)
            var inFlight: Int64 = 0
            for try await _ in unheld { inFlight += 1 }
            let waiting = try await connection.answeredQuery(
                "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state IN ('pending', 'retry_wait')",
                logger: logger)
            var unsent: Int64 = 0
            for try await (count,) in waiting.decode((Int64,).self) { unsent = count }
            let settled = Settled(inFlight: inFlight, unsent: unsent)
            guard !settled.isEmpty else { return settled }
            try await UnsentRecipients.cancel(runID: runID, code: "run_cancelled", connection, logger: logger)
            try await RunSummaries.releaseUnusedReservations(runID: runID, connection, logger: logger)
            try await RunSummaries.rebuild(runID: runID, connection, logger: logger)
            return settled
        }
    }

    /// Pauses a run for an operator (`bugle pause`): a `ready` or `running` run, or one paused only until its next
    /// recipients are due (`scheduled: …`, which `bugle tick` would send). A run paused for any other reason keeps it:
    /// a halt's reason is the diagnosis `bugle resume` needs acted on first.
    /// - Returns: true when this call paused the run.
    public func pause(runID: Int64, reason: String) async throws -> Bool {
        let rows = try await client.answeredQuery(
            """
            UPDATE bugle.runs SET status = 'paused', pause_reason = \(reason)
             WHERE id = \(runID) AND (status IN ('ready', 'running') OR (status = 'paused' AND pause_reason LIKE 'scheduled%'))
            RETURNING id
            """,
            logger: logger
        )
        for try await _ in rows { return true }
        return false
    }

    /// Unfinished recipients per provider lane (`apns`, `fcm`, `apns_legacy`), to check lanes before sending.
    public func unfinishedByProvider(runID: Int64) async throws -> [String: Int64] {
        let rows = try await client.answeredQuery(
            """
            SELECT provider, count(*)::bigint FROM bugle.run_recipients
             WHERE run_id = \(runID) AND state IN ('pending', 'in_flight', 'retry_wait')
             GROUP BY provider
            """,
            logger: logger
        )
        var counts: [String: Int64] = [:]
        for try await (provider, count) in rows.decode((String, Int64).self) { counts[provider] = count }
        return counts
    }

    /// A worker holding a lease on a run.
    public struct Worker: Sendable, Equatable {
        public var epoch: Int64
        public var owner: String
        /// Seconds until its lease expires unless renewed.
        public var expiresIn: Double

        public init(epoch: Int64, owner: String, expiresIn: Double) {
            self.epoch = epoch
            self.owner = owner
            self.expiresIn = expiresIn
        }
    }

    /// The run's workers whose leases have not expired.
    public func liveWorkers(runID: Int64) async throws -> [Worker] {
        try await workers(runID: runID, includingLapsed: false)
    }

    /// The process reading a `materializing` run's segment, when its lease has not lapsed: its owner (`host:pid:…`).
    public func liveReader(runID: Int64) async throws -> String? {
        let rows = try await client.answeredQuery(
            """
            SELECT materializer FROM bugle.runs
             WHERE id = \(runID) AND status = 'materializing' AND materializer IS NOT NULL AND materializer_expires_at >= now()
            """,
            logger: logger
        )
        for try await (owner,) in rows.decode((String,).self) { return owner }
        return nil
    }

    /// The run's workers, also those whose lease has lapsed but who were not reaped yet (`expiresIn` below zero) when
    /// `includingLapsed`.
    public func workers(runID: Int64, includingLapsed: Bool) async throws -> [Worker] {
        let rows = try await client.answeredQuery(
            """
            SELECT epoch, owner, extract(epoch FROM expires_at - now())::float8 FROM bugle.run_workers
             WHERE run_id = \(runID) AND (\(includingLapsed) OR expires_at >= now()) ORDER BY epoch
            """,
            logger: logger
        )
        var workers: [Worker] = []
        for try await (epoch, owner, expiresIn) in rows.decode((Int64, String, Double).self) {
            workers.append(Worker(epoch: epoch, owner: owner, expiresIn: expiresIn))
        }
        return workers
    }

    /// Recipients of the run in flight under any of `epochs`.
    public func inFlight(runID: Int64, epochs: [Int64]) async throws -> Int64 {
        let rows = try await client.answeredQuery(
            """
            SELECT count(*)::bigint FROM bugle.run_recipients
             WHERE run_id = \(runID) AND state = 'in_flight' AND claim_epoch = ANY(\(epochs)::bigint[])
            """,
            logger: logger
        )
        var count: Int64 = 0
        for try await (value,) in rows.decode((Int64,).self) { count = value }
        return count
    }

    /// Ends one worker's lease now (its process is known to be gone); the next lease taken reaps it and
    /// recovers its in-flight recipients.
    public func expireWorker(runID: Int64, epoch: Int64) async throws -> Bool {
        let rows = try await client.answeredQuery(
            "UPDATE bugle.run_workers SET expires_at = now() - interval '1 second' WHERE run_id = \(runID) AND epoch = \(epoch) RETURNING epoch",
            logger: logger
        )
        var changed = false
        for try await _ in rows { changed = true }
        return changed
    }
}
