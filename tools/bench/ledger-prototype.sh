#!/usr/bin/env bash
# PostgreSQL alone: what each ledger write scheme costs per notification, without Bugle, the simulator or the network.
#
#   tools/bench/ledger-prototype.sh [--rows N] [--runs R] [--schemes "A B …"]
#
# A throwaway cluster (the pipeline benchmark's settings) holds a ledger-shaped table of N rows (default 200,000), and a
# procedure walks all of them the way a run does: claims of 500 rows (four outstanding, the in-flight window of 2,000),
# each answered as `sent` by an outcome write of 500, every statement its own transaction. Three schemes:
#
#   current         today's ledger: `state` drives the partial indexes, so the claim (pending -> in_flight) and the
#                   outcome (in_flight -> sent) each rewrite the row with new index entries (RELIABILITY.md §3);
#   hot             no index reads `state` (ready rows: finished_at IS NULL; sent rows: outcome_code), in-flight rows
#                   are counted through a small table of open claims, and fillfactor 50 leaves room on each page, so the
#                   claim's rewrite is HOT (no index entry);
#   no-claim-write  the claim writes only its row in the open-claims table; the outcome write is each ledger row's only
#                   rewrite;
#   no-inflight-index  today's ledger without `run_recipients_inflight_idx` (the window read as a constant): what that
#                   index costs. Not run unless named in --schemes.
#
# --schemes picks and orders the schemes (default "current hot no-claim-write"; repeat names to alternate them).
# Prints, per scheme, the median over R runs (default 3) of the cluster's CPU seconds (postmaster, backends and
# auxiliary processes, from /proc) and of the wall time, per notification, and how many row updates were HOT. The README
# quotes the default size; much smaller tables can get other plans (a sequential scan for the claim's update).
set -euo pipefail
rows=200000
runs=3
schemes="current hot no-claim-write"
while [ $# -gt 0 ]; do
  case "$1" in
    --rows) rows="$2"; shift ;;
    --runs) runs="$2"; shift ;;
    --schemes) schemes="$2"; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 1 ;;
  esac
  shift
done
claims=$((rows / 500))
# shellcheck source=tools/bench/throwaway-cluster.sh
. "$(dirname "$0")/throwaway-cluster.sh"
cluster_init bugle-ledger
PORT=${BENCH_PORT:-5497}
cleanup() { cluster_stop; rm -rf "$WORK"; }
trap cleanup EXIT
cluster_start "$PORT" -c jit=off
export PGOPTIONS="-c client_min_messages=warning"
PSQL=(psql -X -q -At -v ON_ERROR_STOP=1 -h "$WORK" -p "$PORT" -U bugle -d postgres)

"${PSQL[@]}" <<'SQL'
CREATE TABLE ledger (
  run_id bigint NOT NULL, seq bigint NOT NULL, device_id bigint, user_id text, token text, platform text NOT NULL,
  provider text NOT NULL, locale text, timezone text, variables jsonb, variant text, state text NOT NULL DEFAULT 'pending',
  attempts int NOT NULL DEFAULT 0, next_attempt_at timestamptz NOT NULL DEFAULT '-infinity', claim_epoch bigint,
  claimed_at timestamptz, finished_at timestamptz, outcome_code text, provider_message_id text, claim_id bigint,
  copy_index int, PRIMARY KEY (run_id, seq));
CREATE TABLE open_claims (run_id bigint, claim_id bigint, epoch bigint, seqs bigint[], outstanding int, PRIMARY KEY (run_id, claim_id));

-- The indexes of each scheme.
CREATE PROCEDURE make_indexes(scheme text) LANGUAGE plpgsql AS $$
BEGIN
  DROP INDEX IF EXISTS ready_idx, inflight_idx, sent_idx;
  IF scheme IN ('current', 'no-inflight-index') THEN
    CREATE INDEX ready_idx ON ledger (run_id, provider, next_attempt_at, seq) WHERE state IN ('pending', 'retry_wait');
    IF scheme = 'current' THEN CREATE INDEX inflight_idx ON ledger (run_id) WHERE state = 'in_flight'; END IF;
    CREATE INDEX sent_idx ON ledger (user_id, finished_at) INCLUDE (run_id) WHERE state = 'sent';
  ELSE
    CREATE INDEX ready_idx ON ledger (run_id, provider, next_attempt_at, seq) WHERE finished_at IS NULL;
    CREATE INDEX sent_idx ON ledger (user_id, finished_at) INCLUDE (run_id) WHERE outcome_code = 'sent';
  END IF;
