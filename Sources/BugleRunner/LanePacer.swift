import BugleCore
import Synchronization

/// Paces one provider lane: a concurrency limit, a token bucket at the rate the ``RateController`` allows,
/// and the lane pause (``LanePause``). Shared by every send of the lane; never blocks a thread.
///
/// - ``acquire()`` waits for a concurrency slot, then for the lane to be open, then for a token; it gives up, with
///   nothing taken, once ``withdrawWaiting()`` was called (the run is stopping), until ``reopen()``.
/// - ``release(after:)`` feeds the answer back: throttling storms lower the rate (AIMD), calm windows raise
///   it, a `Retry-After` or a storm closes the lane for `max(Retry-After, backoff)`, and a delivery resets the
///   backoff.
///
/// A provider-level answer (5xx, FCM `QUOTA_EXCEEDED`) is the provider's when it closes the lane (a `Retry-After`, or
/// a storm the ``RateController`` sees: three in a window and 5% of its answers) or comes while the lane is closed:
/// then the recipient keeps its attempt (RELIABILITY.md §3.5). One that comes otherwise, sporadic on an open lane, is
/// handed on as the recipient's (`.retry(.recipient, …)`): it spends an attempt, backs off per recipient with a growing
/// full-jitter delay, and ends `attempts_exhausted` at the campaign's `max_attempts` (RELIABILITY.md #21). Before, a
/// token the provider answered 500 for every time was retried for ever, charged nothing, and the run never ended.
/// Unpaced lanes watch for storms the same way; they only have no rate to lower. A lane answered by nothing but
/// provider errors for long halts the run (``ProviderOutageBreaker``).
public final class LanePacer: Sendable {
    /// Limits of one lane.
    public struct Limits: Sendable, Equatable {
        /// Requests per second (nil: unpaced).
        public var perSecond: Double?
        /// Token-bucket capacity.
        public var burst: Int
        /// Requests in flight at once.
        public var concurrency: Int

        /// Creates limits.
        public init(perSecond: Double?, burst: Int? = nil, concurrency: Int) {
            self.perSecond = perSecond
            // 2% of a second's worth: any one-second window stays within 2% of the rate.
            self.burst = burst ?? max(1, Int(((perSecond ?? 1) / 50).rounded(.up)))
            self.concurrency = max(1, concurrency)
        }
    }

    /// A snapshot for progress and metrics.
    public struct Snapshot: Sendable, Equatable {
        /// The rate in force (nil: unpaced).
        public var rate: Double?
        /// Requests holding a slot.
        public var inFlight: Int
        /// Seconds until the lane reopens (0: open).
        public var pausedFor: Double
    }

    private struct Waiter {
        /// Resumed with true when handed a slot, false when withdrawn.
        var continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var bucket: TokenBucket?
        /// Storm detection on every lane; its rate paces only a lane with a bucket.
        var controller: RateController
        var pause: LanePause
        var inFlight = 0
        var waiters: [Waiter] = []
        var random = SystemRandomNumberGenerator()
        /// Live workers of the run; this worker paces at the lane's rate divided by it.
        var share = 1
        /// Set by ``withdrawWaiting()``: nothing more is handed out until ``reopen()``.
        var withdrawn = false
    }

    /// The longest a waiting send sleeps before it looks again whether it was withdrawn: how long a stop may take to
    /// reach a send waiting seconds for its token (at 5 requests a second, a window of 1,000 waits up to 200 s).
    static let withdrawalCheck = 0.25

    private let limits: Limits
    private let state: Mutex<State>
    private let origin = ContinuousClock.now

    /// Creates a pacer.
    /// - Parameters:
    ///   - limits: Rate, burst and concurrency.
    ///   - pauseBackoff: Backoff of the lane pause.
    ///   - stormWindow: Seconds of answers a storm is counted over (``RateController/window``; tests that must not
    ///     depend on how fast a loaded machine runs them widen it).
    public init(limits: Limits, pauseBackoff: Backoff = Backoff(base: .milliseconds(250), cap: .seconds(60)), stormWindow: Double = 1.0) {
        self.limits = limits
        let bucket = limits.perSecond.map { TokenBucket(rate: $0, burst: limits.burst, now: 0) }
        // An unpaced lane's controller only tells storms apart: its nominal rate is never applied.
        var controller = RateController(ceiling: limits.perSecond ?? Self.unpacedNominalRate)
        controller.window = stormWindow
        self.state = Mutex(State(bucket: bucket, controller: controller, pause: LanePause(backoff: pauseBackoff)))
    }

    /// The ceiling an unpaced lane's ``RateController`` counts from (never used as a rate).
    static let unpacedNominalRate = 1_000_000.0

