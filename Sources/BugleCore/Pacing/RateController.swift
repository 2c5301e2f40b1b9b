/// Adaptive rate for one provider lane (AIMD).
///
/// Answers are counted in windows of `window` seconds. When throttling answers (APNs 429/503, FCM
/// `QUOTA_EXCEEDED`/`UNAVAILABLE`/`INTERNAL`) reach both `minimumThrottles` and `threshold` of the window's
/// answers, the rate is multiplied by `decrease` at once and a new window starts; a window with no throttling
/// adds `ceiling · increase` back, up to the ceiling. A sporadic error (1% of 503s) therefore never slows a
/// lane, while a storm halves it within a fraction of a second. Pure: time is passed in.
public struct RateController: Sendable, Equatable {
    /// The configured rate (providers file, possibly lowered by the campaign).
    public let ceiling: Double
    /// The lowest rate a throttled lane drops to.
    public let floor: Double
    /// The rate in force.
    public private(set) var rate: Double
    /// Multiplier on a storm (0 < decrease < 1).
    public var decrease = 0.5
    /// Fraction of the ceiling added back per calm window.
    public var increase = 0.1
    /// Window length in seconds.
    public var window = 1.0
    /// Share of a window's answers that must be throttling to count as a storm.
    public var threshold = 0.05
    /// Throttling answers a window needs before it can count as a storm.
    public var minimumThrottles = 3
    private var windowStart: Double?
    private var answers = 0
    private var throttles = 0

    /// Creates a controller running at its ceiling.
    /// - Parameters:
    ///   - ceiling: The configured rate (per second).
    ///   - floor: The lowest rate (default 1% of the ceiling, at least 1/s).
    public init(ceiling: Double, floor: Double? = nil) {
        self.ceiling = max(ceiling, 0.001)
        self.floor = min(self.ceiling, floor ?? max(1, ceiling / 100))
        self.rate = self.ceiling
    }

    /// What an answer did to the rate.
    public enum Change: Sendable, Equatable {
        case none
        /// A storm: the rate was lowered, or stays at its floor (the lane still pauses for it).
        case decreased
        /// A calm window: the rate went up.
        case increased
    }

    /// Records one answer.
    /// - Parameters:
    ///   - throttled: Whether the answer was a throttling one.
    ///   - now: Monotonic seconds.
    /// - Returns: How the rate changed.
    public mutating func record(throttled: Bool, now: Double) -> Change {
        let start = windowStart ?? now
        windowStart = start
        if now - start >= window {
            let calm = throttles == 0
            startWindow(at: now)
            answers = 1
            throttles = throttled ? 1 : 0
            if calm && rate < ceiling {
                rate = min(ceiling, rate + ceiling * increase)
                return .increased
            }
            return .none
        }
        answers += 1
        if throttled { throttles += 1 }
        if throttles >= minimumThrottles && Double(throttles) >= threshold * Double(answers) {
            startWindow(at: now)
            rate = max(floor, rate * decrease)
            return .decreased
        }
        return .none
    }

    private mutating func startWindow(at now: Double) {
        windowStart = now
        answers = 0
        throttles = 0
    }
}
