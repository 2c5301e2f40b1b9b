import BugleCore
import Synchronization

/// Live counts of one run as this process sees it, for the progress display: per platform, how many
/// recipients were sent, failed, deactivated, are waiting to retry, or ended unknown, and how many were left
/// when the run started here. Written by the runner, read by the display; safe from any thread.
public final class RunProgressBoard: Sendable {
    /// Counts of one platform.
    public struct Counts: Sendable, Equatable {
        public var sent: Int64 = 0
        public var failed: Int64 = 0
        public var deactivated: Int64 = 0
        /// Answers that put a recipient back to wait (not terminal), counted as they come: a recipient retried and
        /// then sent is counted here and in ``sent``.
        public var retries: Int64 = 0
        /// Ambiguous deliveries recorded as unknown.
        public var unknown: Int64 = 0
        /// Recipients skipped when they were to be sent (quiet hours under `skip`).
        public var skipped: Int64 = 0

        /// Recipients finished (sent, failed, deactivated, unknown, skipped).
        public var finished: Int64 { sent + failed + deactivated + unknown + skipped }
    }

    /// A consistent copy of the board.
    public struct Snapshot: Sendable, Equatable {
        /// Recipients not yet finished when this process started the run (nil until known).
        public var remainingAtStart: Int64?
        /// Counts per platform.
        public var platforms: [Platform: Counts]
        /// UNIX seconds at which the next recipients are due, while nothing is (local-time windows, `send_at`,
        /// quiet hours, long backoffs); nil while sending.
        public var waitingUntil: Double?
        /// Live workers on the run (this one included), as the last lease renewal counted them: with more than one,
        /// the counts are this worker's share.
        public var workers = 1

        /// Recipients finished since the start, all platforms.
        public var finished: Int64 { platforms.values.reduce(0) { $0 + $1.finished } }
    }

    private let state = Mutex(Snapshot(remainingAtStart: nil, platforms: [:], waitingUntil: nil))

    /// Creates an empty board.
    public init() {}

    /// Sets how many recipients were left when sending started.
    /// - Parameter remaining: Pending, in flight and waiting recipients.
    public func start(remaining: Int64) {
        state.withLock { $0.remainingAtStart = remaining }
    }

    /// Sets how many workers are live on the run.
    public func setWorkers(_ count: Int) {
        state.withLock { snapshot in
            if snapshot.workers != count { snapshot.workers = count }
        }
    }

    /// Notes that nothing is due until `instant` (UNIX seconds), or that recipients are due again (nil).
    public func waiting(until instant: Double?) {
        state.withLock { snapshot in
            if snapshot.waitingUntil != instant { snapshot.waitingUntil = instant }
        }
    }

    /// Counts one recorded outcome.
    /// - Parameters:
    ///   - state: The ledger state written.
    ///   - platform: The recipient's platform.
    public func record(_ recipientState: RecipientState, platform: Platform) {
        state.withLock { snapshot in
            var counts = snapshot.platforms[platform] ?? Counts()
            switch recipientState {
            case .sent: counts.sent += 1
            case .invalidToken: counts.deactivated += 1
            case .failedPermanent: counts.failed += 1
            case .retryWait, .pending: counts.retries += 1
            case .unknown: counts.unknown += 1
            case .skippedQuietHours: counts.skipped += 1
            default: break
            }
            snapshot.platforms[platform] = counts
        }
    }

    /// The current counts.
    public var snapshot: Snapshot { state.withLock { $0 } }
}