END $$;

-- An outcome write of the 500 rows from `lo`, as the run's group commit writes them.
CREATE PROCEDURE record_outcomes(scheme text, lo bigint, claim bigint) LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  WITH v AS (
    SELECT s AS seq, 'sent'::text AS state, 'sent'::text AS code, gen_random_uuid()::text AS msg FROM generate_series(lo, lo + 499) s),
  updated AS (
    UPDATE ledger r SET state = v.state, outcome_code = v.code, provider_message_id = v.msg, finished_at = now(),
           attempts = r.attempts + CASE WHEN scheme = 'no-claim-write' THEN 1 ELSE 0 END,
           claim_epoch = 1, claim_id = claim
      FROM v
     WHERE r.run_id = 1 AND r.seq = v.seq
       AND CASE WHEN scheme IN ('current', 'no-inflight-index') THEN r.state || '' = 'in_flight'
                WHEN scheme = 'hot' THEN r.state = 'in_flight'
                ELSE r.state IN ('pending', 'retry_wait') END
    RETURNING r.seq),
  answered AS (SELECT count(*) AS n FROM updated),
  gone AS (DELETE FROM open_claims c USING answered a
            WHERE scheme NOT IN ('current', 'no-inflight-index') AND c.run_id = 1 AND c.claim_id = claim AND c.outstanding = a.n RETURNING 1),
  fewer AS (UPDATE open_claims c SET outstanding = c.outstanding - a.n FROM answered a
             WHERE scheme NOT IN ('current', 'no-inflight-index') AND c.run_id = 1 AND c.claim_id = claim AND c.outstanding > a.n RETURNING 1)
  SELECT a.n INTO n FROM answered a;
  IF n <> 500 THEN RAISE EXCEPTION 'outcome write of claim % updated % rows', claim, n; END IF;
END $$;

-- Claims of 500 (the window allowing), four outstanding, each answered in claim order.
CREATE PROCEDURE walk(scheme text, claims int) LANGUAGE plpgsql AS $$
DECLARE k int; floor bigint := -1; got bigint[];
BEGIN
  FOR k IN 0 .. claims + 2 LOOP
    IF k < claims THEN
      IF scheme IN ('current', 'no-inflight-index') THEN
        WITH room AS (SELECT CASE WHEN scheme = 'current'
                                  THEN (SELECT greatest(0, 2000 - count(*)) FROM ledger WHERE run_id = 1 AND state = 'in_flight')
                                  ELSE 2000 END AS n),
        picked AS (SELECT r.seq FROM ledger r WHERE r.run_id = 1 AND r.provider = 'apns' AND r.state IN ('pending', 'retry_wait')
                      AND r.next_attempt_at <= now() AND (r.next_attempt_at, r.seq) >= ('-infinity'::timestamptz, floor)
                    ORDER BY r.next_attempt_at, r.seq LIMIT least(500, (SELECT n FROM room))),
        claimed AS (UPDATE ledger r SET state = 'in_flight', claim_epoch = 1, claim_id = k, claimed_at = now(), attempts = r.attempts + 1
                     WHERE r.run_id = 1 AND r.seq = ANY((SELECT array_agg(seq) FROM picked)::bigint[]) AND r.state IN ('pending', 'retry_wait')
                    RETURNING r.seq, r.token, r.user_id, r.variables, r.locale)
        SELECT array_agg(seq) INTO got FROM claimed;
      ELSIF scheme = 'hot' THEN
        WITH room AS (SELECT greatest(0, 2000 - coalesce(sum(outstanding), 0)) AS n FROM open_claims WHERE run_id = 1),
        picked AS (SELECT r.seq FROM ledger r WHERE r.run_id = 1 AND r.provider = 'apns' AND r.finished_at IS NULL
                      AND r.state IN ('pending', 'retry_wait') AND r.next_attempt_at <= now()
                      AND (r.next_attempt_at, r.seq) >= ('-infinity'::timestamptz, floor)
                    ORDER BY r.next_attempt_at, r.seq LIMIT least(500, (SELECT n FROM room))),
        claimed AS (UPDATE ledger r SET state = 'in_flight', claim_epoch = 1, claim_id = k, claimed_at = now(), attempts = r.attempts + 1
                     WHERE r.run_id = 1 AND r.seq = ANY((SELECT array_agg(seq) FROM picked)::bigint[]) AND r.state IN ('pending', 'retry_wait')
                    RETURNING r.seq, r.token, r.user_id, r.variables, r.locale),
        opened AS (INSERT INTO open_claims SELECT 1, k, 1, array_agg(seq), count(*) FROM claimed)
        SELECT array_agg(seq) INTO got FROM claimed;
      ELSE
        WITH room AS (SELECT greatest(0, 2000 - coalesce(sum(outstanding), 0)) AS n FROM open_claims WHERE run_id = 1),
        picked AS (SELECT r.seq, r.token, r.user_id, r.variables, r.locale FROM ledger r
                    WHERE r.run_id = 1 AND r.provider = 'apns' AND r.finished_at IS NULL AND r.state IN ('pending', 'retry_wait')
                      AND r.next_attempt_at <= now() AND (r.next_attempt_at, r.seq) >= ('-infinity'::timestamptz, floor)
                    ORDER BY r.next_attempt_at, r.seq LIMIT least(500, (SELECT n FROM room))),
        opened AS (INSERT INTO open_claims SELECT 1, k, 1, array_agg(seq), count(*) FROM picked)
        SELECT array_agg(seq) INTO got FROM picked;
      END IF;
      IF coalesce(array_length(got, 1), 0) <> 500 THEN RAISE EXCEPTION 'claim % took % rows', k, coalesce(array_length(got, 1), 0); END IF;
      -- The claim floor: the current scheme's (the claim's first pick), the others' (past its last pick).
      floor := CASE WHEN scheme IN ('current', 'no-inflight-index') THEN (SELECT min(x) FROM unnest(got) x) ELSE (SELECT max(x) + 1 FROM unnest(got) x) END;
      COMMIT;
    END IF;
    IF k >= 3 THEN
      CALL record_outcomes(scheme, (k - 3) * 500::bigint + 1, k - 3);
      COMMIT;
    END IF;
  END LOOP;
