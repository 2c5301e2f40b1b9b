import BugleCore
import Foundation
import Logging
import PostgresNIO

/// The delivery ledger on PostgreSQL (RELIABILITY.md §3.4): lease with fencing epoch, claim with a hard
/// in-flight window and dedupe reservation, group-committed outcomes with token deactivation.
public struct PostgresCampaignStore: CampaignStore {
    private let client: PostgresClient
    private let logger: Logger
    private let sessionTag: String?
    private let scheduleClock: (@Sendable () -> Double)?
    private let claimFloors = ClaimFloors()

    /// - Parameters:
    ///   - client: The database.
    ///   - sessionTag: The tag this process's sessions carry at the end of their `application_name` (see
    ///     ``DatabaseConfiguration/taggingSessions(_:)``), recorded with each lease so a worker that takes an expired
    ///     lease over can end the frozen worker's sessions; nil: not recorded.
    ///   - scheduleClock: UNIX seconds that decide which recipients are due (tests of local-time delivery advance it
    ///     through a day); nil: the database's `now()`.
    ///   - logger: Logger.
    public init(client: PostgresClient, sessionTag: String? = nil, scheduleClock: (@Sendable () -> Double)? = nil, logger: Logger) {
        self.client = client
        self.sessionTag = sessionTag
        self.scheduleClock = scheduleClock
        self.logger = logger
    }

    /// How long a ledger statement waits for a lock another session holds (an operator's `LOCK TABLE`, a long DDL)
    /// before the server cancels it with SQLSTATE 55P03 (RELIABILITY.md §2.2 #14). The runner retries a failed ledger
    /// operation with backoff, logging the reason; without a lock timeout an attempt abandoned at its deadline would
    /// leave its backend queued on the lock, holding a pooled connection, and every retry would queue another.
    static let lockTimeout = "5s"

    /// How long a session may sit idle inside a transaction before the server ends it (milliseconds): a worker frozen
    /// mid-transaction (SIGSTOP, a stalled host) would otherwise hold its row locks and stall every other worker's
    /// lease takeover. Also a startup parameter of Bugle's sessions (``DatabaseConfiguration``), unless a connection
    /// pooler refused it.
    public static let idleInTransactionTimeout = "15000"

    /// One ledger transaction, with its settings for this transaction only (`set_config(…, true)`, one statement: the
    /// pooled session's own settings are untouched, and behind a transaction-pooling PgBouncer, which refuses them as
    /// startup parameters, they still apply): statements wait at most ``lockTimeout`` for a lock, a session frozen
    /// inside the transaction is ended after ``idleInTransactionTimeout``, and JIT stays off (see
    /// ``DatabaseConfiguration/postgresClientConfiguration()``).
    private func ledgerTransaction<T>(_ body: (PostgresConnection) async throws -> sending T) async throws -> sending T {
        let logger = self.logger
        return try await client.withOpenTransaction(logger: logger) { connection in
            try await connection.answeredQuery(
                """
                SELECT set_config('lock_timeout', '\(unescaped: Self.lockTimeout)', true),
                       set_config('idle_in_transaction_session_timeout', '\(unescaped: Self.idleInTransactionTimeout)', true),
                       set_config('jit', 'off', true)
                """,
                logger: logger)
            return try await body(connection)
        }
    }

    // MARK: Lease

    public func acquireLease(runID: Int64, owner: String, ttlSeconds: Int, mode: LeaseMode) async throws -> Lease? {
        let logger = self.logger
        let sessionTag = self.sessionTag
        try await endExpiredSessions(runID: runID)
        return try await ledgerTransaction { connection -> Lease? in
            // The run row's FOR UPDATE serialises lease acquisitions and waits out claims in progress.
            let current = try await connection.answeredQuery("SELECT status FROM bugle.runs WHERE id = \(runID) FOR UPDATE", logger: logger)
            var status: RunStatus?
            for try await (raw,) in current.decode((String,).self) { status = RunStatus(rawValue: raw) }
            guard let status else { return nil }
            if status == .running {
                // Every worker died (kill -9, a crash): the time since the last lease expired was not sending time.
                _ = try await connection.answeredQuery(
                    """
                    UPDATE bugle.runs SET paused_seconds = paused_seconds + coalesce(bugle.run_dead_seconds(id, started_at), 0)
                     WHERE id = \(runID) AND started_at IS NOT NULL
                    """,
                    logger: logger
                ).collect()
            }
            // Expired workers are reaped first; deleting a worker row waits for its group commits in progress
            // (they hold FOR KEY SHARE on it), and its later commits find no row and change nothing.
            _ = try await Self.reapExpired(runID: runID, connection, logger: logger)
            let live = try await Self.liveWorkers(runID: runID, connection, logger: logger)
            switch mode {
            case .exclusive:
                guard live == 0, [.ready, .running, .paused].contains(status) else { return nil }
            case .join:
                guard status == .running else { return nil }
            }
            let rows = try await connection.answeredQuery(
                """
                UPDATE bugle.runs
                   SET lease_owner = \(owner), lease_epoch = lease_epoch + 1,
                       lease_expires_at = now() + make_interval(secs => \(Double(ttlSeconds))),
                       status = 'running', started_at = coalesce(started_at, now()), pause_reason = NULL
                 WHERE id = \(runID)
                RETURNING lease_epoch
                """,
                logger: logger
            )
            var granted: Int64?
            for try await (epoch,) in rows.decode((Int64,).self) { granted = epoch }
            guard let epoch = granted else { return nil }
            _ = try await connection.answeredQuery(
                """
                INSERT INTO bugle.run_workers (run_id, epoch, owner, expires_at, session_tag)
                VALUES (\(runID), \(epoch), \(owner), now() + make_interval(secs => \(Double(ttlSeconds))), \(sessionTag))
                """,
                logger: logger
            ).collect()
            // Every in-flight row no live worker holds (a crashed or reaped worker's) follows the ambiguous policy.
            let recovered = try await Self.recoverUnheld(runID: runID, connection, logger: logger)
            return Lease(runID: runID, owner: owner, epoch: epoch, recoveredInFlight: recovered, liveWorkers: live + 1)
        }
    }

