import Foundation
import Testing

/// Suites whose assertions depend on wall-clock timing (per-second rates, the legacy gateway's quiet period)
/// run only in the solitary second phase of `tools/test.sh` (`BUGLE_TIMING_TESTS=1`): on a 2-core machine the
/// rest of the suite, running in parallel with debug builds of every simulator, starves them of CPU.
enum TimingPhase {
    static var isActive: Bool { ProcessInfo.processInfo.environment["BUGLE_TIMING_TESTS"] == "1" }
    static let reason: Comment = "timing suite: tools/test.sh runs it alone (BUGLE_TIMING_TESTS=1)"
}