    private var now: Double {
        let (seconds, attoseconds) = (ContinuousClock.now - origin).components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Waits until this lane may send one request; call ``release(after:)`` with its outcome afterwards.
    /// - Returns: false, with no slot or token held, when the wait was withdrawn (``withdrawWaiting()``): the request
    ///   must not be sent.
    public func acquire() async -> Bool {
        guard await takeSlot() else { return false }
        while true {
            let (paused, tokenWait) = state.withLock { state -> (Double, Double) in
                if state.withdrawn { return (0, -1) }
                let now = self.now
                let paused = state.pause.wait(now: now)
                if paused > 0 { return (paused, 0) }
                return (0, state.bucket?.reserve(now: now) ?? 0)
            }
            if tokenWait < 0 { return giveUp(refundingToken: false) }
            if paused > 0 {
                await Self.nap(paused)
                continue
            }
            guard tokenWait > 0 else { return true }
            // The token is reserved: sleep until it exists, looking now and then whether the wait was withdrawn.
            let due = ContinuousClock.now + .microseconds(Int64((tokenWait * 1e6).rounded(.up)))
            while true {
                let left = due - ContinuousClock.now
                guard left > .zero else { break }
                try? await Task.sleep(for: min(left, .milliseconds(Int64(Self.withdrawalCheck * 1000))))
                if Task.isCancelled { break }
                if ContinuousClock.now < due, state.withLock({ $0.withdrawn }) { return giveUp(refundingToken: true) }
            }
            // The token is ours: go, unless the wait was withdrawn or the lane closed meanwhile (then hand it back and
            // wait again).
            let verdict = state.withLock { state -> Bool? in
                let now = self.now
                if state.withdrawn {
                    state.bucket?.refund(now: now)
                    return nil
                }
                guard state.pause.wait(now: now) > 0 else { return true }
                state.bucket?.refund(now: now)
                return false
            }
            guard let go = verdict else { return giveUp(refundingToken: false) }
            if go { return true }
        }
    }

    /// Sleeps `seconds`, at most ``withdrawalCheck``.
    private static func nap(_ seconds: Double) async {
        try? await Task.sleep(for: .microseconds(Int64((min(seconds, withdrawalCheck) * 1e6).rounded(.up))))
    }

    /// Ends a withdrawn ``acquire()``: frees its slot (and hands back its reserved token).
    private func giveUp(refundingToken: Bool) -> Bool {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            if refundingToken { state.bucket?.refund(now: self.now) }
            return Self.freeSlot(&state)
        }
        // freeSlot hands the slot to the oldest waiter, if any (one that came after a ``reopen()``): it is granted.
        next?.resume(returning: true)
        return false
    }

    /// Withdraws every send waiting for this lane: each ``acquire()`` waiting for a slot, the lane to reopen or a token
    /// returns false within ``withdrawalCheck``, and so does every later one, until ``reopen()``. Sends already let
    /// through are not touched. For a run that is stopping (an operator's pause, cancel or Ctrl-C, a lost lease, a
    /// halt): a recipient claimed but not yet sent goes back unsent instead of going out after the stop.
    public func withdrawWaiting() {
        let waiting = state.withLock { state -> [Waiter] in
            state.withdrawn = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiting { waiter.continuation.resume(returning: false) }
    }

    /// Hands out slots and tokens again after ``withdrawWaiting()`` (a new run, or the same run going on).
    public func reopen() {
        state.withLock { $0.withdrawn = false }
    }

    /// Takes a slot and a token without waiting: only when the lane is open, nobody waits for a slot, a slot is free
    /// and a whole token is there. Follow with ``release(after:)``, or ``cancelAcquire()`` if nothing was sent.
    /// - Returns: true when both were taken.
    public func tryAcquire() -> Bool {
        state.withLock { state in
            guard !state.withdrawn, state.waiters.isEmpty, state.inFlight < limits.concurrency else { return false }
            let now = self.now
            guard state.pause.wait(now: now) <= 0 else { return false }
            if state.bucket != nil, state.bucket?.take(now: now) != true { return false }
            state.inFlight += 1
            return true
        }
    }

    /// Gives back what ``tryAcquire()`` took, for a request that was not sent.
    public func cancelAcquire() {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            state.bucket?.refund(now: self.now)
            return Self.freeSlot(&state)
        }
        next?.resume(returning: true)
    }