    public func renewLease(_ lease: Lease, ttlSeconds: Int) async throws -> LeaseRenewal {
        let logger = self.logger
        try await endExpiredSessions(runID: lease.runID)
        return try await ledgerTransaction { connection -> LeaseRenewal in
            let rows = try await connection.answeredQuery(
                """
                UPDATE bugle.run_workers w SET expires_at = now() + make_interval(secs => \(Double(ttlSeconds)))
                  FROM bugle.runs r
                 WHERE w.run_id = \(lease.runID) AND w.epoch = \(lease.epoch) AND r.id = w.run_id AND r.status = 'running'
                RETURNING w.epoch
                """,
                logger: logger
            )
            var held = false
            for try await _ in rows { held = true }
            guard held else {
                // Not running any more: say how it ended, so a worker whose peer completed the run ends completed.
                let status = try await status(of: lease.runID, connection)
                return LeaseRenewal(held: false, liveWorkers: 0, recoveredInFlight: 0, runStatus: status)
            }
            // Peers that stopped renewing are reaped here, so their recipients are taken over within a renewal interval of expiry.
            let reaped = try await Self.reapExpired(runID: lease.runID, connection, logger: logger)
            let recovered = reaped.isEmpty ? 0 : try await Self.recoverUnheld(runID: lease.runID, connection, logger: logger)
            let live = try await Self.liveWorkers(runID: lease.runID, connection, logger: logger)
            return LeaseRenewal(held: true, liveWorkers: max(1, live), recoveredInFlight: recovered)
        }
    }

    /// Ends the database sessions of the run's workers whose leases expired (this role's sessions only), before any
    /// lock is taken: a frozen worker's backend can sit blocked writing a result its process never reads, holding the
    /// run's row locks beyond `idle_in_transaction_session_timeout`'s reach, and the reaping below would wait on it.
    /// Its transaction rolls back; anything it had committed was fenced already.
    private func endExpiredSessions(runID: Int64) async throws {
        _ = try await client.answeredQuery(
            """
            SELECT pg_terminate_backend(a.pid)
              FROM pg_stat_activity a
              JOIN bugle.run_workers w ON right(a.application_name, length(w.session_tag) + 1) = ' ' || w.session_tag
             WHERE w.run_id = \(runID) AND w.expires_at < now() AND w.session_tag IS NOT NULL
               AND a.pid <> pg_backend_pid() AND a.usename = current_user AND a.datname = current_database()
            """,
            logger: logger
        ).collect()
    }

    /// Deletes the run's worker rows whose leases expired. - Returns: their epochs.
    private static func reapExpired(runID: Int64, _ connection: PostgresConnection, logger: Logger) async throws -> [Int64] {
        let rows = try await connection.answeredQuery(
            "DELETE FROM bugle.run_workers WHERE run_id = \(runID) AND expires_at < now() RETURNING epoch",
            logger: logger
        )
        var epochs: [Int64] = []
        for try await (epoch,) in rows.decode((Int64,).self) { epochs.append(epoch) }
        return epochs
    }

    private static func liveWorkers(runID: Int64, _ connection: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await connection.answeredQuery(
            "SELECT count(*)::int FROM bugle.run_workers WHERE run_id = \(runID) AND expires_at >= now()",
            logger: logger
        )
        var live = 0
        for try await (count,) in rows.decode((Int,).self) { live = count }
        return live
    }

    /// In-flight rows whose epoch has no worker row: `retry_wait` under `resend`, `unknown` under `drop`.
    private static func recoverUnheld(runID: Int64, _ connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        let rows = try await connection.answeredQuery(
            """
            UPDATE bugle.run_recipients r
               SET state = CASE WHEN run.ambiguous_policy = 'resend' THEN 'retry_wait' ELSE 'unknown' END,
                   next_attempt_at = now(), outcome_code = 'crash_recovered',
                   finished_at = CASE WHEN run.ambiguous_policy = 'resend' THEN NULL ELSE now() END
              FROM bugle.runs run
             WHERE run.id = \(runID) AND r.run_id = \(runID) AND r.state = 'in_flight'
               AND NOT EXISTS (SELECT 1 FROM bugle.run_workers w WHERE w.run_id = \(runID) AND w.epoch = r.claim_epoch)
            RETURNING r.seq
            """,
            logger: logger
        )
        var count: Int64 = 0
        for try await _ in rows { count += 1 }
        return count
    }

    public func releaseUnheld(_ lease: Lease, claimIDs: [Int64]) async throws -> Int64 {
        guard !claimIDs.isEmpty else { return 0 }
        let rows = try await client.answeredQuery(
            """
            UPDATE bugle.run_recipients
               SET state = 'retry_wait', next_attempt_at = now(), attempts = attempts - 1, outcome_code = 'claim_answer_lost'
             WHERE run_id = \(lease.runID) AND state = 'in_flight' AND claim_epoch = \(lease.epoch)
               AND claim_id = ANY(\(claimIDs)::bigint[])
            RETURNING seq
            """,
            logger: logger
        )
        var count: Int64 = 0
        for try await _ in rows { count += 1 }
        return count
    }

