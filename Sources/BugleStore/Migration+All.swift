import PostgresNIO

extension Migration {
    /// Every migration this build knows, in version order.
    public static let all: [Migration] = [.initialSchema, .claimIndexes, .runOverview, .laneClaimIndex, .dropRunReadyIndex, .runWorkers, .claimIDs, .workerSessions, .campaignFeatures, .cheaperMaterialization, .materializerLease, .pausedTime, .recipientPeriods, .deviceChanges, .deadWorkerTime]

    /// Version 1: devices, runs, run_recipients, notification_log and run_summary.
    ///
    /// Other modules (segment reader, ledger, runner) are written against exactly this shape; change it only by
    /// adding a new migration.
    public static let initialSchema = Migration(
        version: 1,
        name: "initial_schema",
        statements: [
            """
            CREATE TABLE bugle.devices (
              id bigserial PRIMARY KEY, user_id text NOT NULL, token text NOT NULL,
              platform text NOT NULL CHECK (platform IN ('ios','android','web')),
              locale text, timezone text, app_version text,
              is_active boolean NOT NULL DEFAULT true,
              registered_at timestamptz NOT NULL DEFAULT now(),
              last_seen timestamptz NOT NULL DEFAULT now(),
              deactivated_at timestamptz, deactivation_reason text,
              UNIQUE (platform, token))
            """,
            "CREATE INDEX devices_user_id_idx ON bugle.devices (user_id)",
            """
            CREATE TABLE bugle.runs (
              id bigserial PRIMARY KEY, campaign text NOT NULL, notification_type text NOT NULL, period_key text,
              status text NOT NULL CHECK (status IN ('materializing','ready','running','paused','completed','failed','cancelled')),
              campaign_file text, campaign_yaml text NOT NULL, campaign_sha256 text NOT NULL,
              ambiguous_policy text NOT NULL CHECK (ambiguous_policy IN ('resend','drop')),
              in_flight_window int NOT NULL CHECK (in_flight_window BETWEEN 1 AND 10000), max_attempts int NOT NULL,
              lease_owner text, lease_epoch bigint NOT NULL DEFAULT 0, lease_expires_at timestamptz,
              pause_reason text, failure_reason text,
              recipients_total bigint, rows_scanned bigint, duplicates_collapsed bigint NOT NULL DEFAULT 0,
              segment_sha256 text, upper_device_id bigint,
              created_at timestamptz NOT NULL DEFAULT now(), started_at timestamptz, finished_at timestamptz,
              totals jsonb)
            """,
            """
            CREATE TABLE bugle.run_recipients (
              run_id bigint NOT NULL REFERENCES bugle.runs(id) ON DELETE CASCADE, seq bigint NOT NULL,
              device_id bigint, user_id text, token text, platform text NOT NULL, provider text NOT NULL,
              locale text, timezone text, variables jsonb, variant text,
              state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending','in_flight','retry_wait','sent','invalid_token','failed_permanent','unknown','skipped_dedup','skipped_inactive','skipped_invalid','cancelled')),
              attempts int NOT NULL DEFAULT 0, next_attempt_at timestamptz NOT NULL DEFAULT '-infinity',
              claim_epoch bigint, claimed_at timestamptz, finished_at timestamptz,
              outcome_code text, provider_message_id text,
              PRIMARY KEY (run_id, seq), UNIQUE (run_id, platform, token))
            """,
            """
            CREATE INDEX run_recipients_ready_idx ON bugle.run_recipients (run_id, next_attempt_at, seq) \
            WHERE state IN ('pending','retry_wait')
            """,
            "CREATE INDEX run_recipients_inflight_idx ON bugle.run_recipients (run_id) WHERE state = 'in_flight'",
            """
            CREATE TABLE bugle.notification_log (
              user_id text NOT NULL, notification_type text NOT NULL, period_key text NOT NULL,
              run_id bigint NOT NULL, status text NOT NULL CHECK (status IN ('reserved','sent')),
              updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (user_id, notification_type, period_key))
            """,
            """
            CREATE TABLE bugle.run_summary (
              run_id bigint NOT NULL REFERENCES bugle.runs(id) ON DELETE CASCADE, platform text NOT NULL, status text NOT NULL,
              reason text NOT NULL DEFAULT '', count bigint NOT NULL, PRIMARY KEY (run_id, platform, status, reason))
            """,
        ]
    )

