#!/usr/bin/env bash
# Bugle benchmarks. Usage:
#   tools/bench/bench.sh [segment] [--devices N[,N...]] [--runs R]
#   tools/bench/bench.sh apns [--devices N] [--runs R]
#   tools/bench/bench.sh legacy [--devices N] [--runs R] [--window W] [--quiet S]
#   tools/bench/bench.sh fcm|mixed [--devices N] [--runs R]
#
# apns: seeds 2N demo devices (N iOS), starts a release `bugle-sim` in its own process, runs an iOS campaign
# end to end R times (PostgreSQL ledger -> APNs lane over TLS + HTTP/2 -> simulator), and in the same run
# h2load sends N requests to the same simulator as the ceiling. Prints median notifications/second, CPU
# seconds per 10,000 notifications for Bugle, PostgreSQL and the simulator, and Bugle's peak RSS.
#
# segment (default): seeds N devices (default 1,000,000, and 5,000,000 for the flatness check when given
# "--devices 1000000,5000000") into a throwaway PostgreSQL cluster, then times a full dry run of
# tools/bench/bench-campaign.yaml (every device) R times (default 3) with /usr/bin/time -v, and the same
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
# half Android/web through FCM). FCM's default pacing (its 600,000/minute project quota) is lifted for the
# benchmark. h2load posts N messages to the FCM endpoint with a simulator-minted access token as the ceiling
# (mixed also prints the APNs ceiling).
#
# Needs a release build: swift build -c release --product bugle (the script builds it when missing).
set -euo pipefail
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
    --window) window="$2"; shift ;;
    --quiet) quiet="$2"; shift ;;
    --devices) devices="$2"; shift ;;
    --runs) runs="$2"; shift ;;
    -h|--help) sed -n 2,19p "$0"; exit 0 ;;
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
SIM=${BUGLE_SIM_BIN:-$(dirname "$BIN")/bugle-sim}

PGBIN=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
WORK=$(mktemp -d /tmp/bugle-bench-XXXXXX)
chmod 755 "$WORK"
RUNAS=()
if [ "$(id -u)" = 0 ]; then RUNAS=(runuser -u postgres --); chown postgres "$WORK"; fi
PORT=5499
SIM_PIDS=""
cleanup() { for pid in $SIM_PIDS; do kill "$pid" 2>/dev/null || true; done; "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" stop -m immediate >/dev/null 2>&1 || true; [ -n "${BENCH_KEEP:-}" ] && cp "$WORK/pg.log" "$BENCH_KEEP.pg.log"; rm -rf "$WORK"; }
trap cleanup EXIT

"${RUNAS[@]}" "$PGBIN/initdb" -D "$WORK/data" -U bugle --auth=trust -E UTF8 --no-sync >/dev/null
"${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/pg.log" -w \
  -o "-k $WORK -p $PORT -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c shared_buffers=256MB ${BENCH_PG_OPTS:-}" start >/dev/null
"${RUNAS[@]}" "$PGBIN/createdb" -h "$WORK" -p "$PORT" -U bugle bugle
export BUGLE_DATABASE_URL="postgres://bugle@/bugle?host=$WORK&port=$PORT"
PSQL=(psql -X -q -h "$WORK" -p "$PORT" -U bugle -d bugle)
"$BIN" db migrate >/dev/null

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
SQL="SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale FROM bugle.devices d WHERE d.is_active"

# CPU seconds (user + system) a process has used so far.
cpu_of() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat" 2>/dev/null || echo 0; }
postgres_cpu() {
  # The postmaster's own time plus its reaped children's (backends that already exited), plus live backends.
  local master total
  master=$(head -1 "$WORK/data/postmaster.pid")
  total=$(awk '{print ($14 + $15 + $16 + $17) / 100}' "/proc/$master/stat")
  for pid in $(pgrep -P "$master"); do
    total=$(awk -v a="$total" -v b="$(cpu_of "$pid")" 'BEGIN {print a + b}')
  done
  echo "$total"
}