    // MARK: Claim

    public func claim(_ lease: Lease, limits: [ProviderKind: Int], claimID: Int64) async throws -> ClaimResult {
        let logger = self.logger
        let lanes = limits.filter { $0.value > 0 }.sorted { $0.key.rawValue < $1.key.rawValue }
        guard !lanes.isEmpty else { return .claimed([]) }
        let laneNames = lanes.map(\.key.rawValue)
        let laneLimits = lanes.map(\.value)
        let laneFloors = lanes.map { claimFloors.floor(runID: lease.runID, lane: $0.key) }
        let total = laneLimits.reduce(0, +)
        let clock = scheduleClock?()
        // Per lane: the smallest `seq` among this claim's picks due at once (`-infinity`), or `.max` when it picked
        // none. The floors rise only once the claim has committed.
        let (result, firstImmediate) = try await ledgerTransaction { connection -> (ClaimResult, [String: Int64]) in
            // Statement 1: fence and serialise claimers of this run. FOR NO KEY UPDATE does not conflict with the
            // FOR KEY SHARE of group commits, so claiming and recording overlap; it does conflict with a takeover.
            let fence = try await connection.answeredQuery(
                """
                SELECT in_flight_window, notification_type, period_key, cap_count, cap_seconds,
                       extract(epoch FROM created_at - interval '\(unescaped: DeviceChangeLog.margin)')::float8 FROM bugle.runs
                 WHERE id = \(lease.runID) AND status = 'running'
                FOR NO KEY UPDATE
                """,
                logger: logger
            )
            var run: (Int, String, String?)?
            var cap: (count: Int, seconds: Int)?
            // Changes of owner older than this cannot concern the run (its segment was read after them).
            var changesSince = 0.0
            for try await (window, type, period, capCount, capSeconds, since) in fence.decode((Int, String, String?, Int?, Int?, Double).self) {
                run = (window, type, period)
                changesSince = since
                if let capCount, let capSeconds { cap = (capCount, capSeconds) }
            }
            // This worker's own lease must be live; FOR KEY SHARE makes a reaper wait until this claim commits, so
            // it recovers the rows claimed here too.
            let mine = try await connection.answeredQuery(
                """
                SELECT 1 FROM bugle.run_workers WHERE run_id = \(lease.runID) AND epoch = \(lease.epoch) AND expires_at > now()
                FOR KEY SHARE
                """,
                logger: logger
            ).collect()
            guard let (window, notificationType, periodKey) = run, !mine.isEmpty else {
                return (.fenced(try await status(of: lease.runID, connection)), [:])
            }
            // Statement 2: a fresh snapshot after the lock, so the in-flight count is current. The picks take no row
            // locks: statement 1 already serialises this run's claimers, and the UPDATE re-checks each row's state, so
            // a row another writer (a cancel) moved meanwhile is left alone. `FOR UPDATE SKIP LOCKED` here wrote a
            // lock into every picked row before the UPDATE rewrote it.
            let rows = try await connection.answeredQuery(
                """
                WITH room AS (
                  SELECT greatest(0, \(window) - count(*)) AS n FROM bugle.run_recipients
                   WHERE run_id = \(lease.runID) AND state = 'in_flight'),
                lane_picks AS (
                  -- Each lane's own oldest due recipients, so one lane's backlog never crowds out another's.
                  -- Each lane starts at its floor (ClaimFloors): the entries of rows it already claimed are not read.
                  SELECT p.seq, p.next_attempt_at
                    FROM unnest(\(laneNames)::text[], \(laneLimits)::int[], \(laneFloors)::bigint[]) AS l(provider, n, floor)
                  CROSS JOIN LATERAL (
                    SELECT r.seq, r.next_attempt_at FROM bugle.run_recipients r
                     WHERE r.run_id = \(lease.runID) AND r.provider = l.provider AND r.state IN ('pending', 'retry_wait')
                       AND r.next_attempt_at <= coalesce(to_timestamp(\(clock)::float8), now())
                       AND (r.next_attempt_at, r.seq) >= ('-infinity'::timestamptz, l.floor)
                     ORDER BY r.next_attempt_at, r.seq
                     LIMIT l.n) p),
                picked AS (
                  SELECT seq FROM lane_picks ORDER BY next_attempt_at, seq
                   LIMIT least(\(total), coalesce((SELECT n FROM room), 0))),
                claimed AS (
                  UPDATE bugle.run_recipients r
                     SET state = 'in_flight', claim_epoch = \(lease.epoch), claim_id = \(claimID), claimed_at = now(), attempts = r.attempts + 1
                   WHERE r.run_id = \(lease.runID) AND r.seq = ANY((SELECT array_agg(seq) FROM picked)::bigint[])
                     AND r.state IN ('pending', 'retry_wait')
                  RETURNING r.seq, r.device_id, r.user_id, r.token, r.platform, r.locale, r.timezone, r.variables::text AS variables,
                            r.attempts, r.variant, r.copy_index, r.provider,
                            CASE WHEN r.next_attempt_at = '-infinity' THEN r.seq END AS immediate)
                -- One row of arrays (ClaimedColumns), not a row per recipient.
                SELECT \(unescaped: ClaimedColumns.selectList) FROM claimed
                """,
                logger: logger
            )
            var columns: ClaimedColumns?
            for try await row in rows { columns = try ClaimedColumns(row) }
            let claimed = columns?.recipients ?? []
            let firstImmediate = columns?.firstImmediate ?? [:]
            guard !claimed.isEmpty else { return (.claimed([]), firstImmediate) }
            let seqs = claimed.map(\.seq)
            var skipped = Set<Int64>()
            // Tokens deactivated since the segment was read are not sent, nor devices that moved to another user (the
            // copy may be personalised for the old one) or were deleted. The small partial index of inactive devices
            // and the change log (`bugle.device_changes`, written by triggers on `devices`) answer for the whole claim
            // (one probe per device each, no ledger or device row read for unchanged active ones), and only the rows
            // they name are written. Probing `devices` and the ledger for every claimed row instead was about 6 µs per
            // recipient at 1,000,000 devices. The log is probed only when it holds a change recent enough to matter
            // (one probe of its time index; otherwise about 1 µs per claimed device).
            let deviceIDs = claimed.map(\.deviceID)
            let changedDevices = try await connection.answeredQuery(
                """
                SELECT x.id, d.token, d.user_id, d.is_active
                  FROM (SELECT id FROM bugle.devices WHERE NOT is_active AND id = ANY(\(deviceIDs))
                        UNION SELECT c.device_id FROM bugle.device_changes c
                               WHERE c.device_id = ANY(\(deviceIDs))
                                 AND EXISTS (SELECT 1 FROM bugle.device_changes n WHERE n.changed_at > to_timestamp(\(changesSince)))) x
                  LEFT JOIN bugle.devices d ON d.id = x.id
                """,
                logger: logger
            )
            var current: [Int64: CurrentDevice] = [:]
            for try await (id, token, userID, active) in changedDevices.decode((Int64, String?, String?, Bool?).self) {
                current[id] = CurrentDevice(token: token, userID: userID, isActive: active)
            }
            var skips: [(seq: Int64, code: String)] = []
            for recipient in claimed {
                if let code = current[recipient.deviceID]?.skipCode(for: recipient) { skips.append((recipient.seq, code)) }
            }
            if !skips.isEmpty {
                let inactive = try await connection.answeredQuery(
                    """
                    UPDATE bugle.run_recipients r
                       SET state = 'skipped_inactive', outcome_code = s.code, finished_at = now(), attempts = r.attempts - 1
                      FROM unnest(\(skips.map(\.seq))::bigint[], \(skips.map(\.code))::text[]) AS s(seq, code)
                     WHERE r.run_id = \(lease.runID) AND r.seq = s.seq
                    RETURNING r.seq
                    """,
                    logger: logger
                )
                for try await (seq,) in inactive.decode((Int64,).self) { skipped.insert(seq) }
            }
            if let periodKey {
                // Reserve the notification log for these users in this transaction; the primary key arbitrates
                // between concurrent campaigns. Users reserved by another run are skipped. A recipient's own period
                // (local-time delivery, ``RecipientPeriods``) stands in for the run's.
                _ = try await connection.answeredQuery(
                    """
                    INSERT INTO bugle.notification_log (user_id, notification_type, period_key, run_id, status)
                    SELECT u.user_id, \(notificationType), u.period_key, \(lease.runID), 'reserved'
                      FROM (SELECT DISTINCT r.user_id, coalesce(r.period_key, \(periodKey)) AS period_key FROM bugle.run_recipients r
                             WHERE r.run_id = \(lease.runID) AND r.seq = ANY(\(seqs)) AND r.state = 'in_flight') u
                     ORDER BY u.user_id, u.period_key  -- one lock order for every claimer: concurrent campaigns cannot deadlock
                    ON CONFLICT DO NOTHING
                    """,
                    logger: logger
                ).collect()
                let deduped = try await connection.answeredQuery(
                    """
                    UPDATE bugle.run_recipients r
                       SET state = 'skipped_dedup', outcome_code = 'already_notified', finished_at = now(), attempts = r.attempts - 1
                     WHERE r.run_id = \(lease.runID) AND r.seq = ANY(\(seqs)) AND r.state = 'in_flight'
                       AND (SELECT l.run_id FROM bugle.notification_log l
                             WHERE l.user_id = r.user_id AND l.notification_type = \(notificationType)
                               AND l.period_key = coalesce(r.period_key, \(periodKey))) <> \(lease.runID)
                    RETURNING r.seq
                    """,
                    logger: logger
                )
                for try await (seq,) in deduped.decode((Int64,).self) { skipped.insert(seq) }
            }
            if let cap {
                let capped = try await Self.applyFrequencyCap(lease, seqs: seqs, count: cap.count, seconds: cap.seconds, connection, logger: logger)
                for seq in capped { skipped.insert(seq) }
                if let periodKey, !capped.isEmpty {
                    // A user the cap skips gets nothing from this run: the dedupe reservation taken above for them goes
                    // now, not when the run ends (a scheduled or local-time run kept it for a day, blocking the type's
                    // other campaigns). A capped user holds no slot of this run, so none of their devices was sent by
                    // it; one claimed later, if the window has moved on, reserves again.
                    _ = try await connection.answeredQuery(
                        """
                        DELETE FROM bugle.notification_log l
                         USING (SELECT DISTINCT r.user_id, coalesce(r.period_key, \(periodKey)) AS period_key FROM bugle.run_recipients r
                                 WHERE r.run_id = \(lease.runID) AND r.seq = ANY(\(capped))) u
                         WHERE l.user_id = u.user_id AND l.notification_type = \(notificationType) AND l.period_key = u.period_key
                           AND l.run_id = \(lease.runID) AND l.status = 'reserved'
                        """,
                        logger: logger
                    ).collect()
                }
            }
            if skipped.isEmpty { return (.claimed(claimed), firstImmediate) }
            return (.claimed(claimed.filter { !skipped.contains($0.seq) }), firstImmediate)
        }
        for (provider, first) in firstImmediate {
            guard let lane = ProviderKind(rawValue: provider) else { continue }
            // Rows due at once sort first, so a lane whose picks hold none has none left unclaimed, and its floor
            // passes them all (`.max`).
            claimFloors.raise(runID: lease.runID, lane: lane, to: first)
        }
        return result
    }

