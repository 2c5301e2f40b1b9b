#!/usr/bin/env bash
# Runs every test: first everything in parallel, then each timing suite alone.
#
# Timing suites (see Tests/IntegrationTests/TimingPhase.swift) measure per-second rates at the simulators, or
# depend on the legacy gateway's quiet period. With the rest of the suite running beside them on a 2-core
# machine, debug builds of the simulators and of Bugle starve each other of CPU; alone they are exact.
set -euo pipefail
cd "$(dirname "$0")/.."
timing=(PacingIntegrationTests LegacyAPNsCampaignTests LegacyAPNsLaneTests FCMCampaignTests CrashRecoveryTests DeadlineTests)
swift build --build-tests
swift test --skip-build "$@"
for suite in "${timing[@]}"; do
  BUGLE_TIMING_TESTS=1 swift test --skip-build --filter "$suite" "$@"
done
