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
timing=(PacingIntegrationTests LegacyAPNsCampaignTests LegacyAPNsLaneTests FCMCampaignTests FCMMetadataServerTests CrashRecoveryTests DeadlineTests DatabaseFaultTests HTTP2KeepaliveTests)
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
# (a CI log often shows only its last lines).
phase() {
  local name=$1; shift
  "$@" 2>&1 | tee "$log_dir/$name.log"
  return "${PIPESTATUS[0]}"
}

swift build --build-tests
phase parallel swift test --skip-build "$@" || failed+=("parallel phase")

swift build "${optimized[@]}" --build-tests
for suite in "${timing[@]}"; do
  BUGLE_TIMING_TESTS=1 phase "$suite" swift test "${optimized[@]}" --skip-build --filter "$suite" "$@" || failed+=("$suite")
done

if ((${#failed[@]})); then
  echo "tools/test.sh: failing tests and their recorded issues:" >&2
  grep -h -E '✘|: error: |recorded an issue' "$log_dir"/*.log | head -n 60 >&2 || true
  echo "tools/test.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "tools/test.sh: every phase passed"