    /// `max_per_user`: users of the claimed rows whom `count` runs already reached in the last `seconds` (sent
    /// notifications of any campaign, from the ledger's sent-by-user index, plus the slots other capped runs hold) are
    /// skipped; the others take a slot (a row in `user_sends`, one per user and run). Each user's check runs under a
    /// transaction-scoped advisory lock taken in one global order, so two capped campaigns claiming the same user at
    /// once cannot both take the last slot.
    /// - Returns: the skipped rows' seqs.
    private static func applyFrequencyCap(_ lease: Lease, seqs: [Int64], count: Int, seconds: Int, _ connection: PostgresConnection, logger: Logger) async throws -> [Int64] {
        _ = try await connection.answeredQuery(
            """
            SELECT pg_advisory_xact_lock(hashtextextended('bugle.user_sends:' || u.user_id, 0))
              FROM (SELECT DISTINCT r.user_id FROM bugle.run_recipients r
                     WHERE r.run_id = \(lease.runID) AND r.seq = ANY(\(seqs)) AND r.state = 'in_flight' ORDER BY r.user_id) u
            """,
            logger: logger
        ).collect()
        let capped = try await connection.answeredQuery(
            """
            UPDATE bugle.run_recipients r
               SET state = 'skipped_frequency', outcome_code = 'frequency_cap', finished_at = now(), attempts = r.attempts - 1
             WHERE r.run_id = \(lease.runID) AND r.seq = ANY(\(seqs)) AND r.state = 'in_flight'
               AND NOT EXISTS (SELECT 1 FROM bugle.user_sends s WHERE s.user_id = r.user_id AND s.run_id = \(lease.runID))
               AND (SELECT count(*) FROM (
                      -- Runs (test sends excepted) that notified the user in the window ...
                      SELECT x.run_id FROM bugle.run_recipients x
                       WHERE x.user_id = r.user_id AND x.state = 'sent'
                         AND x.finished_at > now() - make_interval(secs => \(Double(seconds)))
                         AND NOT EXISTS (SELECT 1 FROM bugle.runs t WHERE t.id = x.run_id AND t.kind = 'test')
                      UNION
                      -- ... and capped runs holding a slot for the user that may not have sent yet.
                      SELECT s.run_id FROM bugle.user_sends s
                       WHERE s.user_id = r.user_id AND s.at > now() - make_interval(secs => \(Double(seconds)))) reached) >= \(count)
            RETURNING r.seq
            """,
            logger: logger
        )
        var skipped: [Int64] = []
        for try await (seq,) in capped.decode((Int64,).self) { skipped.append(seq) }
        _ = try await connection.answeredQuery(
            """
            INSERT INTO bugle.user_sends (user_id, run_id, status)
            SELECT DISTINCT r.user_id, \(lease.runID), 'reserved' FROM bugle.run_recipients r
             WHERE r.run_id = \(lease.runID) AND r.seq = ANY(\(seqs)) AND r.state = 'in_flight'
            ON CONFLICT (user_id, run_id) DO NOTHING
            """,
            logger: logger
        ).collect()
        return skipped
    }