    /// Returns the slot and learns from the answer.
    /// - Parameter outcome: What the provider said.
    /// - Returns: The outcome, with a provider-level retry delayed at least until the lane reopens.
    @discardableResult
    public func release(after outcome: SendOutcome) -> SendOutcome {
        let (next, result) = state.withLock { state -> (CheckedContinuation<Bool, Never>?, SendOutcome) in
            let now = self.now
            var result = outcome
            let throttled = Self.isThrottling(outcome)
            let change = state.controller.record(throttled: throttled, now: now)
            if change != .none { state.bucket?.setRate(state.controller.rate / Double(state.share), now: now) }
            switch outcome {
            case .delivered:
                state.pause.succeeded()
            case .retry(let scope, let code, let after):
                let paused = state.pause.wait(now: now) > 0
                if after != nil || change == .decreased {
                    let until = state.pause.failed(now: now, retryAfter: after, using: &state.random)
                    if scope == .provider {
                        result = .retry(scope, code: code, after: .milliseconds(Int64(max(0, until - now) * 1000)))
                    }
                } else if scope == .provider && !paused {
                    // Sporadic on an open lane: the recipient's (see the type's notes), and no part of a storm, so the
                    // lane's pause backoff starts over as after a delivery. Otherwise recipients refused every time, once
                    // nothing else is left to send, make storm after storm and the lane's pauses grow to a minute each.
                    result = .retry(.recipient, code: code, after: nil)
                    state.pause.succeeded()
                }
            default:
                break
            }
            return (Self.freeSlot(&state), result)
        }
        next?.resume(returning: true)
        return result
    }

    /// False while paused, while every slot is taken, or while more than half a second of requests waits for
    /// the rate: the runner then claims for other lanes.
    public var isAcceptingWork: Bool {
        state.withLock { state in
            let now = self.now
            if state.pause.wait(now: now) > 0 || state.inFlight >= limits.concurrency { return false }
            return (state.bucket?.backlog(now: now) ?? 0) < 0.5
        }
    }

    /// How many requests a claim may hold for this lane, waiting ones included: a second of the rate in force (this
    /// worker's share) plus the burst; nil when unpaced (``PushProvider/claimCapacity``).
    public var claimCapacity: Int? {
        state.withLock { state in
            guard let bucket = state.bucket else { return nil }
            return Int((state.controller.rate / Double(state.share) * Self.claimHorizon).rounded(.up)) + Int(bucket.burst)
        }
    }

    /// Seconds of sending a paced lane may hold claimed.
    static let claimHorizon = 1.0

    /// The current rate (this worker's share of it), slots in use and pause.
    public var snapshot: Snapshot {
        state.withLock { state in
            Snapshot(
                rate: state.bucket == nil ? nil : state.controller.rate / Double(state.share), inFlight: state.inFlight,
                pausedFor: state.pause.wait(now: now)
            )
        }
    }

    /// Splits the lane's rate between the run's live workers: with `workers` of them, this one paces at 1/`workers`
    /// of the rate, so the providers file's limit holds for the run as a whole.
    /// - Parameter workers: Live workers on the run, this one included.
    public func setWorkerShare(_ workers: Int) {
        state.withLock { state in
            let share = max(1, workers)
            guard share != state.share else { return }
            state.share = share
            state.bucket?.setRate(state.controller.rate / Double(share), now: now)
        }
    }

    /// Takes a concurrency slot, waiting for one if need be. - Returns: false when withdrawn (no slot taken).
    private func takeSlot() async -> Bool {
        // Usually a slot is free: take it without suspending (a continuation per send), unless others wait first.
        let free = state.withLock { state -> Bool? in
            if state.withdrawn { return false }
            guard state.waiters.isEmpty, state.inFlight < limits.concurrency else { return nil }
            state.inFlight += 1
            return true
        }
        if let free { return free }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let granted = state.withLock { state -> Bool? in
                if state.withdrawn { return false }
                if state.inFlight < limits.concurrency {
                    state.inFlight += 1
                    return true
                }
                state.waiters.append(Waiter(continuation: continuation))
                return nil
            }
            if let granted { continuation.resume(returning: granted) }
        }
    }

    /// Frees a slot: hands it to the oldest waiting send (returned, to resume outside the lock), or marks it free.
    private static func freeSlot(_ state: inout State) -> CheckedContinuation<Bool, Never>? {
        if state.waiters.isEmpty {
            state.inFlight -= 1
            return nil
        }
        return state.waiters.removeFirst().continuation
    }

    /// Provider-level 429/5xx answers. APNs' 429 `TooManyRequests` is not one: it names one device token that got too
    /// many notifications too fast, so only that recipient backs off; slowing or pausing the lane would not help it
    /// and would cost every other recipient (RELIABILITY.md #24).
    private static func isThrottling(_ outcome: SendOutcome) -> Bool {
        if case .retry(.provider, _, _) = outcome { return true }
        return false
    }
}
