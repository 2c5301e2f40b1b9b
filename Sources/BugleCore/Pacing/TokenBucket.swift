/// A token bucket that hands out reservations: each ``reserve(now:)`` takes one token and says how long to wait
/// until that token exists. Many concurrent senders therefore never exceed `rate` on average nor `burst` at
/// once, and none of them spins. Pure: time is seconds on a monotonic timeline, passed in.
public struct TokenBucket: Sendable, Equatable {
    /// Tokens added per second.
    public private(set) var rate: Double
    /// Most tokens held at once (the largest instantaneous burst).
    public let burst: Double
    /// Tokens available at ``updatedAt`` (negative: reservations waiting for future tokens).
    private var tokens: Double
    private var updatedAt: Double

    /// Creates a full bucket.
    /// - Parameters:
    ///   - rate: Tokens per second (> 0).
    ///   - burst: Capacity (≥ 1).
    ///   - now: Monotonic seconds.
    public init(rate: Double, burst: Int, now: Double) {
        self.rate = max(rate, 0.001)
        self.burst = Double(max(burst, 1))
        self.tokens = self.burst
        self.updatedAt = now
    }

    /// Takes one token.
    /// - Parameter now: Monotonic seconds.
    /// - Returns: Seconds to wait before using it (0 when it is there already).
    public mutating func reserve(now: Double) -> Double {
        refill(now: now)
        tokens -= 1
        return tokens >= 0 ? 0 : -tokens / rate
    }

    /// Takes one token only if a whole one is there now.
    /// - Parameter now: Monotonic seconds.
    /// - Returns: true when a token was taken.
    public mutating func take(now: Double) -> Bool {
        refill(now: now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// Hands back a reservation that was not used (the request was never sent).
    /// - Parameter now: Monotonic seconds.
    public mutating func refund(now: Double) {
        refill(now: now)
        tokens = min(burst, tokens + 1)
    }

    /// Seconds of reservations queued beyond the tokens available at `now` (0 when a token is free).
    /// - Parameter now: Monotonic seconds.
    public func backlog(now: Double) -> Double {
        let available = min(burst, tokens + max(0, now - updatedAt) * rate)
        return available >= 0 ? 0 : -available / rate
    }

    /// Changes the rate from `now` on (tokens earned so far at the old rate are kept).
    /// - Parameters:
    ///   - rate: Tokens per second.
    ///   - now: Monotonic seconds.
    public mutating func setRate(_ rate: Double, now: Double) {
        refill(now: now)
        self.rate = max(rate, 0.001)
    }

    private mutating func refill(now: Double) {
        if now > updatedAt {
            tokens = min(burst, tokens + (now - updatedAt) * rate)
            updatedAt = now
        }
    }
}