    /// Version 2: a small partial index of inactive devices, so the claim's "deactivated since the segment was
    /// read" check probes a handful of rows instead of walking `devices` (measured: 390 ms → < 1 ms per claim
    /// on 1M devices).
    public static let claimIndexes = Migration(
        version: 2,
        name: "claim_indexes",
        statements: [
            "CREATE INDEX devices_inactive_idx ON bugle.devices (id) WHERE NOT is_active",
        ]
    )

    /// Version 3: `bugle.run_overview`, the per-run totals analysts read: status, recipients, start, finish,
    /// duration and rate (answered notifications per second), next to the per-status `totals` and the
    /// per platform × status × reason lines of `run_summary`. A view over the ledger-derived tables, so it can
    /// never drift from them.
    public static let runOverview = Migration(
        version: 3,
        name: "run_overview",
        statements: [
            """
            CREATE VIEW bugle.run_overview AS
            SELECT r.id AS run_id, r.campaign, r.notification_type, r.period_key, r.status,
                   r.recipients_total, r.rows_scanned, r.duplicates_collapsed,
                   r.started_at, r.finished_at,
                   extract(epoch FROM r.finished_at - r.started_at)::float8 AS duration_seconds,
                   CASE WHEN r.finished_at > r.started_at THEN
                       (SELECT coalesce(sum(s.count), 0) FROM bugle.run_summary s
                         WHERE s.run_id = r.id AND s.status IN ('sent', 'invalid_token', 'failed_permanent', 'unknown'))
                       / extract(epoch FROM r.finished_at - r.started_at)::float8
                   END AS rate_per_second,
                   r.totals, r.pause_reason, r.failure_reason
              FROM bugle.runs r
            """,
        ]
    )

    /// Version 4: due recipients per lane, for the per-lane claim (each lane takes its own oldest rows, so a
    /// lane whose rows come first in the ledger never crowds out another).
    public static let laneClaimIndex = Migration(
        version: 4,
        name: "lane_claim_index",
        statements: [
            """
            CREATE INDEX run_recipients_lane_ready_idx ON bugle.run_recipients (run_id, provider, next_attempt_at, seq) \
            WHERE state IN ('pending','retry_wait')
            """,
        ]
    )

    /// Version 5: drops `run_recipients_ready_idx`, which the per-lane index of version 4 supersedes (every claim
    /// goes through a lane). Each materialized row paid for both: measured on 200,000 rows inserted in pages of
    /// 5,000, dropping it took the insert from 2.7 s to 2.2 s.
    public static let dropRunReadyIndex = Migration(
        version: 5,
        name: "drop_run_ready_index",
        statements: ["DROP INDEX IF EXISTS bugle.run_recipients_ready_idx"]
    )

    /// Version 6: one lease per worker of a run (`bugle worker`). Each worker holds its own row with its own fencing
    /// epoch (drawn from `runs.lease_epoch`, which stays the run's epoch counter); a row that is not renewed before
    /// `expires_at` is reaped by the next worker that looks, and its in-flight recipients are recovered per the
    /// ambiguous policy. Claims and outcome writes lock their worker's row, so a reaped (zombie) worker writes nothing.
    public static let runWorkers = Migration(
        version: 6,
        name: "run_workers",
        statements: [
            """
            CREATE TABLE bugle.run_workers (
              run_id bigint NOT NULL REFERENCES bugle.runs(id) ON DELETE CASCADE,
              epoch bigint NOT NULL, owner text NOT NULL,
              joined_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL,
              PRIMARY KEY (run_id, epoch))
            """,
        ]
    )

    /// Version 7: the id of the claim attempt that put a row in flight, so a worker can hand back exactly the rows
    /// of attempts whose answers it never received (a nullable column: adding it rewrites nothing).
    public static let claimIDs = Migration(
        version: 7,
        name: "claim_ids",
        statements: ["ALTER TABLE bugle.run_recipients ADD COLUMN claim_id bigint"]
    )

    /// Version 8: the `application_name` a worker's database sessions carry, so the worker that reaps an expired
    /// lease can also end that worker's sessions: a frozen process (SIGSTOP, a suspended VM) can leave a backend
    /// blocked writing a result it never reads, holding row locks that would stall every takeover.
    public static let workerSessions = Migration(
        version: 8,
        name: "worker_sessions",
        statements: ["ALTER TABLE bugle.run_workers ADD COLUMN session_tag text"]
    )

