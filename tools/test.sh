#!/usr/bin/env bash
# Runs every test: first everything in parallel, then the timing suites alone.
#
# The timing suites (Pacing*) measure per-second rates from the simulators' records; with the rest of the
# suite running beside them on a 2-core machine, debug builds of both simulators and Bugle starve each other of
# CPU and the simulators see bursts that Bugle never sent. They run in a second phase, alone.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests
swift test --skip-build --skip PacingIntegrationTests "$@"
BUGLE_TIMING_TESTS=1 swift test --skip-build --filter PacingIntegrationTests "$@"