if [ "$mode" = legacy ]; then
  n=${devices%%,*}
  [ -x "$SIM" ] || { swift build -c release --product bugle-sim >&2; SIM="$ROOT/.build/release/bugle-sim"; }
  "$BIN" demo --seed-only --devices $((2 * n)) >/dev/null
  "$SIM" certs "$WORK/sim" --port 0 >/dev/null
  "$SIM" serve --dir "$WORK/sim" --apns-port 0 > "$WORK/sim.out" 2>&1 &
  H2PID=$!; SIM_PIDS="$SIM_PIDS $H2PID"
  "$SIM" legacy --dir "$WORK/sim" --port 0 --feedback-port 0 --quiet-period "$quiet" > "$WORK/legacy.out" 2>&1 &
  LEGACYPID=$!; SIM_PIDS="$SIM_PIDS $LEGACYPID"
  for _ in $(seq 100); do grep -q "^apns " "$WORK/sim.out" && grep -q "^providers file: " "$WORK/legacy.out" && break; sleep 0.1; done
  grep -q "^providers file: " "$WORK/legacy.out" || { echo "bugle-sim legacy did not start:" >&2; cat "$WORK/legacy.out" >&2; exit 1; }
  for transport in http2 legacy; do
    cat > "$WORK/$transport-campaign.yaml" <<YAML
name: bench-$transport
notification_type: bench
dedupe: none
ios_transport: $transport
segment:
  page_size: 5000
  sql: |
    $SQL AND d.platform = 'ios' AND d.id <= $((2 * n))
message:
  default_locale: en
  locales:
    en: { title: "Benchmark", body: "Hello from the benchmark" }
    de: { title: "Benchmark", body: "Hallo vom Benchmark" }
  data: { deeplink: "app://bench" }
  apns: { push_type: alert, priority: 10, collapse_id: bench }
delivery: { in_flight_window: $window }
YAML
  done
  med() { printf '%s\n' "$@" | median; }
  # lane_runs CAMPAIGN PROVIDERS SIMULATOR_PID: R runs; prints "notif/s bugle-cpu pg-cpu sim-cpu rss-mb" medians.
  lane_runs() {
    local rates=() bcpu=() pcpu=() scpu=() rss=() p0 p1 s0 s1 secs user sys kb sent
    for r in $(seq "$runs"); do
      p0=$(postgres_cpu); s0=$(cpu_of "$3")
      /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "$BIN" run "$1" --providers "$2" --csv "$WORK/report.csv" > "$WORK/run.out"
      p1=$(postgres_cpu); s1=$(cpu_of "$3")
      [ -n "${BENCH_KEEP:-}" ] && cp "$WORK/run.out" "$BENCH_KEEP.$(basename "$1" .yaml).run$r.out"
      read -r secs user sys kb < "$WORK/time"
      sent=$(grep -c ',sent,' "$WORK/report.csv" || true)
      rates+=("$(awk -v n="$sent" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')")
      bcpu+=("$(awk -v u="$user" -v s="$sys" -v n="$sent" 'BEGIN {printf "%.3f", (u + s) * 10000 / n}')")
      pcpu+=("$(awk -v a="$p0" -v b="$p1" -v n="$sent" 'BEGIN {printf "%.3f", (b - a) * 10000 / n}')")
      scpu+=("$(awk -v a="$s0" -v b="$s1" -v n="$sent" 'BEGIN {printf "%.3f", (b - a) * 10000 / n}')")
      rss+=("$(awk -v k="$kb" 'BEGIN {printf "%.1f", k / 1024}')")
    done
    echo "$(med "${rates[@]}") $(med "${bcpu[@]}") $(med "${pcpu[@]}") $(med "${scpu[@]}") $(med "${rss[@]}")"
  }
  # HTTP/2 first: its 410s deactivate the demo set's 2% dead tokens, so both lanes then send the same devices.
  read -r h2 h2b h2p h2s h2r <<< "$(lane_runs "$WORK/http2-campaign.yaml" "$WORK/sim/providers.yaml" "$H2PID")"
  read -r lg lgb lgp lgs lgr <<< "$(lane_runs "$WORK/legacy-campaign.yaml" "$WORK/sim/providers-legacy.yaml" "$LEGACYPID")"
  printf '%-28s %s\n' "iOS notifications" "$n per run ($runs runs per lane, medians; window $window, quiet_period ${quiet}s)"
  printf '%-22s %10s %14s %14s %14s %10s\n' lane "notif/s" "Bugle CPU/10k" "PG CPU/10k" "sim CPU/10k" "RSS MB"
  printf '%-22s %10s %14s %14s %14s %10s\n' "HTTP/2 (apns)" "$h2" "$h2b" "$h2p" "$h2s" "$h2r"
  printf '%-22s %10s %14s %14s %14s %10s\n' "legacy binary" "$lg" "$lgb" "$lgp" "$lgs" "$lgr"
  exit 0