    /// Version 9: marketer features.
    /// - `run_recipients.copy_index` (copy rotation) and the `skipped_frequency` / `skipped_quiet_hours` states;
    /// - `runs.kind` (`campaign` or `test` for `bugle send-test`), `runs.rotates_copy`, the frequency cap of the run,
    ///   and `runs.scheduled` (`bugle tick` sends such runs when their recipients come due);
    /// - `copy_rotation`: the copy index each user got last, per notification type;
    /// - `run_recipients_sent_user_idx`: every run's sent notifications by user and time, which `max_per_user`
    ///   counts across all campaigns; `user_sends`: the slot a capped run took for a user at claim time (one row per
    ///   user and run), so concurrent capped runs see each other before anything is sent;
    /// - `run_variant_summary`: per A/B variant × status counts, rebuilt with `run_summary`;
    /// - the ledger's unique index on (run_id, platform, token) is replaced by `run_tokens`, used while a run is
    ///   materialized (measured below in the README's ledger-cost notes).
    public static let campaignFeatures = Migration(
        version: 9,
        name: "campaign_features",
        statements: [
            "ALTER TABLE bugle.run_recipients ADD COLUMN copy_index int",
            "ALTER TABLE bugle.run_recipients DROP CONSTRAINT run_recipients_state_check",
            """
            ALTER TABLE bugle.run_recipients ADD CONSTRAINT run_recipients_state_check CHECK (state IN \
            ('pending','in_flight','retry_wait','sent','invalid_token','failed_permanent','unknown','skipped_dedup',\
            'skipped_inactive','skipped_invalid','skipped_frequency','skipped_quiet_hours','cancelled'))
            """,
            """
            ALTER TABLE bugle.runs ADD COLUMN kind text NOT NULL DEFAULT 'campaign' CHECK (kind IN ('campaign','test')),
              ADD COLUMN rotates_copy boolean NOT NULL DEFAULT false,
              ADD COLUMN cap_count int, ADD COLUMN cap_seconds int,
              ADD COLUMN scheduled boolean NOT NULL DEFAULT false
            """,
            """
            CREATE TABLE bugle.copy_rotation (
              user_id text NOT NULL, notification_type text NOT NULL, last_index int NOT NULL,
              run_id bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(),
              PRIMARY KEY (user_id, notification_type))
            """,
            """
            CREATE TABLE bugle.user_sends (
              user_id text NOT NULL, run_id bigint NOT NULL, at timestamptz NOT NULL DEFAULT now(),
              status text NOT NULL CHECK (status IN ('reserved','sent')),
              PRIMARY KEY (user_id, run_id))
            """,
            // What `max_per_user` counts: each user's sent notifications of every run, newest last. Only rows turning
            // `sent` enter it (one index entry per notification, no extra table write on the send path).
            """
            CREATE INDEX run_recipients_sent_user_idx ON bugle.run_recipients (user_id, finished_at) INCLUDE (run_id) \
            WHERE state = 'sent'
            """,
            // The send path updates every ledger row twice (claimed, answered), and each update also inserted into this
            // index of long token keys; materialization collapses duplicate tokens with bugle.run_tokens instead.
            "ALTER TABLE bugle.run_recipients DROP CONSTRAINT run_recipients_run_id_platform_token_key",
            """
            CREATE UNLOGGED TABLE bugle.run_tokens (
              run_id bigint NOT NULL, platform text NOT NULL, token text NOT NULL, seq bigint NOT NULL,
              PRIMARY KEY (run_id, platform, token))
            """,
            """
            CREATE TABLE bugle.run_variant_summary (
              run_id bigint NOT NULL REFERENCES bugle.runs(id) ON DELETE CASCADE, variant text NOT NULL,
              status text NOT NULL, count bigint NOT NULL, PRIMARY KEY (run_id, variant, status))
            """,
        ]
    )

