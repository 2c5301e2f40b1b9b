#!/usr/bin/env bash
# Bugle benchmarks. Usage:
#   tools/bench/bench.sh pipeline [--devices N | --ten-million] [--runs R]
#   tools/bench/bench.sh [segment] [--devices N[,N...]] [--runs R]
#   tools/bench/bench.sh apns [--devices N] [--runs R]
#   tools/bench/bench.sh legacy [--devices N] [--runs R] [--window W] [--quiet S]
#   tools/bench/bench.sh fcm|mixed [--devices N] [--runs R]
#   tools/bench/bench.sh resume [--devices N] [--runs R]
#
# pipeline: the whole-pipeline benchmark. Seeds N devices (default 1,000,000; --ten-million for 10,000,000) of the
# demo mix (half iOS, half Android with every 20th a web browser, six locales, 2% dead tokens) into a throwaway
# PostgreSQL cluster, starts a release `bugle-sim` (APNs + FCM) in its own process, runs a mixed campaign over every
# device end to end R times (default 3), and prints one table of medians: notifications/second, CPU seconds per
# 10,000 notifications of Bugle, PostgreSQL and the simulator, Bugle's peak RSS, time to first send (process start
# to the simulators' first accepted notification), the materialize/send/report phases (Bugle's --json
# phase_seconds), and, in the same run, h2load against both endpoints of the same simulator at once as the
# ceiling (its rate and its own CPU per 10,000 requests).
#
# apns: seeds 2N demo devices (N iOS), starts a release `bugle-sim` in its own process, runs an iOS campaign
# end to end R times (PostgreSQL ledger -> APNs lane over TLS + HTTP/2 -> simulator), and in the same run
# h2load sends N requests to the same simulator as the ceiling. Prints median notifications/second, CPU
# seconds per 10,000 notifications for Bugle, PostgreSQL and the simulator, and Bugle's peak RSS.
#
# segment (default): seeds N devices (default 1,000,000, and 5,000,000 for the flatness check when given
# "--devices 1000000,5000000") into a throwaway PostgreSQL cluster, then times a full dry run of
# a campaign over every device (written to the run's work directory) R times (default 3) with /usr/bin/time -v, and the same
# machine's `COPY (SELECT ...) TO STDOUT` of the same rows as the ceiling. Prints the median rows/second,
# the ratio to COPY, and peak RSS per N.
#
# legacy: seeds 2N demo devices (N iOS) and starts two release simulators in their own processes: `bugle-sim
# serve` (HTTP/2) and `bugle-sim legacy` (binary gateway + feedback, TLS with a client certificate). Runs the same
# iOS campaign R times through the HTTP/2 lane, then R times with `ios_transport: legacy` (in-flight window W,
# default 10000; quiet_period S, default 0.2 s), and prints for each lane the median notifications/second, CPU
# seconds per 10,000 notifications for Bugle, PostgreSQL and the simulator, and Bugle's peak RSS.
#
# fcm / mixed: as apns, with `bugle-sim serve --fcm-port 0` (FCM HTTP v1 + OAuth2 token endpoint) beside APNs.
# fcm sends the Android and web devices of 2N demo devices (about N); mixed sends all 2N (half iOS through APNs,
# half Android/web through FCM). FCM's 600,000/minute project quota is lifted for the benchmark, in Bugle's pacing
# and in the simulator. h2load posts N messages to the FCM endpoint with a simulator-minted access token as the ceiling
# (mixed also prints the APNs ceiling).
#
# resume: a mixed run of N devices killed with SIGKILL at half its deliveries, then `bugle resume`: seconds to the
# first send after resuming, seconds to finish, and the peak RSS of both processes. BENCH_RESUME_FIRST_ONLY=1 stops
# the resume a second after its first send (for 10M, where finishing takes another half hour).
#
# Needs release builds: swift build -c release --product bugle (the script builds it when missing), or BUGLE_BIN
# (and BUGLE_SIM_BIN, default: bugle-sim beside it) naming the binaries to measure. A debug build (a path with
# /debug/, or Swift code built without optimization, by readelf's DW_AT_APPLE_optimized) is warned about on stderr:
# its figures say nothing about Bugle's speed, and its simulator often cannot keep up (see the run check below).
#
# Every measured `bugle run` is checked before its figures count: the run must end `completed`, and every recipient
# must be `sent` except the seed's dead tokens (2%: the demo set's `dead…` tokens, answered 410 / UNREGISTERED and
# recorded `invalid_token`), with up to BENCH_TOLERANCE of the run's recipients in any other state (`unknown`,
# `failed_permanent`, `retry_wait`, …). A run that ends otherwise prints its status and its recipients per state and
# reason, and the script exits 1 without a table. The send modes need --devices 10 or more: the demo set's first
# devices are dead tokens.
#
# Environment:
#   BENCH_PORT=P              the throwaway cluster's port (default 5499; a whole number from 1024 to 65535). The
#                             cluster listens on a Unix socket in its own directory only, no TCP.
#   BENCH_KEEP=PREFIX         keep each run's JSON summary, the PostgreSQL log and the simulators' JSONL records as
#                             PREFIX.*.
#   BENCH_WINDOW=W            the pipeline campaign's in_flight_window (default 2000).
#   BENCH_TOLERANCE=PERCENT   how many of a run's recipients may end neither `sent` nor as a seeded dead token, in
#                             percent of its recipients, rounded down (default 0.1).
#   BENCH_SIM_OPTS="FLAGS"    added to `bugle-sim serve` (for example "--latency-ms 50 --fcm-latency-ms 50", a
#                             provider's round trip; or "--apns-port P --fcm-port Q" for fixed ports, which the
#                             script otherwise leaves to the system).
#   BENCH_FCM_CONNECTIONS=N   the providers file's fcm.connections (the simulator's file says 8), and h2load's FCM
#                             connections.
#   BENCH_PROXY=NAME          (apns, fcm, mixed) tunnel Bugle's provider connections through a local tinyproxy,
#                             squid, squid-tls (TLS to the proxy itself) or microsocks (SOCKS5); its CPU is printed
#                             with the simulator's.
#   BENCH_PG_OPTS="OPTS"      added to the cluster's server options (for example "-c log_min_duration_statement=20").
#   BENCH_PG_STATEMENTS=N     load pg_stat_statements and print, at the end, the N statements PostgreSQL spent most
#                             time in (with planning time; every mode).
#   BENCH_PERF=PATH           record Bugle's stacks with perf (cpu-clock, 499 Hz) into PATH (the figures then
#                             include perf).
#   BENCH_RESUME_FIRST_ONLY=1 (resume) stop the resume a second after its first send.
#
# Exit status: 0 with the table; 1 on a usage error, a failed step (its cause printed) or a run that is no
# measurement; 130 / 143 when interrupted by SIGINT (Ctrl-C) / SIGTERM, after removing the throwaway cluster and
# simulators (there is nothing to resume).
set -euo pipefail
# Binaries named relative to where the script was started from, before it moves to the repository root.
for var in BUGLE_BIN BUGLE_SIM_BIN; do
  value=${!var:-}
  if [ -n "$value" ] && [ "${value#/}" = "$value" ]; then export "$var=$(pwd)/$value"; fi