fi

if [ "$mode" = fcm ] || [ "$mode" = mixed ]; then
  n=${devices%%,*}
  [ -x "$SIM" ] || { swift build -c release --product bugle-sim >&2; SIM="$ROOT/.build/release/bugle-sim"; }
  command -v h2load >/dev/null || { echo "h2load missing: apt-get install -y nghttp2-client" >&2; exit 1; }
  "$BIN" demo --seed-only --devices $((2 * n)) >/dev/null
  "$SIM" certs "$WORK/sim" --port 0 >/dev/null
  "$SIM" serve --dir "$WORK/sim" --apns-port 0 --fcm-port 0 > "$WORK/sim.out" 2>&1 &
  SIMPID=$!
  for _ in $(seq 100); do grep -q "^fcm " "$WORK/sim.out" && break; sleep 0.1; done
  PORT_APNS=$(sed -n 's/^apns https:\/\/127.0.0.1:\([0-9]*\)$/\1/p' "$WORK/sim.out")
  PORT_FCM=$(sed -n 's/^fcm https:\/\/127.0.0.1:\([0-9]*\)$/\1/p' "$WORK/sim.out")
  # Lift FCM's default 10,000/s pacing: the benchmark measures the pipeline, not Google's quota.
  sed -i 's/^fcm:$/fcm:\n  rate: { per_second: 1000000 }/' "$WORK/sim/providers.yaml"
  filter="AND d.platform <> 'ios'"; [ "$mode" = mixed ] && filter=""
  cat > "$WORK/$mode-campaign.yaml" <<YAML
name: bench-$mode
notification_type: bench
dedupe: none
segment:
  page_size: 5000
  sql: |
    $SQL $filter AND d.id <= $((2 * n))
message:
  default_locale: en
  locales:
    en: { title: "Benchmark", body: "Hello from the benchmark" }
    de: { title: "Benchmark", body: "Hallo vom Benchmark" }
  data: { deeplink: "app://bench" }
  apns: { push_type: alert, priority: 10, collapse_id: bench }
  android: { channel_id: bench, priority: high, ttl: 3600s }
