/// Full-jitter exponential backoff: `max(retryAfter, uniform(0, min(cap, base·2^attempt)))`
/// (RELIABILITY.md §3.5). Pure: randomness is injected.
public struct Backoff: Sendable, Equatable {
    public var base: Duration
    public var cap: Duration

    public init(base: Duration = .seconds(1), cap: Duration = .seconds(600)) {
        self.base = base
        self.cap = cap
    }

    /// Delay before attempt `attempt + 1` (attempt ≥ 1 is the number already made).
    public func delay(attempt: Int, retryAfter: Duration? = nil, using random: inout some RandomNumberGenerator) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let ceiling = min(cap.inSeconds, base.inSeconds * Double(1 << exponent))
        let jittered = Double.random(in: 0...max(ceiling, 0), using: &random)
        let chosen = Duration.milliseconds(Int64(jittered * 1000))
        if let retryAfter, retryAfter > chosen { return retryAfter }
        return chosen
    }
}