    private func status(of runID: Int64, _ connection: PostgresConnection) async throws -> RunStatus? {
        let rows = try await connection.answeredQuery("SELECT status FROM bugle.runs WHERE id = \(runID)", logger: logger)
        var status: RunStatus?
        for try await (raw,) in rows.decode((String,).self) { status = RunStatus(rawValue: raw) }
        return status
    }

    // MARK: Record

    public func record(_ lease: Lease, outcomes: [RecipientOutcome]) async throws -> Bool {
        guard !outcomes.isEmpty else { return true }
        let logger = self.logger
        var seqs: [Int64] = []
        var states: [String] = []
        var codes: [String] = []
        var messageIDs: [String] = []
        var delays: [Double] = []
        var refunds: [Int] = []
        var deactivateSeqs: [Int64] = []
        var deactivateReasons: [String] = []
        var deactivateSince: [Double] = []
        var sentSeqs: [Int64] = []
        var heldSeqs: [Int64] = []
        var heldPeriods: [String] = []
        for outcome in outcomes {
            if outcome.state == .retryWait, let key = outcome.periodKey {
                heldSeqs.append(outcome.seq)
                heldPeriods.append(key)
            }
            seqs.append(outcome.seq)
            states.append(outcome.state.rawValue)
            codes.append(outcome.code)
            messageIDs.append(outcome.providerMessageID ?? "")
            delays.append(outcome.retryAfterSeconds ?? 0)
            refunds.append(outcome.refundAttempt ? 1 : 0)
            if let deactivation = outcome.deactivate {
                deactivateSeqs.append(outcome.seq)
                deactivateReasons.append(deactivation.reason)
                deactivateSince.append(deactivation.invalidSince?.timeIntervalSince1970 ?? 0)
            }
            if outcome.state == .sent { sentSeqs.append(outcome.seq) }
        }
        return try await ledgerTransaction { connection -> Bool in
            // The worker row's FOR KEY SHARE conflicts with a reaper's DELETE: a takeover waits for this commit,
            // and once this worker is reaped nothing it writes lands.
            let fence = try await connection.answeredQuery(
                """
                SELECT r.notification_type, r.period_key, r.rotates_copy, r.recipient_periods FROM bugle.runs r
                  JOIN bugle.run_workers w ON w.run_id = r.id AND w.epoch = \(lease.epoch)
                 WHERE r.id = \(lease.runID)
                FOR KEY SHARE OF w
                """,
                logger: logger
            )
            var run: (String, String?, Bool, Bool)?
            for try await row in fence.decode((String, String?, Bool, Bool).self) { run = row }
            guard let (notificationType, periodKey, rotates, recipientPeriods) = run else { return false }
            // Each outcome finds its row by the primary key, one probe per outcome. `state || ''` keeps the planner off
            // `run_recipients_inflight_idx`: with statistics taken while few rows were in flight it estimated that index
            // at one row and rescanned the outcome array for each row it returned (340 ms for 1,000 outcomes late in a
            // 10,000,000-recipient run), and that index also holds an entry for every row answered since the last
            // vacuum. The count comes back as one row, not a row per outcome.
            let updated = try await connection.answeredQuery(
                """
                WITH updated AS (
                  UPDATE bugle.run_recipients r
                     SET state = v.state, outcome_code = v.code, provider_message_id = NULLIF(v.msg, ''),
                         next_attempt_at = CASE WHEN v.state = 'retry_wait' THEN now() + make_interval(secs => v.delay)
                                                ELSE r.next_attempt_at END,
                         attempts = r.attempts - v.refund,
                         finished_at = CASE WHEN v.state = 'retry_wait' THEN NULL ELSE now() END
                    FROM unnest(\(seqs)::bigint[], \(states)::text[], \(codes)::text[], \(messageIDs)::text[],
                                \(delays)::float8[], \(refunds)::int[]) AS v(seq, state, code, msg, delay, refund)
                   WHERE r.run_id = \(lease.runID) AND r.seq = v.seq
                     AND r.state || '' = 'in_flight' AND r.claim_epoch = \(lease.epoch)
                  RETURNING 1)
                SELECT count(*) FROM updated
                """,
                logger: logger
            )
            var count = 0
            for try await (rows,) in updated.decode((Int,).self) { count = rows }
            if let periodKey, !heldSeqs.isEmpty {
                // Held (quiet hours) into another dedupe period: the recipient is deduped in the period it will be sent
                // in (claimed again, it reserves that one; the reservation of the period it leaves is released when the
                // run ends unless another of the user's devices is sent in it), and the run now has recipients' own
                // periods. A device held from 23:00 UTC to 07:00 used to keep its planned day, so the next day's
                // campaign of the type notified its user a second time that day.
                _ = try await connection.answeredQuery(
                    """
                    WITH moved AS (
                      UPDATE bugle.run_recipients r SET period_key = v.period
                        FROM unnest(\(heldSeqs)::bigint[], \(heldPeriods)::text[]) AS v(seq, period)
                       WHERE r.run_id = \(lease.runID) AND r.seq = v.seq AND r.state = 'retry_wait'
                         AND r.claim_epoch = \(lease.epoch) AND coalesce(r.period_key, \(periodKey)) <> v.period
                      RETURNING 1)
                    UPDATE bugle.runs SET recipient_periods = true
                     WHERE id = \(lease.runID) AND NOT recipient_periods AND EXISTS (SELECT 1 FROM moved)
                    """,
                    logger: logger
                ).collect()
            }
            if !deactivateSeqs.isEmpty {
                // The device the segment named, and only while it still holds the token the provider refused: a segment
                // whose `device_id` is wrong (a join on the wrong key, a constant) must not switch off another
                // device. The 410 rule: a token that re-registered after the provider's timestamp stays active; for an
                // answer with no timestamp (FCM's UNREGISTERED, BadDeviceToken), after the recipient was claimed for
                // this send (such a device used to be switched off whenever it registered again).
                _ = try await connection.answeredQuery(
                    """
                    UPDATE bugle.devices d
                       SET is_active = false, deactivated_at = now(), deactivation_reason = v.reason
                      FROM unnest(\(deactivateSeqs)::bigint[], \(deactivateReasons)::text[], \(deactivateSince)::float8[])
                           AS v(seq, reason, since)
                      JOIN bugle.run_recipients r ON r.run_id = \(lease.runID) AND r.seq = v.seq
                     WHERE d.id = r.device_id AND d.token = r.token AND d.is_active
                       AND d.registered_at < CASE WHEN v.since = 0 THEN coalesce(r.claimed_at, now()) ELSE to_timestamp(v.since) END
                    """,
                    logger: logger
                ).collect()
            }
            if let periodKey, !sentSeqs.isEmpty {
                // A run with recipients' own periods marks the periods its sent recipients are in (a user whose devices
                // fall in two periods has both marked when either is sent in the batch: marked reservations are kept,
                // so the error holds a user back rather than notifying them twice).
                _ = try await connection.answeredQuery(
                    recipientPeriods
                        ? """
                        UPDATE bugle.notification_log l SET status = 'sent', updated_at = now()
                         WHERE l.user_id = ANY(ARRAY(SELECT r.user_id FROM bugle.run_recipients r
                                                      WHERE r.run_id = \(lease.runID) AND r.seq = ANY(\(sentSeqs))))
                           AND l.notification_type = \(notificationType)
                           AND l.period_key = ANY(ARRAY(SELECT DISTINCT coalesce(r.period_key, \(periodKey)) FROM bugle.run_recipients r
                                                         WHERE r.run_id = \(lease.runID) AND r.seq = ANY(\(sentSeqs))))
                           AND l.run_id = \(lease.runID) AND l.status = 'reserved'
                        """
                        : """
                        UPDATE bugle.notification_log l SET status = 'sent', updated_at = now()
                         WHERE l.user_id = ANY(ARRAY(SELECT r.user_id FROM bugle.run_recipients r
                                                      WHERE r.run_id = \(lease.runID) AND r.seq = ANY(\(sentSeqs))))
                           AND l.notification_type = \(notificationType) AND l.period_key = \(periodKey)
                           AND l.run_id = \(lease.runID) AND l.status = 'reserved'
                        """,
                    logger: logger
                ).collect()
            }
            if rotates, !sentSeqs.isEmpty {
                // `last_index` counts the runs that notified the user (from 0): each device of a run takes the counter's
                // next value modulo its own locale's copies (``CopyRotation``). It used to keep the copy index of one of
                // the user's devices, so a phone in a one-copy locale (always 0) held a three-copy phone on copy B.
                _ = try await connection.answeredQuery(
                    """
                    INSERT INTO bugle.copy_rotation (user_id, notification_type, last_index, run_id)
                    SELECT DISTINCT r.user_id, \(notificationType), 0, \(lease.runID)
                      FROM bugle.run_recipients r
                     WHERE r.run_id = \(lease.runID) AND r.seq = ANY(\(sentSeqs)) AND r.state = 'sent' AND r.copy_index IS NOT NULL
                    ON CONFLICT (user_id, notification_type) DO UPDATE
                       SET last_index = copy_rotation.last_index + 1, run_id = EXCLUDED.run_id, updated_at = now()
                     WHERE copy_rotation.run_id <> EXCLUDED.run_id
                    """,
                    logger: logger
                ).collect()
            }
            if count < outcomes.count {
                // Under a live lease, a row that is no longer in flight was written by an earlier attempt of this
                // same batch whose commit succeeded but whose answer was lost with the connection.
                logger.notice("outcomes already recorded", metadata: ["expected": "\(outcomes.count)", "updated": "\(count)"])
            }
            return true
        }
    }