done
cd "$(dirname "$0")/../.."
ROOT=$(pwd)

mode=segment
devices="1000000"
runs=3
window=10000
quiet=0.2
while [ $# -gt 0 ]; do
  case "$1" in
    segment) mode=segment ;;
    apns) mode=apns ;;
    legacy) mode=legacy ;;
    fcm) mode=fcm ;;
    mixed) mode=mixed ;;
    resume) mode=resume ;;
    pipeline) mode=pipeline ;;
    --ten-million) devices=10000000 ;;
    --window|--quiet|--devices|--runs)
      # An option last on the line failed as `$2: unbound variable`.
      [ $# -ge 2 ] || { echo "bench.sh: $1 needs a value" >&2; exit 1; }
      case "$1" in
        --window) window=$2 ;;
        --quiet) quiet=$2 ;;
        --devices) devices=$2 ;;
        --runs) runs=$2 ;;
      esac
      shift ;;
    # The whole header: it printed a fixed 46 lines of it, cut off mid-sentence once the header grew.
    -h|--help) awk 'NR == 1 {next} !/^#/ {exit} {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 1 ;;
  esac
  shift
done
# Checked before a cluster is made: `--devices abc` failed later as an unbound variable, `--runs 0` with no run to median.
whole() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: $1 must be a whole number above 0, got '$2'" >&2; exit 1; }; }
IFS=, read -r -a device_counts <<< "$devices"
[ "${#device_counts[@]}" -gt 0 ] || { echo "bench.sh: --devices must be a whole number above 0, got ''" >&2; exit 1; }
for n in "${device_counts[@]}"; do whole --devices "$n"; done
whole --runs "$runs"
whole --window "$window"
for var in BENCH_WINDOW BENCH_FCM_CONNECTIONS BENCH_PG_STATEMENTS; do
  [ -z "${!var:-}" ] || whole "$var" "${!var}"
done
[[ "$quiet" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "bench.sh: --quiet must be seconds, got '$quiet'" >&2; exit 1; }
for var in BUGLE_BIN BUGLE_SIM_BIN; do
  value=${!var:-}
  if [ -n "$value" ] && [ ! -x "$value" ]; then echo "bench.sh: $var=$value is not an executable file" >&2; exit 1; fi
done
# BENCH_PORT=99999 or abc failed at pg_ctl ("could not start server / Examine the log output"), its log deleted.
PORT=${BENCH_PORT:-5499}
if ! [[ "$PORT" =~ ^[1-9][0-9]*$ ]] || [ "$PORT" -lt 1024 ] || [ "$PORT" -gt 65535 ]; then
  echo "bench.sh: BENCH_PORT must be a whole number from 1024 to 65535, got '$PORT'" >&2; exit 1
fi
TOLERANCE=${BENCH_TOLERANCE:-0.1}
[[ "$TOLERANCE" =~ ^[0-9]+(\.[0-9]+)?$ ]] || {
  echo "bench.sh: BENCH_TOLERANCE must be a percentage such as 0.1, got '$TOLERANCE'" >&2; exit 1
}
if [ "$mode" != segment ] && [ "${devices%%,*}" -lt 10 ]; then
  # The demo set's devices 1-3 are dead tokens (2% of each 200 ids, from the start): `pipeline --devices 3` sent
  # nothing and hung; `apns --devices 1` and `mixed --devices 3` exited 1 without a word (h2load refused fewer
  # requests than connections).
  echo "bench.sh: $mode needs --devices 10 or more (the demo set's first devices are dead tokens), got ${devices%%,*}" >&2
  exit 1
fi
case "$mode" in
  # Checked before a cluster is made and devices seeded (it was checked when the simulator started).
  pipeline|apns|fcm|mixed)
    command -v h2load >/dev/null || { echo "bench.sh: h2load missing: apt-get install -y nghttp2-client" >&2; exit 1; } ;;
esac

BIN=${BUGLE_BIN:-}
if [ -z "$BIN" ]; then
  # Not .build-release: that is tools/test.sh's optimized *test* build (-enable-testing, failpoints compiled in).
  if [ -x .build/release/bugle ]; then BIN="$ROOT/.build/release/bugle"; fi
fi
if [ -z "$BIN" ]; then
  swift build -c release --product bugle >&2
  BIN="$ROOT/.build/release/bugle"
fi
SIM=${BUGLE_SIM_BIN:-$(dirname "$BIN")/bugle-sim}