delivery: { in_flight_window: 2000 }
YAML
  rates=(); bcpu=(); pcpu=(); scpu=(); rss=()
  for r in $(seq "$runs"); do
    p0=$(postgres_cpu); s0=$(cpu_of $SIMPID)
    /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "$BIN" run "$WORK/$mode-campaign.yaml" --providers "$WORK/sim/providers.yaml" --csv "$WORK/report.csv" --quiet > "$WORK/run.out"
    p1=$(postgres_cpu); s1=$(cpu_of $SIMPID)
    [ -n "${BENCH_KEEP:-}" ] && cp "$WORK/run.out" "$BENCH_KEEP.run$r.out"
    read -r secs user sys kb < "$WORK/time"
    sent=$(grep -c ',sent,' "$WORK/report.csv" || true)
    rates+=("$(awk -v n="$sent" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')")
    bcpu+=("$(awk -v u="$user" -v s="$sys" -v n="$sent" 'BEGIN {printf "%.3f", (u + s) * 10000 / n}')")
    pcpu+=("$(awk -v a="$p0" -v b="$p1" -v n="$sent" 'BEGIN {printf "%.3f", (b - a) * 10000 / n}')")
    scpu+=("$(awk -v a="$s0" -v b="$s1" -v n="$sent" 'BEGIN {printf "%.3f", (b - a) * 10000 / n}')")
    rss+=("$(awk -v k="$kb" 'BEGIN {printf "%.1f", k / 1024}')")
  done
  printf '{"message":{"token":"live-bench-%s:APA91b","notification":{"title":"Benchmark","body":"Hello from the benchmark"},"data":{"deeplink":"app://bench"},"android":{"priority":"high","ttl":"3600s"}}}' 0 > "$WORK/fcm.json"
  ACCESS=$("$SIM" fcm-token "$WORK/sim")
  s0=$(cpu_of $SIMPID)
  h2=$(h2load -n "$n" -c 2 -m 100 -H "authorization: Bearer $ACCESS" -H "content-type: application/json" \
        -d "$WORK/fcm.json" "https://127.0.0.1:$PORT_FCM/v1/projects/bugle-sim/messages:send" 2>&1)
  s1=$(cpu_of $SIMPID)
  h2rate=$(echo "$h2" | sed -n 's/.*finished in [0-9.]*[a-z]*, \([0-9.]*\) req\/s.*/\1/p')
  h2ok=$(echo "$h2" | sed -n 's/.*status codes: \([0-9]*\) 2xx.*/\1/p')
  h2cpu=$(awk -v a="$s0" -v b="$s1" -v n="${h2ok:-0}" 'BEGIN {if (n > 0) printf "%.3f", (b - a) * 10000 / n; else print "?"}')
  apnsline=""
  if [ "$mode" = mixed ]; then
    JWT=$("$SIM" jwt "$WORK/sim")
    printf '{"aps":{"alert":{"title":"Benchmark","body":"Hello from the benchmark"}},"deeplink":"app://bench"}' > "$WORK/payload.json"
    h2a=$(h2load -n "$n" -c 4 -m 250 -H "authorization: bearer $JWT" -H "apns-topic: com.example.bugle" \
          -H "apns-push-type: alert" -H "apns-priority: 10" -d "$WORK/payload.json" \
          "https://127.0.0.1:$PORT_APNS/3/device/0a0b0c0d$(printf '%056d' 1)" 2>&1)
    apnsline=$(echo "$h2a" | sed -n 's/.*finished in [0-9.]*[a-z]*, \([0-9.]*\) req\/s.*/\1/p')
  fi
  kill $SIMPID 2>/dev/null || true
  med() { printf '%s\n' "$@" | median; }
  rate=$(med "${rates[@]}")
  printf '%-28s %s\n' "mode" "$mode ($runs runs, medians)"
  printf '%-28s %s\n' "Bugle end-to-end notif/s" "$rate"
  printf '%-28s %s\n' "h2load FCM req/s (same sim)" "${h2rate:-?} (${h2ok:-?} x 2xx of $n)"
  [ -n "$apnsline" ] && printf '%-28s %s\n' "h2load APNs req/s (same sim)" "$apnsline"
  printf '%-28s %s\n' "ratio to FCM ceiling" "$(awk -v a="$rate" -v b="${h2rate:-0}" 'BEGIN {if (b > 0) printf "%.0f%%", 100 * a / b; else print "?"}')"
  printf '%-28s %s\n' "Bugle CPU s / 10k" "$(med "${bcpu[@]}")"
  printf '%-28s %s\n' "PostgreSQL CPU s / 10k" "$(med "${pcpu[@]}")"
  printf '%-28s %s\n' "simulator CPU s / 10k" "$(med "${scpu[@]}") (h2load FCM: $h2cpu)"
  printf '%-28s %s\n' "Bugle peak RSS MB" "$(med "${rss[@]}")"
  exit 0
fi

if [ "$mode" = apns ]; then
  n=${devices%%,*}
  [ -x "$SIM" ] || { swift build -c release --product bugle-sim >&2; SIM="$ROOT/.build/release/bugle-sim"; }
  command -v h2load >/dev/null || { echo "h2load missing: apt-get install -y nghttp2-client" >&2; exit 1; }
  "$BIN" demo --seed-only --devices $((2 * n)) >/dev/null
  "$SIM" certs "$WORK/sim" --port 0 >/dev/null
  "$SIM" serve --dir "$WORK/sim" --apns-port 0 > "$WORK/sim.out" 2>&1 &
  SIMPID=$!
  for _ in $(seq 100); do grep -q "^apns " "$WORK/sim.out" && break; sleep 0.1; done
  PORT_SIM=$(sed -n 's/^apns https:\/\/127.0.0.1:\([0-9]*\)$/\1/p' "$WORK/sim.out")
  cat > "$WORK/apns-campaign.yaml" <<YAML