    // MARK: Progress and finish

    public func progress(runID: Int64, snapshotTaken: @escaping @Sendable () async -> Void) async throws -> RunProgress {
        try await client.withConnection { connection in
            // The count may take seconds at 10,000,000 recipients; the snapshot it reads is fixed first, so the sends
            // that start once `snapshotTaken` is called are not already missing from it.
            try await connection.inReadOnlySnapshot(logger: logger) { connection in
                try await connection.answeredQuery("SELECT pg_current_snapshot()", logger: logger)
                await snapshotTaken()
                return try await progress(runID: runID, on: connection)
            }
        }
    }

    private func progress(runID: Int64, on connection: PostgresConnection) async throws -> RunProgress {
        let clock = scheduleClock?()
        let rows = try await connection.answeredQuery(
            """
            SELECT count(*) FILTER (WHERE state = 'pending')::bigint,
                   count(*) FILTER (WHERE state = 'in_flight')::bigint,
                   count(*) FILTER (WHERE state = 'retry_wait')::bigint,
                   extract(epoch FROM greatest(min(next_attempt_at) FILTER (WHERE state IN ('pending', 'retry_wait')),
                                               coalesce(to_timestamp(\(clock)::float8), now()))
                                      - coalesce(to_timestamp(\(clock)::float8), now()))::float8
              FROM bugle.run_recipients
             WHERE run_id = \(runID) AND state IN ('pending', 'in_flight', 'retry_wait')
            """,
            logger: logger
        )
        var progress = RunProgress(pending: 0, inFlight: 0, retryWait: 0, secondsUntilNextDue: nil)
        for try await (pending, inFlight, retryWait, due) in rows.decode((Int64, Int64, Int64, Double?).self) {
            progress = RunProgress(pending: pending, inFlight: inFlight, retryWait: retryWait, secondsUntilNextDue: due.map { max(0, $0) })
        }
        return progress
    }

