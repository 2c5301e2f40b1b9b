import Synchronization

/// Requests from outside the send loop: a graceful stop (Ctrl-C, SIGTERM) or a lost lease.
///
/// Shared between the signal handler, the heartbeat and the send loop; the state lives in a `Mutex`.
public final class RunControl: Sendable {
    /// Why the loop must stop claiming.
    public enum StopRequest: Sendable, Equatable {
        /// The operator asked to stop: drain in-flight answers, record them, end paused.
        case interrupted(String)
        /// The lease could not be renewed in time or was taken over: stop opening requests.
        case leaseLost
    }

    private let state = Mutex<StopRequest?>(nil)

    public init() {}

    /// Asks the loop to stop claiming; the first request wins.
    public func requestStop(_ request: StopRequest) {
        state.withLock { current in
            if current == nil { current = request }
        }
    }

    /// The pending stop request, if any.
    public var stopRequest: StopRequest? { state.withLock { $0 } }
}