    /// Version 10: cheaper materialization, measured per page of 5,000 rows (README, "Where PostgreSQL's time goes").
    /// - The ledger's foreign key to `runs` is dropped: its per-row check (a trigger and a `FOR KEY SHARE` probe of the
    ///   run for every inserted row) was half of a ledger insert, about 40 of 80 ms a page. The insert now checks the
    ///   run once per statement, and deleting a run still deletes its ledger (a trigger on `runs`, as the cascade did).
    /// - `run_tokens` is dropped: inserting every token into its unique index of long keys cost about 85 ms a page.
    ///   Duplicate tokens are found once the whole segment is in the ledger, before the run becomes `ready`.
    public static let cheaperMaterialization = Migration(
        version: 10,
        name: "cheaper_materialization",
        statements: [
            "ALTER TABLE bugle.run_recipients DROP CONSTRAINT IF EXISTS run_recipients_run_id_fkey",
            """
            CREATE FUNCTION bugle.delete_run_ledger() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              DELETE FROM bugle.run_recipients WHERE run_id = OLD.id;
              RETURN OLD;
            END
            $$
            """,
            "CREATE TRIGGER runs_delete_ledger AFTER DELETE ON bugle.runs FOR EACH ROW EXECUTE FUNCTION bugle.delete_run_ledger()",
            "DROP TABLE bugle.run_tokens",
        ]
    )

    /// Version 11: the lease of the process reading a run's segment (`MaterializerLease`): its owner
    /// (`host:pid:random`) and when the lease lapses unless renewed. It replaces a session advisory lock, which behind
    /// a transaction-pooling connection pooler (PgBouncer) is taken and released on whichever server session the
    /// statement lands on: a live reader's lock could look free, and a dead reader's could stay held.
    public static let materializerLease = Migration(
        version: 11,
        name: "materializer_lease",
        statements: ["ALTER TABLE bugle.runs ADD COLUMN materializer text, ADD COLUMN materializer_expires_at timestamptz"]
    )

    /// Version 12: the time a run spent paused after it began sending (`paused_seconds`, with `paused_at` while it is
    /// paused), kept by a trigger on every status change so no statement that pauses or resumes can forget it, and
    /// `run_overview.rate_per_second` over the time it was not paused (a run paused for twenty minutes read 7.5/s).
    /// A pause before the first send (a scheduled run waiting for its hour) is not counted: sending had not begun.
    public static let pausedTime = Migration(
        version: 12,
        name: "paused_time",
        statements: [
            "ALTER TABLE bugle.runs ADD COLUMN paused_at timestamptz, ADD COLUMN paused_seconds float8 NOT NULL DEFAULT 0",
            """
            CREATE FUNCTION bugle.runs_pause_clock() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.status = 'paused' THEN
                    NEW.paused_at := now();
                ELSIF OLD.status = 'paused' THEN
                    IF OLD.paused_at IS NOT NULL AND NEW.started_at IS NOT NULL THEN
                        NEW.paused_seconds := OLD.paused_seconds
                            + greatest(0, extract(epoch FROM now() - greatest(OLD.paused_at, NEW.started_at))::float8);
                    END IF;
                    NEW.paused_at := NULL;
                END IF;
                RETURN NEW;
            END $$
            """,
            """
            CREATE TRIGGER runs_pause_clock BEFORE UPDATE OF status ON bugle.runs
               FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION bugle.runs_pause_clock()
            """,
            """
            CREATE OR REPLACE VIEW bugle.run_overview AS
            SELECT r.id AS run_id, r.campaign, r.notification_type, r.period_key, r.status,
                   r.recipients_total, r.rows_scanned, r.duplicates_collapsed,
                   r.started_at, r.finished_at,
                   extract(epoch FROM r.finished_at - r.started_at)::float8 AS duration_seconds,
                   CASE WHEN extract(epoch FROM r.finished_at - r.started_at)::float8 > r.paused_seconds THEN
                       (SELECT coalesce(sum(s.count), 0) FROM bugle.run_summary s
                         WHERE s.run_id = r.id AND s.status IN ('sent', 'invalid_token', 'failed_permanent', 'unknown'))
                       / (extract(epoch FROM r.finished_at - r.started_at)::float8 - r.paused_seconds)
                   END AS rate_per_second,
                   r.totals, r.pause_reason, r.failure_reason, r.paused_seconds
              FROM bugle.runs r
            """,
        ]
    )