name: bench-apns
notification_type: bench
dedupe: none
segment:
  page_size: 5000
  sql: |
    $SQL AND d.platform = 'ios' AND d.id <= $((2 * n))
message:
  default_locale: en
  locales:
    en: { title: "Benchmark", body: "Hello from the benchmark" }
    de: { title: "Benchmark", body: "Hallo vom Benchmark" }
  data: { deeplink: "app://bench" }
  apns: { push_type: alert, priority: 10, collapse_id: bench }
delivery: { in_flight_window: 2000 }
YAML
  rates=(); bcpu=(); pcpu=(); scpu=(); rss=()
  for r in $(seq "$runs"); do
    p0=$(postgres_cpu); s0=$(cpu_of $SIMPID)
    /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "$BIN" run "$WORK/apns-campaign.yaml" --providers "$WORK/sim/providers.yaml" --csv "$WORK/report.csv" > "$WORK/run.out"
    p1=$(postgres_cpu); s1=$(cpu_of $SIMPID)
    [ -n "${BENCH_KEEP:-}" ] && cp "$WORK/run.out" "$BENCH_KEEP.run$r.out"
    read -r secs user sys kb < "$WORK/time"
    sent=$(grep -c ',sent,' "$WORK/report.csv" || true)
    rates+=("$(awk -v n="$sent" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')")
    bcpu+=("$(awk -v u="$user" -v s="$sys" -v n="$sent" 'BEGIN {printf "%.3f", (u + s) * 10000 / n}')")
    pcpu+=("$(awk -v a="$p0" -v b="$p1" -v n="$sent" 'BEGIN {printf "%.3f", (b - a) * 10000 / n}')")
    scpu+=("$(awk -v a="$s0" -v b="$s1" -v n="$sent" 'BEGIN {printf "%.3f", (b - a) * 10000 / n}')")
    rss+=("$(awk -v k="$kb" 'BEGIN {printf "%.1f", k / 1024}')")
  done
  JWT=$("$SIM" jwt "$WORK/sim")
  printf '{"aps":{"alert":{"title":"Benchmark","body":"Hello from the benchmark"}},"deeplink":"app://bench"}' > "$WORK/payload.json"
  TOKEN=0a0b0c0d$(printf '%056d' 1)
  s0=$(cpu_of $SIMPID)
  h2=$(h2load -n "$n" -c 4 -m 250 -H "authorization: bearer $JWT" -H "apns-topic: com.example.bugle" \
        -H "apns-push-type: alert" -H "apns-priority: 10" -d "$WORK/payload.json" \
        "https://127.0.0.1:$PORT_SIM/3/device/$TOKEN" 2>&1)
  s1=$(cpu_of $SIMPID)
  h2rate=$(echo "$h2" | sed -n 's/.*finished in [0-9.]*[a-z]*, \([0-9.]*\) req\/s.*/\1/p')
  h2ok=$(echo "$h2" | sed -n 's/.*status codes: \([0-9]*\) 2xx.*/\1/p')
  kill $SIMPID 2>/dev/null || true
  med() { printf '%s\n' "$@" | median; }
  rate=$(med "${rates[@]}")
  printf '%-28s %s\n' "iOS notifications" "$n (per run; $runs runs, median)"
  printf '%-28s %s\n' "Bugle end-to-end notif/s" "$rate"
  printf '%-28s %s\n' "h2load req/s (same sim)" "${h2rate:-?} (${h2ok:-?} x 2xx of $n)"
  printf '%-28s %s\n' "ratio" "$(awk -v a="$rate" -v b="${h2rate:-0}" 'BEGIN {if (b > 0) printf "%.0f%%", 100 * a / b; else print "?"}')"
  printf '%-28s %s\n' "Bugle CPU s / 10k" "$(med "${bcpu[@]}")"
  printf '%-28s %s\n' "PostgreSQL CPU s / 10k" "$(med "${pcpu[@]}")"
  printf '%-28s %s\n' "simulator CPU s / 10k" "$(med "${scpu[@]}") (h2load: $(awk -v a="$s0" -v b="$s1" -v n="$n" 'BEGIN {printf "%.3f", (b - a) * 10000 / n}'))"
  printf '%-28s %s\n' "Bugle peak RSS MB" "$(med "${rss[@]}")"
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
