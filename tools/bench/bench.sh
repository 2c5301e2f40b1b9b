#!/usr/bin/env bash
# Bugle benchmarks. Usage:
#   tools/bench/bench.sh [segment] [--devices N[,N...]] [--runs R]
#
# segment (default): seeds N devices (default 1,000,000, and 5,000,000 for the flatness check when given
# "--devices 1000000,5000000") into a throwaway PostgreSQL cluster, then times a full dry run of
# tools/bench/bench-campaign.yaml (every device) R times (default 3) with /usr/bin/time -v, and the same
# machine's `COPY (SELECT ...) TO STDOUT` of the same rows as the ceiling. Prints the median rows/second,
# the ratio to COPY, and peak RSS per N.
#
# Needs a release build: swift build -c release --product bugle (the script builds it when missing).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)

mode=segment
devices="1000000"
runs=3
while [ $# -gt 0 ]; do
  case "$1" in
    segment) mode=segment ;;
    --devices) devices="$2"; shift ;;
    --runs) runs="$2"; shift ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 1 ;;
  esac
  shift
done

BIN=${BUGLE_BIN:-}
if [ -z "$BIN" ]; then
  for candidate in .build-release/release/bugle .build/release/bugle; do
    [ -x "$candidate" ] && BIN="$ROOT/$candidate" && break
  done
fi
if [ -z "$BIN" ]; then
  swift build -c release --product bugle >&2
  BIN="$ROOT/.build/release/bugle"
fi

PGBIN=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
WORK=$(mktemp -d /tmp/bugle-bench-XXXXXX)
chmod 755 "$WORK"
RUNAS=()
if [ "$(id -u)" = 0 ]; then RUNAS=(runuser -u postgres --); chown postgres "$WORK"; fi
PORT=5499
cleanup() { "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" stop -m immediate >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT

"${RUNAS[@]}" "$PGBIN/initdb" -D "$WORK/data" -U bugle --auth=trust -E UTF8 --no-sync >/dev/null
"${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/pg.log" -w \
  -o "-k $WORK -p $PORT -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c shared_buffers=256MB" start >/dev/null
"${RUNAS[@]}" "$PGBIN/createdb" -h "$WORK" -p "$PORT" -U bugle bugle
export BUGLE_DATABASE_URL="postgres://bugle@/bugle?host=$WORK&port=$PORT"
PSQL=(psql -X -q -h "$WORK" -p "$PORT" -U bugle -d bugle)
"$BIN" db migrate >/dev/null

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
SQL="SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale FROM bugle.devices d WHERE d.is_active"

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
    /usr/bin/time -f '%e %M' -o "$WORK/time" "$BIN" run "$WORK/bench-campaign.yaml" --dry-run --samples 0 >/dev/null
    read -r secs kb < "$WORK/time"
    rates+=("$(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')")
    rss+=("$(awk -v k="$kb" 'BEGIN {printf "%.1f", k / 1024}')")
    start=$(date +%s.%N)
    "${PSQL[@]}" -c "COPY ($SQL AND d.id <= $n ORDER BY d.id) TO STDOUT" > /dev/null
    end=$(date +%s.%N)
    copies+=("$(awk -v n="$n" -v a="$start" -v b="$end" 'BEGIN {printf "%.0f", n / (b - a)}')")
  done
  rate=$(printf '%s\n' "${rates[@]}" | median)
  copy=$(printf '%s\n' "${copies[@]}" | median)
  peak=$(printf '%s\n' "${rss[@]}" | median)
  printf '%-10s %14s %14s %7.0f%% %12s\n' "$n" "$rate" "$copy" "$(awk -v a="$rate" -v b="$copy" 'BEGIN {print 100 * a / b}')" "$peak"
done
