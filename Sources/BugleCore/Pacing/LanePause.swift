/// When a provider lane may send again after provider-wide trouble (FCM `QUOTA_EXCEEDED`, `UNAVAILABLE`,
/// `INTERNAL`; RELIABILITY.md §3.5): a failure pauses the whole lane for `max(Retry-After, full-jitter
/// backoff)`. The backoff grows with consecutive pause *episodes* — failures that arrive while a pause is in
/// force answer requests sent before it and only extend it to their own `Retry-After` — and a healthy answer
/// resets it. Pure: time is a number of seconds on a monotonic timeline, randomness is injected.
public struct LanePause: Sendable, Equatable {
    /// The backoff curve (attempt = consecutive failures).
    public var backoff: Backoff
    /// Monotonic seconds before which the lane must not send; nil when open.
    public private(set) var resumeAt: Double?
    /// Provider-wide failures since the last healthy answer.
    public private(set) var consecutiveFailures = 0

    /// Creates an open lane.
    /// - Parameter backoff: Backoff curve (default: 1 s doubling, capped at 60 s).
    public init(backoff: Backoff = Backoff(base: .seconds(1), cap: .seconds(60))) {
        self.backoff = backoff
    }

    /// Records a provider-wide failure and extends the pause.
    /// - Parameters:
    ///   - now: Monotonic seconds.
    ///   - retryAfter: The provider's `Retry-After`, if any.
    ///   - random: Jitter source.
    /// - Returns: The monotonic second the lane reopens.
    @discardableResult
    public mutating func failed(now: Double, retryAfter: Duration?, using random: inout some RandomNumberGenerator) -> Double {
        let inPause = (resumeAt ?? -Double.infinity) > now
        if !inPause { consecutiveFailures += 1 }
        let delay = inPause
            ? (retryAfter ?? .zero)
            : backoff.delay(attempt: consecutiveFailures, retryAfter: retryAfter, using: &random)
        let (seconds, attoseconds) = delay.components
        let until = now + Double(seconds) + Double(attoseconds) / 1e18
        resumeAt = max(resumeAt ?? until, until)
        return resumeAt ?? until
    }

    /// Records a healthy answer: the backoff starts over (a pause already in force stays).
    public mutating func succeeded() {
        consecutiveFailures = 0
    }

    /// Seconds to wait before sending at `now` (0 when open).
    /// - Parameter now: Monotonic seconds.
    public func wait(now: Double) -> Double {
        guard let resumeAt, resumeAt > now else { return 0 }
        return resumeAt - now
    }
}