    /// One `LIMIT 1` probe per lane of `run_recipients_lane_ready_idx` for the earliest due row, and one of
    /// `run_recipients_inflight_idx`. `progress(runID:)` counts every unfinished row instead: measured at
    /// 141 ms a call through a 400,000-recipient mixed run, read 34 times by the send loop.
    ///
    /// Each lane's probe starts at its claim floor (``ClaimFloors``), as claims do: from the index's start it stepped
    /// over the entries of every row claimed since the last vacuum, 5–28 ms a read late in a 10,000,000-recipient run
    /// whose APNs lane had emptied (1,921 reads, 30.7 s of PostgreSQL's time).
    public func backlog(runID: Int64) async throws -> RunBacklog {
        let clock = scheduleClock?()
        let lanes = ProviderKind.allCases.map(\.rawValue)
        let floors = ProviderKind.allCases.map { claimFloors.floor(runID: runID, lane: $0) }
        let rows = try await client.answeredQuery(
            """
            SELECT EXISTS (SELECT 1 FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'in_flight'),
                   -- greatest() skips NULLs: no due row must stay NULL, not become "due now".
                   CASE WHEN due.at IS NOT NULL THEN
                       extract(epoch FROM greatest(due.at, coalesce(to_timestamp(\(clock)::float8), now()))
                                          - coalesce(to_timestamp(\(clock)::float8), now()))::float8
                   END
              FROM (SELECT min(first.at) AS at
                      FROM unnest(\(lanes)::text[], \(floors)::bigint[]) AS lane(provider, floor),
                           LATERAL (SELECT next_attempt_at AS at FROM bugle.run_recipients
                                     WHERE run_id = \(runID) AND provider = lane.provider
                                       AND state IN ('pending', 'retry_wait')
                                       AND (next_attempt_at, seq) >= ('-infinity'::timestamptz, lane.floor)
                                     ORDER BY next_attempt_at, seq LIMIT 1) AS first) AS due
            """,
            logger: logger
        )
        var backlog = RunBacklog(hasInFlight: false, secondsUntilNextDue: nil)
        for try await (inFlight, due) in rows.decode((Bool, Double?).self) {
            backlog = RunBacklog(hasInFlight: inFlight, secondsUntilNextDue: due.map { max(0, $0) })
        }
        return backlog
    }

