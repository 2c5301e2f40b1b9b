import BugleCore
import Synchronization

/// Requests from outside the send loop — a graceful stop (Ctrl-C, SIGTERM) or a lost lease — and when the lease
/// was last renewed, so a send can refuse to go out on a lease that may have expired.
///
/// Shared between the signal handler, the heartbeat and the send loop; the state lives in `Mutex`es.
public final class RunControl: Sendable {
    /// Why the loop must stop claiming.
    public enum StopRequest: Sendable, Equatable {
        /// The operator asked to stop: drain in-flight answers, record them, end paused.
        case interrupted(String)
        /// The lease could not be renewed in time or was taken over: stop opening requests. Carries the run's
        /// status when the run ended elsewhere (`completed` by another worker, `paused` by a halt).
        case leaseLost(RunStatus?)
    }

    private let state = Mutex<StopRequest?>(nil)
    private let wake = Mutex<(@Sendable () -> Void)?>(nil)
    private let renewedAt = Mutex<ContinuousClock.Instant>(ContinuousClock.now)

    public init() {}

    /// Notes a successful lease renewal (or acquisition).
    public func leaseRenewed() {
        renewedAt.withLock { $0 = ContinuousClock.now }
    }

    /// Seconds since the lease was last known to be held; a worker stops opening requests past half the TTL.
    public var secondsSinceRenewal: Double {
        let (seconds, attoseconds) = (ContinuousClock.now - renewedAt.withLock { $0 }).components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Asks the loop to stop claiming; the first request wins, and wakes the loop (``onStopRequest(_:)``).
    public func requestStop(_ request: StopRequest) {
        let first = state.withLock { current -> Bool in
            guard current == nil else { return false }
            current = request
            return true
        }
        if first, let wake = wake.withLock({ $0 }) { wake() }
    }

    /// Sets what wakes the send loop when a stop is requested (called at once when one is pending already), or
    /// clears it (nil), so that a loop waiting for slow answers stops without waiting for the next of them.
    public func onStopRequest(_ body: (@Sendable () -> Void)?) {
        wake.withLock { $0 = body }
        if let body, stopRequest != nil { body() }
    }

    /// The pending stop request, if any.
    public var stopRequest: StopRequest? { state.withLock { $0 } }
}