    /// Version 13: a dedupe period per recipient for runs whose devices are due on different days (local-time delivery:
    /// `run_recipients.period_key`, NULL for the run's own `runs.period_key`; `runs.recipient_periods` says the run
    /// has them). A local-time run made at 23:50 for the next morning took the period of its creation for everyone, so
    /// the next day's campaign of the type reached the same users again.
    public static let recipientPeriods = Migration(
        version: 13,
        name: "recipient_periods",
        statements: [
            "ALTER TABLE bugle.run_recipients ADD COLUMN period_key text",
            "ALTER TABLE bugle.runs ADD COLUMN recipient_periods boolean NOT NULL DEFAULT false",
        ]
    )

    /// Version 14: `bugle.device_changes`, the devices whose owner changed or that were deleted, written by triggers on
    /// `bugle.devices` whoever writes it (`bugle devices import`, the app's own statements). The claim probes it for
    /// the devices it takes, so a token that moved to another user after the segment was read is not sent the old
    /// user's (personalised) notification, and a deleted device is not sent at all. It holds only changed devices, so
    /// the probe costs next to nothing; rows older than every unfinished run (less a day's margin) are pruned when a
    /// run finishes. A change of owner is noted row by row (the trigger's `WHEN` skips the rows an upsert leaves with
    /// their owner, without calling the function); deletes by statement, so pruning a million devices is one insert.
    public static let deviceChanges = Migration(
        version: 14,
        name: "device_changes",
        statements: [
            "CREATE TABLE bugle.device_changes (device_id bigint NOT NULL, changed_at timestamptz NOT NULL DEFAULT now())",
            "CREATE INDEX device_changes_device_idx ON bugle.device_changes (device_id)",
            "CREATE INDEX device_changes_time_idx ON bugle.device_changes (changed_at)",
            """
            CREATE FUNCTION bugle.note_device_change() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              INSERT INTO bugle.device_changes (device_id) VALUES (OLD.id);
              RETURN NULL;
            END
            $$
            """,
            """
            CREATE TRIGGER devices_owner_changed AFTER UPDATE OF user_id ON bugle.devices
              FOR EACH ROW WHEN (OLD.user_id IS DISTINCT FROM NEW.user_id) EXECUTE FUNCTION bugle.note_device_change()
            """,
            """
            CREATE FUNCTION bugle.note_devices_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              INSERT INTO bugle.device_changes (device_id) SELECT id FROM gone;
              RETURN NULL;
            END
            $$
            """,
            """
            CREATE TRIGGER devices_deleted AFTER DELETE ON bugle.devices REFERENCING OLD TABLE AS gone
              FOR EACH STATEMENT EXECUTE FUNCTION bugle.note_devices_deleted()
            """,
        ]
    )

    /// Version 15: time during which every worker of a running run was dead (kill -9, a crash, a lost machine) counts
    /// as paused, not as sending: a run killed and resumed 25 s later read 42.6 s and 47/s for 17.6 s of sending at
    /// 113/s. The gap runs from the last worker's lease expiry to the moment the run is taken again (a resume or a
    /// joining worker: ``PostgresCampaignStore/acquireLease``) or changes status (`bugle pause`, `bugle cancel`: the
    /// pause clock's trigger).
    public static let deadWorkerTime = Migration(
        version: 15,
        name: "dead_worker_time",
        statements: [
            """
            CREATE FUNCTION bugle.run_dead_seconds(run bigint, started timestamptz) RETURNS float8 LANGUAGE sql STABLE AS $$
              SELECT greatest(0, extract(epoch FROM now() - greatest(max(w.expires_at), started))::float8)
                FROM bugle.run_workers w WHERE w.run_id = run HAVING max(w.expires_at) < now()
            $$
            """,
            // Its own trigger beside the pause clock (triggers fire in name order: this one first); it acts only on
            // leaving `running`, the pause clock only on leaving `paused`.
            """
            CREATE FUNCTION bugle.runs_dead_clock() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF OLD.status = 'running' AND NEW.started_at IS NOT NULL THEN
                    NEW.paused_seconds := NEW.paused_seconds + coalesce(bugle.run_dead_seconds(NEW.id, NEW.started_at), 0);
                END IF;
                RETURN NEW;
            END $$
            """,
            """
            CREATE TRIGGER runs_dead_clock BEFORE UPDATE OF status ON bugle.runs
               FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION bugle.runs_dead_clock()
            """,
        ]
    )
}
