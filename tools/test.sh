#!/usr/bin/env bash
# Runs every test: first everything in parallel on a debug build, then each timing suite alone on an optimized
# build. Every phase runs even when an earlier one failed; the script fails at the end if any did.
#
# Timing suites (see Tests/IntegrationTests/TimingPhase.swift) measure per-second rates at the simulators, or
# depend on the legacy gateway's quiet period and on short-lived tokens. They run against an optimized build
# (`-c release`, with `-enable-testing` for the test bundle and `-DBUGLE_FAILPOINTS` for the crash suite's
# failpoints) in `.build-release`: in a debug build, swift-nio-http2's per-frame stream lookups alone cost
# milliseconds, so two debug simulators and a debug Bugle on 2 cores cannot carry 800 requests/s (measured:
# 109 CPU-seconds for the 16,000-request pacing test, against 9 in the optimized build).
set -euo pipefail
cd "$(dirname "$0")/.."
timing=(PacingIntegrationTests LegacyAPNsCampaignTests LegacyAPNsLaneTests FCMCampaignTests FCMMetadataServerTests CrashRecoveryTests FailoverTests DeadlineTests DatabaseFaultTests HTTP2KeepaliveTests)
optimized=(-c release --scratch-path .build-release -Xswiftc -enable-testing -Xswiftc -DBUGLE_FAILPOINTS)
failed=()
log_dir=$(mktemp -d)
# Every file the tests write under the temporary directory (campaign files, CSVs, certificates, simulator records,
# throwaway clusters) goes to one directory of this run's own, removed at the end: they would pile up in /tmp.
# Traversable by others: as root, the tests' PostgreSQL clusters run as `postgres`, which must reach their directories.
scratch=$(mktemp -d)
chmod 755 "$scratch"
trap 'rm -rf "$log_dir" "$scratch"' EXIT
export TMPDIR="$scratch"

# Runs one phase with its output also kept in a log, so the end of the script can name the failing tests
# (a CI log often shows only its last lines). A phase still running after `limit` seconds (several times its usual
# length) is a hung test process: its threads' stacks are printed (with gdb, when installed) and it is stopped, so the
# phase fails with a clue instead of holding CI until its own limit.
phase() {
  local name=$1 limit=$2; shift 2
  (
    # Stopped (TERM) when the phase ends in time: the sleep goes with it, and nothing below runs.
    trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
    sleep "$limit" &
    sleeper=$!
    wait "$sleeper"
    echo "tools/test.sh: $name still running after $limit s: a hung test process; its threads follow" >&2
    for pid in $(pgrep -f 'BuglePackageTests.xctest' || true); do
      if command -v gdb >/dev/null 2>&1; then
        gdb -p "$pid" -batch -ex 'thread apply all bt 30' 2>&1 | grep -E '^Thread|^#' | head -n 600 >&2 || true
      fi
      # Its children first (bugle processes a test started): orphaned, they would go on using the CPU the next
      # phases need.
      pkill -KILL -P "$pid" 2>/dev/null || true
      kill "$pid" 2>/dev/null || true
    done
  ) &
  local watchdog=$!
  local status=0
  # Line-buffered (stdbuf, when installed): into a pipe the test process's output is block-buffered, and a phase stopped
  # by the watchdog lost its last lines, which would name the tests still running.
  local unbuffered=()
  if command -v stdbuf >/dev/null 2>&1; then unbuffered=(stdbuf -oL -eL); fi
  "${unbuffered[@]}" "$@" 2>&1 | tee "$log_dir/$name.log" || status=${PIPESTATUS[0]}
  kill "$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || true
  return "$status"
}

# At most 12 tests at a time: unbounded, every test starts at once (each with its own database, many with simulators)
# and on a slow 2-core machine tests with a lease or deadline of their own starved past it (README, "Tests").
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-12}"

swift build --build-tests
phase parallel 1800 swift test --skip-build "$@" || failed+=("parallel phase")

swift build "${optimized[@]}" --build-tests
for suite in "${timing[@]}"; do
  BUGLE_TIMING_TESTS=1 phase "$suite" 900 swift test "${optimized[@]}" --skip-build --filter "$suite" "$@" || failed+=("$suite")
done

if ((${#failed[@]})); then
  echo "tools/test.sh: failing tests and their recorded issues:" >&2
  grep -h -E '✘|: error: |recorded an issue' "$log_dir"/*.log | head -n 60 >&2 || true
  echo "tools/test.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "tools/test.sh: every phase passed"