# is_debug_build BINARY: true for a path with /debug/ in it, or a binary whose first Swift compile unit lacks
# DW_AT_APPLE_optimized (swiftc marks every unit it optimized; a -Onone debug build has none). A stripped binary, or
# none without readelf, is taken at its path's word.
is_debug_build() {
  case "$1" in */debug/*) return 0 ;; esac
  command -v readelf >/dev/null || return 1
  local verdict
  verdict=$(readelf --debug-dump=info "$1" 2>/dev/null | awk '
    /\(DW_TAG_compile_unit\)/ { unit = 1; swift = 0; optimized = 0; next }
    unit && /DW_AT_name/ && $NF ~ /\.swift$/ { swift = 1 }
    unit && /DW_AT_APPLE_optimized/ { optimized = 1 }
    unit && /\(DW_TAG_/ { if (swift) { print (optimized ? "optimized" : "unoptimized"); exit } unit = 0 }') || true
  [ "$verdict" = unoptimized ]
}
for bin in "$BIN" "$SIM"; do
  if [ -x "$bin" ] && is_debug_build "$bin"; then
    echo "bench.sh: warning: $bin is a debug build: its figures say nothing about Bugle's speed (swift build -c release)" >&2
  fi
done

# shellcheck source=tools/bench/throwaway-cluster.sh
. "$ROOT/tools/bench/throwaway-cluster.sh"
cluster_init bugle-bench
SIM_PIDS=""
# BENCH_PG_STATEMENTS=N: print the N statements PostgreSQL spent most time in (pg_stat_statements, with planning time), at the end.
statements_report() {
  [ -n "${BENCH_PG_STATEMENTS:-}" ] || return 0
  echo "PostgreSQL statements by total time (all runs):" >&2
  "${PSQL[@]}" -P pager=off -c "SELECT round(total_exec_time)::bigint AS total_ms, round(total_plan_time)::bigint AS plan_ms, calls, round((total_exec_time / nullif(calls, 0))::numeric, 3) AS ms_per_call, rows, left(regexp_replace(query, '\s+', ' ', 'g'), 110) AS statement FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'bugle') ORDER BY total_exec_time DESC LIMIT ${BENCH_PG_STATEMENTS}" >&2 || true
}
H2_PIDS=""
INTERRUPTED=""
# "${TRACK[@]}" PIDFILE COMMAND...: runs COMMAND after writing its pid to PIDFILE, for cleanup to stop it. Bugle runs
# under /usr/bin/time, which a SIGTERM to the process group ends at once: its `bugle run` was left running, draining
# into a stopped cluster, after the script had ended.
# shellcheck disable=SC2016
TRACK=(sh -c 'echo $$ > "$0"; exec "$@"')
cleanup() {
  trap '' INT TERM # a second Ctrl-C does not cut the cleanup short
  local f pid
  # A Bugle still running (its /usr/bin/time was killed) stops first, while its simulator can still answer.
  for f in "$WORK"/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  statements_report
  # h2load runs under /usr/bin/time in the background: end time's child, then time.
  for pid in $H2_PIDS; do pkill -P "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true; done
  for pid in $SIM_PIDS; do kill "$pid" 2>/dev/null || true; done
  for pid in $SIM_PIDS; do for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done; done
  cluster_stop
  if [ -n "${BENCH_KEEP:-}" ]; then
    cp "$WORK/pg.log" "$BENCH_KEEP.pg.log" 2>/dev/null || true
    for f in "$WORK"/*.jsonl; do [ -f "$f" ] && cp "$f" "$BENCH_KEEP.$(basename "$f")"; done
  fi
  rm -rf "$WORK"
  # Interrupted, the script ended silently, or with Bugle's own "resume with `bugle resume 1`": that run's cluster is
  # gone by now.
  if [ -n "$INTERRUPTED" ]; then
    echo "bench.sh: interrupted by $INTERRUPTED: the benchmark stopped, and its throwaway cluster and simulators were removed (there is nothing to resume)" >&2
  fi
}
interrupted() { INTERRUPTED=$1; exit "$2"; }
trap cleanup EXIT
trap 'interrupted SIGINT 130' INT
trap 'interrupted SIGTERM 143' TERM

cluster_start "$PORT" "${BENCH_PG_STATEMENTS:+-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all -c pg_stat_statements.track_planning=on} ${BENCH_PG_OPTS:-}"
"${RUNAS[@]}" "$PGBIN/createdb" -h "$WORK" -p "$PORT" -U bugle bugle
[ -n "${BENCH_PG_STATEMENTS:-}" ] && psql -X -q -h "$WORK" -p "$PORT" -U bugle -d bugle -c "CREATE EXTENSION pg_stat_statements" >/dev/null
export BUGLE_DATABASE_URL="postgres://bugle@/bugle?host=$WORK&port=$PORT"
PSQL=(psql -X -q -h "$WORK" -p "$PORT" -U bugle -d bugle)
"$BIN" db migrate >/dev/null

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
SQL="SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale FROM bugle.devices d WHERE d.is_active"

# CPU seconds (user + system) a process has used so far.
cpu_of() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat" 2>/dev/null || echo 0; }
postgres_cpu() {
  # The postmaster's own time plus its reaped children's (backends that already exited), plus live backends.
  # A backend whose client just left is still exiting or waiting to be reaped: it is neither live nor in the
  # postmaster's reaped time yet, and reading then dropped a whole run's backends (a run once read 0.023 CPU-s per
  # 10,000). So first wait (up to 5 s) until no client backend or unreaped child is left.
  # A child reaped between reading the postmaster and listing its children would be in neither (runs read about
  # 40% low now and then: 0.201 against 0.33-0.35): the postmaster is read again after its children, and the whole
  # reading repeated until its reaped time did not move in between.
  local master total before after
  master=$(head -1 "$WORK/data/postmaster.pid")
  for _ in $(seq 100); do
    ps -o stat=,args= --ppid "$master" | grep -qE '^Z|\[local\]' || break
    sleep 0.05
  done
  for _ in $(seq 50); do
    before=$(awk '{print $16 + $17}' "/proc/$master/stat")
    total=$(awk '{print ($14 + $15 + $16 + $17) / 100}' "/proc/$master/stat")
    for pid in $(pgrep -P "$master"); do
      total=$(awk -v a="$total" -v b="$(cpu_of "$pid")" 'BEGIN {print a + b}')
    done
    after=$(awk '{print $16 + $17}' "/proc/$master/stat")
    [ "$before" = "$after" ] && break
  done
  echo "$total"
}

pids_cpu() { local total=0 pid; for pid in "$@"; do total=$(awk -v a="$total" -v b="$(cpu_of "$pid")" 'BEGIN {print a + b}'); done; echo "$total"; }
med() { printf '%s\n' "$@" | median; }
per10k() { awk -v c="$1" -v n="$2" 'BEGIN {if (n > 0) printf "%.3f", c * 10000 / n; else print "?"}'; }

# Seconds from $1 (epoch) to the earliest accepted notification at or after it in the record files, each given as
# PATH:OFFSET (its size before the run: everything before that offset was written earlier).
first_record_after() {
  python3 - "$@" <<'PY'
import re, sys
since, best = float(sys.argv[1]), None
pattern = re.compile(rb'"time":([0-9.eE+-]+)')
for spec in sys.argv[2:]:
    path, offset = spec.rsplit(':', 1)
    try:
        with open(path, 'rb') as f:
            f.seek(int(offset))
            for line in f:
                m = pattern.search(line)
                if m and float(m.group(1)) >= since and (best is None or float(m.group(1)) < best):
                    best = float(m.group(1))
    except FileNotFoundError:
        pass
print('?' if best is None else '%.2f' % (best - since))
PY
}

# check_run SUMMARY_JSON DEAD LABEL: whether a run's `--json` summary is a measurement: status `completed`, every
# recipient `sent` but for at most DEAD `invalid_token` (the seed's dead tokens in its segment), and at most
# BENCH_TOLERANCE percent of its recipients in any other state. Otherwise prints why, with the recipients per
# state and reason, and returns 1. (Only `,sent,` rows of the CSV were counted: a debug run with 3,927 of 5,000
# recipients `unknown` printed a table and exited 0.)
check_run() {
  python3 - "$1" "$2" "$3" "$TOLERANCE" <<'PY'
import json, sys
path, dead, label, tolerance = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
try:
    summary = json.load(open(path))
except (OSError, ValueError) as error:
    print("bench.sh: %s left no summary to check (%s)" % (label, error), file=sys.stderr)
    sys.exit(1)
states, reasons = {}, {}
for row in summary.get("counts") or []:
    states[row["status"]] = states.get(row["status"], 0) + row["count"]
    key = (row["status"], row.get("reason") or "")
    reasons[key] = reasons.get(key, 0) + row["count"]
total = sum(states.values())
sent, invalid = states.get("sent", 0), states.get("invalid_token", 0)
other = total - sent - invalid
allowed = int(total * tolerance / 100)
problems = []
if summary.get("status") != "completed":
    problems.append("it ended %s%s, not completed" % (summary.get("status"), ": " + summary["reason"] if summary.get("reason") else ""))
if sent == 0:
    problems.append("it sent nothing")
if invalid > dead:
    problems.append("%d invalid_token, but its segment holds only %d of the seed's dead tokens" % (invalid, dead))
if other > allowed:
    problems.append("%d of its %d recipients ended neither sent nor as a dead token (BENCH_TOLERANCE=%g%% allows %d)" % (other, total, tolerance, allowed))
if not problems:
    sys.exit(0)
print("bench.sh: %s is no measurement, so no figures are printed: %s." % (label, "; ".join(problems)), file=sys.stderr)
print("  recipients by state (reason): " + ", ".join(
    "%s %d (%s)" % (state, n, ", ".join("%s %d" % (r or "-", c) for (s, r), c in sorted(reasons.items()) if s == state))
    for state, n in sorted(states.items(), key=lambda item: (item[0] != "sent", item[0]))), file=sys.stderr)
print("  the seed's dead tokens in its segment: %d" % dead, file=sys.stderr)
sys.exit(1)
PY
}

# measure CAMPAIGN PROVIDERS "SIMULATOR_PIDS" "RECORD_FILES": runs `bugle run` R times and sets the medians
# M_RATE (sent/s), M_BUGLE, M_PG, M_SIM (CPU s per 10k sent), M_RSS (MB), M_FIRST (s to the first accepted
# notification, when record files are given) and M_MAT, M_SEND, M_REPORT (Bugle's phase_seconds).
measure() {
  local campaign=$1 providers=$2 sims=$3 records=$4
  local rates=() bcpu=() pcpu=() scpu=() rss=() first=() mat=() send=() rep=()
  local r p0 p1 s0 s1 t0 secs user sys kb sent specs f phases dead status
  for r in $(seq "$runs"); do
    specs=(); for f in $records; do specs+=("$f:$(stat -c %s "$f" 2>/dev/null || echo 0)"); done
    # The seed's dead tokens this run's segment holds (none once a run deactivated them).
    dead=$("${PSQL[@]}" -At -c "SELECT count(*) FROM ($(cat "${campaign%.yaml}.sql")) s WHERE s.token LIKE 'dead%'")
    # shellcheck disable=SC2086
    p0=$(postgres_cpu); s0=$(pids_cpu $sims); t0=$(date +%s.%N)
    # BENCH_PERF=PATH: sample Bugle's own stacks with perf (cpu-clock, 499 Hz) into PATH (figures then include perf).
    local wrap=()
    [ -n "${BENCH_PERF:-}" ] && wrap=(perf record -q -F 499 -e cpu-clock -g -o "$BENCH_PERF" --)
    status=0
    /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "${TRACK[@]}" "$WORK/bugle.pid" "${wrap[@]}" "$BIN" run "$campaign" \
      --providers "$providers" --csv "$WORK/report.csv" --quiet --json > "$WORK/run.json" 2> "$WORK/run.err" || status=$?
    rm -f "$WORK/bugle.pid"
    if [ "$status" != 0 ]; then
      echo "bench.sh: bugle run exited $status:" >&2; cat "$WORK/run.err" >&2
      check_run "$WORK/run.json" "$dead" "run $r of $runs ($(basename "$campaign" .yaml))" || true
      exit 1
    fi
    # shellcheck disable=SC2086
    p1=$(postgres_cpu); s1=$(pids_cpu $sims)
    [ -n "${BENCH_KEEP:-}" ] && cp "$WORK/run.json" "$BENCH_KEEP.$(basename "$campaign" .yaml).run$r.json"
    check_run "$WORK/run.json" "$dead" "run $r of $runs ($(basename "$campaign" .yaml))" || exit 1
    read -r secs user sys kb < "$WORK/time"
    sent=$(grep -c ',sent,' "$WORK/report.csv" || true)
    rates+=("$(awk -v n="$sent" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')")
    bcpu+=("$(per10k "$(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}')" "$sent")")
    pcpu+=("$(per10k "$(awk -v a="$p0" -v b="$p1" 'BEGIN {print b - a}')" "$sent")")
    scpu+=("$(per10k "$(awk -v a="$s0" -v b="$s1" 'BEGIN {print b - a}')" "$sent")")
    rss+=("$(awk -v k="$kb" 'BEGIN {printf "%.1f", k / 1024}')")
    if [ ${#specs[@]} -gt 0 ]; then first+=("$(first_record_after "$t0" "${specs[@]}")"); else first+=("?"); fi
    phases=$(python3 -c 'import json, sys; p = json.load(open(sys.argv[1])).get("phase_seconds", {}); print(" ".join("%.2f" % p.get(k, 0) for k in ("materialize", "send", "report")))' "$WORK/run.json")
    read -r f1 f2 f3 <<< "$phases"; mat+=("$f1"); send+=("$f2"); rep+=("$f3")
  done
  M_RATE=$(med "${rates[@]}"); M_BUGLE=$(med "${bcpu[@]}"); M_PG=$(med "${pcpu[@]}"); M_SIM=$(med "${scpu[@]}")
  M_RSS=$(med "${rss[@]}"); M_MAT=$(med "${mat[@]}"); M_SEND=$(med "${send[@]}"); M_REPORT=$(med "${rep[@]}")
  if [ "${first[0]}" = "?" ]; then M_FIRST="?"; else M_FIRST=$(med "${first[@]}"); fi
}

# mixed_campaign NAME FILTER WINDOW [TOP_LEVEL_LINE]: a campaign over the demo devices matching FILTER, written to
# $WORK/NAME.yaml, and its segment's SQL to $WORK/NAME.sql (for measure's count of dead tokens).
mixed_campaign() {
  printf '%s\n' "$SQL $2" > "$WORK/$1.sql"
  cat > "$WORK/$1.yaml" <<YAML
name: bench-$1
notification_type: bench
dedupe: none
${4:-}
segment:
  page_size: 5000
  sql: |
    $SQL $2
message:
  default_locale: en
  locales:
    en: { title: "Benchmark", body: "Hello from the benchmark" }
    de: { title: "Benchmark", body: "Hallo vom Benchmark" }
    pt: { title: "Benchmark", body: "Olá do benchmark" }
  data: { deeplink: "app://bench" }
  apns: { push_type: alert, priority: 10, collapse_id: bench }
  android: { channel_id: bench, priority: high, ttl: 3600s }
delivery: { in_flight_window: $3 }
YAML
}

# start_simulator [--fcm]: a release bugle-sim (APNs, and FCM with --fcm) recording to $WORK/apns.jsonl and
# $WORK/fcm.jsonl; sets SIMPID, PORT_APNS, PORT_FCM. FCM's 600,000/minute project quota is lifted in Bugle's
# pacing (the providers file) and in the simulator (--fcm-quota): the benchmark measures the pipeline, not Google's quota.
start_simulator() {
  [ -x "$SIM" ] || { swift build -c release --product bugle-sim >&2; SIM="$ROOT/.build/release/bugle-sim"; }
  "$SIM" certs "$WORK/sim" --port 0 >/dev/null
  local fcm=()
  # The simulator's FCM project quota (600,000 a rolling minute) is lifted too: with it, the h2load ceiling after
  # three 200,000-message runs read 429s and a rate of 1,810/s.
  [ "${1:-}" = --fcm ] && fcm=(--fcm-port 0 --fcm-record "$WORK/fcm.jsonl" --fcm-quota 1000000000)
  # shellcheck disable=SC2086
  "$SIM" serve --dir "$WORK/sim" --apns-port 0 --record "$WORK/apns.jsonl" "${fcm[@]}" ${BENCH_SIM_OPTS:-} > "$WORK/sim.out" 2>&1 &
  SIMPID=$!; SIM_PIDS="$SIM_PIDS $SIMPID"
  local want="^apns "; [ "${1:-}" = --fcm ] && want="^fcm "
  # -s: the first look can come before the background job's redirection made sim.out (a stray "No such file").
  for _ in $(seq 100); do grep -qs "$want" "$WORK/sim.out" && break; sleep 0.1; done
  grep -qs "$want" "$WORK/sim.out" || { echo "bugle-sim did not start:" >&2; cat "$WORK/sim.out" >&2; exit 1; }
  PORT_APNS=$(sed -n 's/^apns https:\/\/127.0.0.1:\([0-9]*\)$/\1/p' "$WORK/sim.out")
  PORT_FCM=$(sed -n 's/^fcm https:\/\/127.0.0.1:\([0-9]*\)$/\1/p' "$WORK/sim.out")
  sed -i 's/^fcm:$/fcm:\n  rate: { per_second: 1000000 }/' "$WORK/sim/providers.yaml"
  if [ -n "${BENCH_FCM_CONNECTIONS:-}" ]; then
    python3 - "$WORK/sim/providers.yaml" "$BENCH_FCM_CONNECTIONS" <<'PY'
import re, sys
path, n = sys.argv[1], sys.argv[2]
text = open(path).read()
head, sep, fcm = text.partition("\nfcm:\n")
fcm = re.sub(r"(?m)^  connections: .*\n", "", fcm)
open(path, "w").write(head + sep + "  connections: " + n + "\n" + fcm)
PY
  fi
}

# start_proxy: with BENCH_PROXY=tinyproxy, squid, squid-tls or microsocks (apns, fcm, mixed), a local proxy that Bugle's APNs and
# FCM connections tunnel through (`proxy:` in the providers file; squid-tls is squid's https_port, TLS to the proxy
# with the simulator's certificate and `proxy_ca_file`; h2load still connects directly); sets PROXYPID (empty
# without) and PROXYNAME.
start_proxy() {
  PROXYPID=""; PROXYNAME=""
  [ -n "${BENCH_PROXY:-}" ] || return 0
  local port scheme=http extra=""
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  case "$BENCH_PROXY" in
    tinyproxy)
      command -v tinyproxy >/dev/null || { echo "tinyproxy missing: apt-get install -y tinyproxy" >&2; exit 1; }
      printf 'Port %s\nListen 127.0.0.1\nTimeout 600\nMaxClients 64\nLogFile "%s"\nLogLevel Warning\nPidFile "%s"\nAllow 127.0.0.1\n' \
        "$port" "$WORK/tinyproxy.log" "$WORK/tinyproxy.pid" > "$WORK/tinyproxy.conf"
      tinyproxy -d -c "$WORK/tinyproxy.conf" > "$WORK/tinyproxy.out" 2>&1 &
      PROXYPID=$!
      ;;
    squid|squid-tls)
      local squid dir="$WORK/squid"
      squid=$(command -v squid || echo /usr/sbin/squid)
      [ -x "$squid" ] || { echo "squid missing: apt-get install -y squid" >&2; exit 1; }
      # Started as root, squid runs as its own user: its directory (and the way to it) must be open to it.
      chmod 755 "$WORK"; mkdir -p "$dir"; chmod 777 "$dir"
      cp "$WORK/sim/server.pem" "$dir/proxy.pem"; cp "$WORK/sim/server.key" "$dir/proxy.key"; chmod 644 "$dir"/proxy.*
      local listen="http_port 127.0.0.1:$port"
      if [ "$BENCH_PROXY" = squid-tls ]; then
        listen="https_port 127.0.0.1:$port tls-cert=$dir/proxy.pem tls-key=$dir/proxy.key"
        scheme=https; extra="\\n  proxy_ca_file: $WORK/sim/ca.pem"
      fi
      printf '%s\npid_filename %s/squid.pid\ncache_log %s/cache.log\naccess_log none\ncoredump_dir %s\ncache deny all\npinger_enable off\nvisible_hostname bugle-bench\nshutdown_lifetime 0 seconds\nacl loopback src 127.0.0.1\nhttp_access allow loopback\nhttp_access deny all\n' \
        "$listen" "$dir" "$dir" "$dir" > "$dir/squid.conf"
      "$squid" -N -f "$dir/squid.conf" > "$dir/squid.out" 2>&1 &
      PROXYPID=$!
      ;;
    microsocks)
      command -v microsocks >/dev/null || { echo "microsocks missing: apt-get install -y microsocks" >&2; exit 1; }
      microsocks -i 127.0.0.1 -p "$port" > "$WORK/microsocks.out" 2>&1 &
      PROXYPID=$!; scheme=socks5h
      ;;
    *) echo "BENCH_PROXY must be tinyproxy, squid, squid-tls or microsocks" >&2; exit 1 ;;
  esac
  PROXYNAME=$BENCH_PROXY; SIM_PIDS="$SIM_PIDS $PROXYPID"
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  sed -i "s|^apns:\$|apns:\n  proxy: $scheme://127.0.0.1:$port$extra|; s|^fcm:\$|fcm:\n  proxy: $scheme://127.0.0.1:$port$extra|" "$WORK/sim/providers.yaml"
}

# h2load_ceiling APNS_N FCM_N: h2load against the simulator's APNs and FCM endpoints at once (either count may be
# 0); sets H2_RATE (2xx per second over the longer of the two), H2_OK, H2_CPU (h2load's CPU s per 10k) and
# H2_SIM (the simulator's CPU s per 10k).
h2load_ceiling() {
  local s0 s1 pids=()
  printf '{"aps":{"alert":{"title":"Benchmark","body":"Hello from the benchmark"}},"deeplink":"app://bench"}' > "$WORK/payload.json"
  printf '{"message":{"token":"fcm-bench:APA91b","notification":{"title":"Benchmark","body":"Hello from the benchmark"},"data":{"deeplink":"app://bench"},"android":{"priority":"high","ttl":"3600s"}}}' > "$WORK/fcm.json"
  rm -f "$WORK"/h2-*.out "$WORK"/h2-*.time
  # With neither, `wait` below waited for every child, the simulator too: for ever.
  [ $(($1 + $2)) -gt 0 ] || { echo "bench.sh: no live device left for the h2load ceiling" >&2; exit 1; }
  s0=$(cpu_of "$SIMPID")
  # Never more connections than requests: h2load refuses that (`-n 1 -c 4`).
  if [ "$1" -gt 0 ]; then
    /usr/bin/time -f '%e %U %S' -o "$WORK/h2-apns.time" h2load -n "$1" -c "$(( $1 < 4 ? $1 : 4 ))" -m 250 \
      -H "authorization: bearer $("$SIM" jwt "$WORK/sim")" -H "apns-topic: com.example.bugle" \
      -H "apns-push-type: alert" -H "apns-priority: 10" -d "$WORK/payload.json" \
      "https://127.0.0.1:$PORT_APNS/3/device/0a0b0c0d$(printf '%056d' 1)" > "$WORK/h2-apns.out" 2>&1 &
    pids+=($!); H2_PIDS="$H2_PIDS $!"
  fi
  if [ "$2" -gt 0 ]; then
    # As many connections as Bugle's FCM lane opens (fcm.connections, 8 by default; BENCH_FCM_CONNECTIONS), each with
    # Google's 100 streams: a ceiling held to fewer connections than Bugle uses would flatter the ratio.
    local fcm_clients=${BENCH_FCM_CONNECTIONS:-8}
    [ "$fcm_clients" -le "$2" ] || fcm_clients=$2
    /usr/bin/time -f '%e %U %S' -o "$WORK/h2-fcm.time" h2load -n "$2" -c "$fcm_clients" -m 100 \
      -H "authorization: Bearer $("$SIM" fcm-token "$WORK/sim")" -H "content-type: application/json" \
      -d "$WORK/fcm.json" "https://127.0.0.1:$PORT_FCM/v1/projects/bugle-sim/messages:send" > "$WORK/h2-fcm.out" 2>&1 &
    pids+=($!); H2_PIDS="$H2_PIDS $!"
  fi
  # A failed h2load ended the script here under set -e, without a word.
  local pid failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  H2_PIDS=""
  if [ "$failed" = 1 ]; then
    echo "bench.sh: h2load failed (the ceiling's requests):" >&2
    tail -n 5 "$WORK"/h2-*.out "$WORK"/h2-*.time >&2 2>/dev/null || true
    exit 1
  fi
  s1=$(cpu_of "$SIMPID")
  H2_OK=$(cat "$WORK"/h2-*.out | sed -n 's/.*status codes: \([0-9]*\) 2xx.*/\1/p' | awk '{s += $1} END {print s + 0}')
  # A ceiling that was refused or throttled is no ceiling: say so rather than print a ratio against it.
  if [ "$H2_OK" -lt $(($1 + $2)) ]; then
    echo "h2load got $H2_OK 2xx of $(($1 + $2)) requests; its rate is not a ceiling:" >&2
    grep -h "status codes" "$WORK"/h2-*.out >&2 || true
    exit 1
  fi
  local wall cpu
  wall=$(cat "$WORK"/h2-*.time | awk '$1 > m {m = $1} END {print m + 0}')
  cpu=$(cat "$WORK"/h2-*.time | awk '{s += $2 + $3} END {print s + 0}')
  H2_RATE=$(awk -v n="$H2_OK" -v w="$wall" 'BEGIN {if (w > 0) printf "%.0f", n / w; else print 0}')
  H2_CPU=$(per10k "$cpu" "$H2_OK")
  H2_SIM=$(per10k "$(awk -v a="$s0" -v b="$s1" 'BEGIN {print b - a}')" "$H2_OK")
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.0f%%", 100 * a / b; else print "?"}'; }
# A ratio above 100% (a debug run once read 154%) means h2load did not find the simulator's limit: say so.
ceiling_warning() {
  if awk -v a="$M_RATE" -v b="$H2_RATE" 'BEGIN {exit !(a > b)}'; then
    echo "bench.sh: warning: Bugle's $M_RATE/s is above h2load's $H2_RATE/s: the ceiling is no ceiling (a busy machine or a debug simulator)" >&2
  fi
}

if [ "$mode" = pipeline ]; then
  n=${devices%%,*}
  "$BIN" demo --seed-only --devices "$n" >/dev/null
  start_simulator --fcm
  mixed_campaign pipeline "AND d.id <= $n" ${BENCH_WINDOW:-2000}
  measure "$WORK/pipeline.yaml" "$WORK/sim/providers.yaml" "$SIMPID" "$WORK/apns.jsonl $WORK/fcm.jsonl"
  ios=$("${PSQL[@]}" -At -c "SELECT count(*) FROM bugle.devices WHERE is_active AND platform = 'ios' AND id <= $n")
  android=$("${PSQL[@]}" -At -c "SELECT count(*) FROM bugle.devices WHERE is_active AND platform <> 'ios' AND id <= $n")
  h2load_ceiling "$ios" "$android"
  kill "$SIMPID" 2>/dev/null || true
  both=$(awk -v b="$M_BUGLE" -v p="$M_PG" 'BEGIN {printf "%.3f", b + p}')
  printf '%-36s %s\n' "devices (mixed: iOS + Android/web)" "$n ($runs runs, medians)"
  printf '%-36s %s\n' "Bugle end-to-end notif/s" "$M_RATE"
  printf '%-36s %s\n' "h2load notif/s (same simulator)" "$H2_RATE ($H2_OK x 2xx: $ios APNs + $android FCM at once)"
  printf '%-36s %s\n' "ratio to ceiling" "$(ratio "$M_RATE" "$H2_RATE")"
  printf '%-36s %s\n' "Bugle CPU s / 10k" "$M_BUGLE"
  printf '%-36s %s\n' "PostgreSQL CPU s / 10k" "$M_PG"
  printf '%-36s %s\n' "Bugle + PostgreSQL CPU s / 10k" "$both (h2load: $H2_CPU, $(ratio "$both" "$H2_CPU") of it)"
  printf '%-36s %s\n' "simulator CPU s / 10k" "$M_SIM (under h2load: $H2_SIM)"
  printf '%-36s %s\n' "Bugle peak RSS MB" "$M_RSS"
  printf '%-36s %s\n' "time to first send s" "$M_FIRST"
  printf '%-36s %s\n' "phases s (materialize/send/report)" "$M_MAT / $M_SEND / $M_REPORT"
  ceiling_warning
  exit 0
fi

if [ "$mode" = legacy ]; then
  n=${devices%%,*}
  "$BIN" demo --seed-only --devices $((2 * n)) >/dev/null
  start_simulator
  "$SIM" legacy --dir "$WORK/sim" --port 0 --feedback-port 0 --quiet-period "$quiet" > "$WORK/legacy.out" 2>&1 &
  LEGACYPID=$!; SIM_PIDS="$SIM_PIDS $LEGACYPID"
  for _ in $(seq 100); do grep -qs "^providers file: " "$WORK/legacy.out" && break; sleep 0.1; done
  grep -qs "^providers file: " "$WORK/legacy.out" || { echo "bugle-sim legacy did not start:" >&2; cat "$WORK/legacy.out" >&2; exit 1; }
  for transport in http2 legacy; do
    mixed_campaign "$transport" "AND d.platform = 'ios' AND d.id <= $((2 * n))" "$window" "ios_transport: $transport"
  done
  # HTTP/2 first: its 410s deactivate the demo set's 2% dead tokens, so both lanes then send the same devices.
  measure "$WORK/http2.yaml" "$WORK/sim/providers.yaml" "$SIMPID" ""
  h2="$M_RATE $M_BUGLE $M_PG $M_SIM $M_RSS"
  measure "$WORK/legacy.yaml" "$WORK/sim/providers-legacy.yaml" "$LEGACYPID" ""
  lg="$M_RATE $M_BUGLE $M_PG $M_SIM $M_RSS"
  printf '%-28s %s\n' "iOS notifications" "$n per run ($runs runs per lane, medians; window $window, quiet_period ${quiet}s)"
  printf '%-22s %10s %14s %14s %14s %10s\n' lane "notif/s" "Bugle CPU/10k" "PG CPU/10k" "sim CPU/10k" "RSS MB"
  # shellcheck disable=SC2086
  printf '%-22s %10s %14s %14s %14s %10s\n' "HTTP/2 (apns)" $h2
  # shellcheck disable=SC2086
  printf '%-22s %10s %14s %14s %14s %10s\n' "legacy binary" $lg
  exit 0
fi

# records_since FILE OFFSET: about how many JSONL records FILE holds past OFFSET (exact below 4,000 records).
records_since() {
  local size sample
  size=$(stat -c %s "$1" 2>/dev/null || echo 0)
  [ "$size" -gt "$2" ] || { echo 0; return; }
  sample=$(tail -c +$(($2 + 1)) "$1" | head -n 4000 | wc -lc)
  awk -v s="$sample" -v bytes=$((size - $2)) 'BEGIN {split(s, a, " "); if (a[1] < 4000) print a[1]; else printf "%d", bytes * a[1] / a[2]}'
}

if [ "$mode" = resume ]; then
  # A mixed run of N devices killed with SIGKILL once half of them were delivered, then `bugle resume`: seconds from
  # starting the resume to the simulators' first accepted notification after it, R times (medians).
  n=${devices%%,*}
  "$BIN" demo --seed-only --devices "$n" >/dev/null
  start_simulator --fcm
  mixed_campaign resume "AND d.id <= $n" 2000
  firsts=(); totals=(); rss_run=(); rss_resume=()
  for r in $(seq "$runs"); do
    before_a=$(stat -c %s "$WORK/apns.jsonl" 2>/dev/null || echo 0); before_f=$(stat -c %s "$WORK/fcm.jsonl" 2>/dev/null || echo 0)
    /usr/bin/time -f '%M' -o "$WORK/run.rss" "${TRACK[@]}" "$WORK/bugle.pid" "$BIN" run "$WORK/resume.yaml" --providers "$WORK/sim/providers.yaml" --csv "$WORK/report.csv" --quiet > "$WORK/run.out" 2>&1 &
    pid=$!
    live=$(( n * 98 / 100 ))
    # Deliveries so far, from the record files' growth over their mean line length (counting lines of a
    # gigabyte-sized record every poll would cost the machine a core at 10M).
    while kill -0 "$pid" 2>/dev/null; do
      done_n=$(( $(records_since "$WORK/apns.jsonl" "$before_a") + $(records_since "$WORK/fcm.jsonl" "$before_f") ))
      [ "$done_n" -ge $(( live / 2 )) ] && break
      sleep 0.5
    done
    # $pid is /usr/bin/time: kill its child, so time still writes the killed run's peak RSS.
    pkill -9 -P "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$WORK/bugle.pid"
    run_id=$("${PSQL[@]}" -t -A -c "SELECT max(id) FROM bugle.runs")
    spec_a="$WORK/apns.jsonl:$(stat -c %s "$WORK/apns.jsonl")"; spec_f="$WORK/fcm.jsonl:$(stat -c %s "$WORK/fcm.jsonl")"
    t0=$(date +%s.%N)
    if [ -n "${BENCH_RESUME_FIRST_ONLY:-}" ]; then
      # Only the time to the first send: stop the resume once the record files grow (its RSS is then partial).
      /usr/bin/time -f '%M' -o "$WORK/resume.rss" "${TRACK[@]}" "$WORK/bugle.pid" "$BIN" resume "$run_id" --providers "$WORK/sim/providers.yaml" --csv "$WORK/report.csv" --quiet > "$WORK/resume.out" 2>&1 &
      rpid=$!
      size_a=${spec_a##*:}; size_f=${spec_f##*:}
      for _ in $(seq 1200); do
        [ "$(stat -c %s "$WORK/apns.jsonl")" -gt "$size_a" ] || [ "$(stat -c %s "$WORK/fcm.jsonl")" -gt "$size_f" ] && break
        sleep 0.1
      done
      sleep 1; pkill -9 -P "$rpid" 2>/dev/null || true; wait "$rpid" 2>/dev/null || true; rm -f "$WORK/bugle.pid"
    else
      /usr/bin/time -f '%M' -o "$WORK/resume.rss" "${TRACK[@]}" "$WORK/bugle.pid" "$BIN" resume "$run_id" --providers "$WORK/sim/providers.yaml" --csv "$WORK/report.csv" --quiet > "$WORK/resume.out" 2>&1 || true
      rm -f "$WORK/bugle.pid"
    fi
    t1=$(date +%s.%N)
    firsts+=("$(first_record_after "$t0" "$spec_a" "$spec_f")")
    totals+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')")
    rss_run+=("$(awk '/^[0-9]+$/ {printf "%.1f", $1 / 1024}' "$WORK/run.rss")")
    rss_resume+=("$(awk '/^[0-9]+$/ {printf "%.1f", $1 / 1024}' "$WORK/resume.rss")")
    if [ -z "${BENCH_RESUME_FIRST_ONLY:-}" ]; then
      ended=$("${PSQL[@]}" -t -A -c "SELECT status FROM bugle.runs WHERE id = $run_id")
      echo "resume: run $run_id ended $ended" >&2
      # Its seconds to finish time a run that did not finish: no figure.
      [ "$ended" = completed ] || { echo "bench.sh: run $run_id did not complete after its resume, so no figures are printed:" >&2; tail -n 20 "$WORK/resume.out" >&2; exit 1; }
    fi
  done
  kill "$SIMPID" 2>/dev/null || true
  printf '%-36s %s\n' "mode" "resume, $n devices killed at half ($runs runs, medians)"
  printf '%-36s %s\n' "resume: seconds to the first send" "$(med "${firsts[@]}")"
  printf '%-36s %s\n' "resume: seconds to finish the rest" "$(med "${totals[@]}")"
  printf '%-36s %s\n' "peak RSS MB, killed run / resume" "$(med "${rss_run[@]}") / $(med "${rss_resume[@]}")"
  exit 0
fi

if [ "$mode" = apns ] || [ "$mode" = fcm ] || [ "$mode" = mixed ]; then
  n=${devices%%,*}
  "$BIN" demo --seed-only --devices $((2 * n)) >/dev/null
  start_simulator --fcm
  case "$mode" in
    apns) filter="AND d.platform = 'ios'" ;;
    fcm) filter="AND d.platform <> 'ios'" ;;
    mixed) filter="" ;;
  esac
  mixed_campaign "$mode" "$filter AND d.id <= $((2 * n))" 2000
  start_proxy
  # With a proxy, its CPU is counted with the simulator's (both are the path Bugle's requests take).
  measure "$WORK/$mode.yaml" "$WORK/sim/providers.yaml" "$SIMPID $PROXYPID" ""
  case "$mode" in
    apns) h2load_ceiling "$n" 0 ;;
    fcm) h2load_ceiling 0 "$n" ;;
    mixed) h2load_ceiling "$n" "$n" ;;
  esac
  kill "$SIMPID" 2>/dev/null || true
  printf '%-28s %s\n' "mode" "$mode, $n notifications per provider ($runs runs, medians)"
  printf '%-28s %s\n' "Bugle end-to-end notif/s" "$M_RATE"
  printf '%-28s %s\n' "h2load req/s (same sim)" "$H2_RATE ($H2_OK x 2xx)"
  printf '%-28s %s\n' "ratio" "$(ratio "$M_RATE" "$H2_RATE")"
  printf '%-28s %s\n' "Bugle CPU s / 10k" "$M_BUGLE"
  printf '%-28s %s\n' "PostgreSQL CPU s / 10k" "$M_PG"
  printf '%-28s %s\n' "simulator${PROXYPID:+ + $PROXYNAME} CPU s / 10k" "$M_SIM (h2load: $H2_SIM)"
  printf '%-28s %s\n' "Bugle peak RSS MB" "$M_RSS"
  ceiling_warning
  exit 0
