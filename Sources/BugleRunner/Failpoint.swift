import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Deterministic crash points for the crash-recovery tests (RELIABILITY.md §2.1 #2), compiled into debug builds
/// and into the optimized test build of `tools/test.sh` (`-DBUGLE_FAILPOINTS`) only: a release build ignores
/// `BUGLE_FAILPOINT`.
///
/// `BUGLE_FAILPOINT=NAME[:N]` kills the process with SIGKILL at the N-th (default first) time the runner passes
/// the named point, once the run has reached a state where exactly one thing is unrecorded:
/// - `crash_after_claim`: the N-th claim has committed; its recipients are never sent. Everything else in flight
///   is answered and recorded first, so the crash leaves exactly that claim `in_flight`.
/// - `crash_after_send_before_record`: the N-th answer has arrived; claiming stops, the other requests are
///   answered, and the process dies before their outcomes are written, leaving every answered recipient `in_flight`.
/// - `crash_after_record`: the N-th group commit has committed; claiming stops, everything in flight is answered
///   and recorded, and the process dies with nothing in flight.
/// - `crash_in_materialize`: the N-th page of the segment has been written to the ledger.
///
/// Before dying it writes one line to stderr, `bugle: failpoint NAME: …`, with the counts a test needs.
public struct Failpoint: Sendable, Equatable {
    public enum Point: String, Sendable, CaseIterable {
        case afterClaim = "crash_after_claim"
        case afterResponse = "crash_after_send_before_record"
        case afterRecord = "crash_after_record"
        case inMaterialize = "crash_in_materialize"
    }

    /// The armed point, or nil.
    public let point: Point?
    /// Which occurrence of the point crashes (1 = the first).
    public let occurrence: Int

    public init(point: Point?, occurrence: Int = 1) {
        self.point = point
        self.occurrence = max(1, occurrence)
    }

    /// No failpoint.
    public static let none = Failpoint(point: nil)

    /// The failpoint `BUGLE_FAILPOINT` names in a debug (or failpoint) build; `.none` in a release build or when unset.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Failpoint {
        #if DEBUG || BUGLE_FAILPOINTS
        return parse(environment["BUGLE_FAILPOINT"])
        #else
        return .none
        #endif
    }

    /// Parses `NAME[:N]`; anything unknown is `.none`.
    public static func parse(_ text: String?) -> Failpoint {
        guard let text, !text.isEmpty else { return .none }
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        guard let point = Point(rawValue: parts[0]) else { return .none }
        let occurrence = parts.count > 1 ? Int(parts[1]) ?? 1 : 1
        return Failpoint(point: point, occurrence: occurrence)
    }

    /// True when `count` passes of `point` reach the armed occurrence.
    public func fires(_ point: Point, count: Int) -> Bool {
        self.point == point && count == occurrence
    }

    /// Writes the failpoint line and kills the process as `kill -9` would.
    public func crash(_ detail: String) -> Never {
        FileHandle.standardError.write(Data("bugle: failpoint \(point?.rawValue ?? "?"): \(detail)\n".utf8))
        kill(getpid(), SIGKILL)
        // SIGKILL cannot be caught; this line is never reached.
        _exit(137)
    }
}