END $$;
SQL

cpu_ticks() {
  local master total
  master=$(head -1 "$WORK/data/postmaster.pid")
  total=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$master/stat")
  for pid in $(pgrep -P "$master"); do total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0))); done
  echo "$total"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ticks=$(getconf CLK_TCK)

printf '%-18s %14s %14s %12s\n' scheme "CPU us/notif" "wall us/notif" "HOT updates"
for scheme in $schemes; do
  cpus=(); walls=(); hot=0
  for _ in $(seq "$runs"); do
    fill=100; [ "$scheme" = hot ] && fill=50
    "${PSQL[@]}" >/dev/null <<SQL
TRUNCATE ledger, open_claims;
ALTER TABLE ledger SET (fillfactor = $fill);
CALL make_indexes('$scheme');
INSERT INTO ledger (run_id, seq, device_id, user_id, token, platform, provider, locale, timezone)
SELECT 1, g, g, 'user-' || g, md5(g::text) || md5((g + 1)::text), 'ios', 'apns', 'en', 'Europe/Berlin' FROM generate_series(1, $rows) g;
VACUUM ANALYZE ledger;
SELECT pg_stat_reset();
SQL
    c0=$(cpu_ticks); t0=$(date +%s.%N)
    "${PSQL[@]}" -c "CALL walk('$scheme', $claims)" >/dev/null
    t1=$(date +%s.%N)
    # The session's backend has exited once psql returns; wait until the postmaster has reaped it.
    for _ in $(seq 100); do ps -o stat=,args= --ppid "$(head -1 "$WORK/data/postmaster.pid")" | grep -qE '^Z|\[local\]' || break; sleep 0.05; done
    c1=$(cpu_ticks)
    sleep 0.6  # statistics reach pg_stat_user_tables within the stats flush interval
    hot=$("${PSQL[@]}" -c "SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'ledger'")
    cpus+=("$(awk -v c=$((c1 - c0)) -v t="$ticks" -v n="$rows" 'BEGIN {printf "%.2f", c / t * 1e6 / n}')")
    walls+=("$(awk -v a="$t0" -v b="$t1" -v n="$rows" 'BEGIN {printf "%.2f", (b - a) * 1e6 / n}')")
  done
  printf '%-18s %14s %14s %12s\n' "$scheme" "$(printf '%s\n' "${cpus[@]}" | median)" "$(printf '%s\n' "${walls[@]}" | median)" "$hot of $((2 * rows))"
done
