import NIOCore

/// The FCM simulator's per-project message quota: at most `limit` counted messages in any rolling window
/// of `window` seconds (not clock-aligned, like Google's). A request first reserves a slot, then either
/// commits it (answers 200 and 4xx other than 429 count) or releases it (429, 5xx and hangs do not), so
/// concurrent requests on several event loops can never overshoot the limit.
///
/// A value type with time as input, so it is tested without a clock.
struct FCMQuotaWindow: Sendable {
    /// The result of a reservation.
    enum Decision: Sendable, Equatable {
        /// A slot is reserved: commit or release it.
        case granted
        /// No room: retry after this many whole seconds (at least 1).
        case exhausted(retryAfter: Int)
    }

    /// Maximum counted messages per window.
    let limit: Int
    /// Window length in seconds.
    let window: Double
    /// Times of counted messages, oldest first.
    private var times = CircularBuffer<Double>()
    /// Slots reserved and not yet committed or released.
    private var reserved = 0
    /// One microsecond: times this close count as equal.
    private static let tolerance = 1e-6

    /// Creates a window.
    /// - Parameters:
    ///   - limit: Messages per window.
    ///   - window: Window length in seconds.
    init(limit: Int, window: Double) {
        self.limit = max(0, limit)
        self.window = max(0.001, window)
    }

    /// Messages counted in the window ending at `now` (reservations included).
    mutating func used(now: Double) -> Int {
        evict(now: now)
        return times.count + reserved
    }

    /// Reserves a slot at `now` when the window has room.
    /// - Parameter now: Wall-clock seconds.
    mutating func reserve(now: Double) -> Decision {
        evict(now: now)
        if times.count + reserved < limit {
            reserved += 1
            return .granted
        }
        // Room appears when enough of the oldest counted messages have left the window.
        let needed = times.count + reserved - limit + 1
        guard needed <= times.count else { return .exhausted(retryAfter: 1) }
        let freeAt = times[times.index(times.startIndex, offsetBy: needed - 1)] + window
        // The tolerance keeps float noise (1.7e9 + 60 - 30) from turning 30 s into 31.
        let seconds = Int((freeAt - now - Self.tolerance).rounded(.up))
        return .exhausted(retryAfter: max(1, seconds))
    }

    /// Counts a reserved slot as a message at `time`.
    /// - Parameter time: The message's time (the reservation's `now`).
    mutating func commit(at time: Double) {
        reserved = max(0, reserved - 1)
        if let last = times.last, last > time {
            // Keep the buffer ordered; another loop committed a later reservation first.
            times.append(last)
        } else {
            times.append(time)
        }
    }

    /// Gives a reserved slot back without counting it.
    mutating func release() {
        reserved = max(0, reserved - 1)
    }

    private mutating func evict(now: Double) {
        let horizon = now - window + Self.tolerance
        while let first = times.first, first <= horizon {
            times.removeFirst()
        }
    }
}