fi

printf '%-10s %14s %14s %8s %12s\n' devices "dry-run rows/s" "COPY rows/s" ratio "peak RSS MB"
seeded=0
for n in ${devices//,/ }; do
  if [ "$n" -gt "$seeded" ]; then
    "$BIN" demo --seed-only --devices "$n" >/dev/null
    seeded=$n
  fi
  # Restrict the segment to the first n devices so one seeded table serves every N.
  cat > "$WORK/bench-campaign.yaml" <<YAML
name: bench-$n
notification_type: bench
dedupe: none
segment:
  page_size: 5000
  sql: |
    $SQL AND d.id <= $n
message:
  default_locale: en
  locales:
    en: { title: "Benchmark", body: "Hello from the benchmark" }
    de: { title: "Benchmark", body: "Hallo vom Benchmark" }
    pt: { title: "Benchmark", body: "Olá do benchmark" }
  data: { deeplink: "app://bench" }
  apns: { push_type: alert, priority: 10, collapse_id: bench }
  android: { channel_id: bench, priority: high, ttl: 3600s }
YAML
  rates=(); rss=(); copies=()
  for r in $(seq "$runs"); do
    wrap=(); [ -n "${BENCH_PERF:-}" ] && wrap=(perf record -q -F 499 -e cpu-clock -g -o "$BENCH_PERF" --)
    p0=$(postgres_cpu)
    /usr/bin/time -f '%e %M %U %S' -o "$WORK/time" "${TRACK[@]}" "$WORK/bugle.pid" "${wrap[@]}" "$BIN" run "$WORK/bench-campaign.yaml" --dry-run --samples 0 >/dev/null
    rm -f "$WORK/bugle.pid"
    p1=$(postgres_cpu)
    read -r secs kb user sys < "$WORK/time"
    echo "dry run of $n: ${secs} s wall, ${user} s user + ${sys} s system (Bugle), $(awk -v a="$p0" -v b="$p1" 'BEGIN {printf "%.2f", b - a}') s PostgreSQL CPU" >&2
    rates+=("$(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')")
    rss+=("$(awk -v k="$kb" 'BEGIN {printf "%.1f", k / 1024}')")
    p0=$(postgres_cpu); start=$(date +%s.%N)
    "${PSQL[@]}" -c "COPY ($SQL AND d.id <= $n ORDER BY d.id) TO STDOUT" > /dev/null
    end=$(date +%s.%N); p1=$(postgres_cpu)
    echo "COPY of $n: $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.2f", b - a}') s wall, $(awk -v a="$p0" -v b="$p1" 'BEGIN {printf "%.2f", b - a}') s PostgreSQL CPU" >&2
    copies+=("$(awk -v n="$n" -v a="$start" -v b="$end" 'BEGIN {printf "%.0f", n / (b - a)}')")
  done
  rate=$(printf '%s\n' "${rates[@]}" | median)
  copy=$(printf '%s\n' "${copies[@]}" | median)
  peak=$(printf '%s\n' "${rss[@]}" | median)
  printf '%-10s %14s %14s %7.0f%% %12s\n' "$n" "$rate" "$copy" "$(awk -v a="$rate" -v b="$copy" 'BEGIN {print 100 * a / b}')" "$peak"
done