    @discardableResult
    public func closeAtDeadline(_ lease: Lease, reason: String) async throws -> Bool {
        let logger = self.logger
        return try await ledgerTransaction { connection -> Bool in
            guard try await Self.leave(lease, connection, logger: logger) == 0 else { return false }
            return try await DeadlineClosure.close(runID: lease.runID, reason: reason, connection, logger: logger)
        }
    }

    /// Locks the run row and ends `lease`'s worker row, in the caller's transaction.
    /// - Returns: How many other workers are still live on the run.
    private static func leave(_ lease: Lease, _ connection: PostgresConnection, logger: Logger) async throws -> Int {
        _ = try await connection.answeredQuery("SELECT 1 FROM bugle.runs WHERE id = \(lease.runID) FOR UPDATE", logger: logger).collect()
        _ = try await connection.answeredQuery(
            "DELETE FROM bugle.run_workers WHERE run_id = \(lease.runID) AND epoch = \(lease.epoch)",
            logger: logger
        ).collect()
        return try await liveWorkers(runID: lease.runID, connection, logger: logger)
    }

    public func finish(_ lease: Lease, status: RunStatus, reason: String?, lastWorkerOnly: Bool) async throws -> Bool {
        let logger = self.logger
        return try await ledgerTransaction { connection -> Bool in
            let others = try await Self.leave(lease, connection, logger: logger)
            if lastWorkerOnly, others > 0 {
                return false
            }
            let rows = try await connection.answeredQuery(
                """
                UPDATE bugle.runs
                   SET status = \(status.rawValue), pause_reason = \(reason),
                       finished_at = CASE WHEN \(status.rawValue) IN ('completed', 'failed', 'cancelled') THEN now() ELSE finished_at END,
                       lease_owner = NULL, lease_expires_at = NULL
                 WHERE id = \(lease.runID) AND status = 'running'
                RETURNING id
                """,
                logger: logger
            )
            var changed = false
            for try await _ in rows { changed = true }
            if changed, status == .completed || status == .cancelled {
                try await RunSummaries.releaseUnusedReservations(runID: lease.runID, connection, logger: logger)
            } else if !changed, try await self.status(of: lease.runID, connection) == .cancelled {
                // `bugle cancel` moved the waiting recipients to `cancelled` while this worker held some in flight: those
                // it handed back unsent (now `retry_wait`) are cancelled too, and their users' reservations released.
                try await UnsentRecipients.cancel(runID: lease.runID, code: "run_cancelled", connection, logger: logger)
                try await RunSummaries.releaseUnusedReservations(runID: lease.runID, connection, logger: logger)
            }
            try await RunSummaries.rebuild(runID: lease.runID, connection, logger: logger)
            if changed, status != .paused { try await DeviceChangeLog.prune(connection, logger: logger) }
            if changed, status == .paused, reason?.hasPrefix("scheduled") == true {
                // Left for later with nothing sent yet (`run --no-wait` before `send_at`): the run has not started, so
                // its duration counts from the tick that sends, not from its creation (a run due in a day said it took
                // a day). The summary just rebuilt says whether anything was sent or tried.
                _ = try await connection.answeredQuery(
                    """
                    UPDATE bugle.runs SET started_at = NULL, paused_seconds = 0
                     WHERE id = \(lease.runID) AND NOT EXISTS (
                       SELECT 1 FROM bugle.run_summary s
                        WHERE s.run_id = \(lease.runID)
                          AND s.status NOT IN ('pending', 'skipped_dedup', 'skipped_inactive', 'skipped_invalid', 'skipped_frequency',
                                               'skipped_quiet_hours', 'cancelled'))
                    """,
                    logger: logger
                ).collect()
            }
            return changed
        }
    }

    static func decodeVariables(_ json: String?) -> [String: String?] {
        guard let json, let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else { return [:] }
        var result: [String: String?] = [:]
        for (key, value) in object {
            result[key] = value as? String
        }
        return result
    }
}
