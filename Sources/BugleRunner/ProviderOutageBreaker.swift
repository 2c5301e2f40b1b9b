import BugleCore

/// Trips when a lane has had provider-level trouble for `limit` with no answer in between that shows the provider
/// processing requests (a delivery, an invalid token, a rejected payload). Trouble is a provider error (5xx, quota:
/// `.retry(.provider, …)`, which charges no attempt) or a request the provider did not take (`.retry(.safe, …)`: a
/// refused stream, a connection refused, closed or turned away before the request was written). A sporadic 5xx the
/// lane hands on as the recipient's (``LanePacer``) neither starts nor resets the clock, and neither does a lost
/// answer. The lane pauses and backs off meanwhile; this bounds how long: without it a provider down for hours, or
/// unreachable, kept the run waiting (or reconnecting) for ever. Trouble must be continuous: a gap of more than
/// ``quietGap`` between two troubled answers (a lane with nothing due) starts the clock again. Halting pauses the
/// run with the reason; `bugle resume` goes on once the provider works, `bugle cancel` gives up.
struct ProviderOutageBreaker: Sendable {
    /// How long a lane may have only provider trouble.
    let limit: Duration
    /// Per lane (``ProviderKind/laneSlot``): when its current run of provider trouble began, and when trouble was
    /// last seen.
    private var troubleSince = [ContinuousClock.Instant?](repeating: nil, count: ProviderKind.laneSlots)
    private var lastTrouble = [ContinuousClock.Instant?](repeating: nil, count: ProviderKind.laneSlots)

    init(limit: Duration) {
        self.limit = limit
    }

    /// The longest silence within one run of trouble: half the limit, at least a minute (longer than a paused lane's
    /// backoff between tries).
    var quietGap: Duration { max(limit / 2, .seconds(60)) }

    /// Counts `outcome` on `lane` at `now`; returns the halt's message when it trips.
    mutating func observe(_ outcome: SendOutcome, lane: ProviderKind, now: ContinuousClock.Instant) -> String? {
        switch outcome {
        case .retry(.provider, let code, _), .retry(.safe, let code, _):
            let slot = lane.laneSlot
            defer { lastTrouble[slot] = now }
            guard let since = troubleSince[slot], let last = lastTrouble[slot], now - last <= quietGap else {
                troubleSince[slot] = now
                return nil
            }
            guard now - since >= limit else { return nil }
            troubleSince[slot] = now
            return "\(lane.laneName) has processed no request for \(Self.describe(now - since)): it answered only with provider "
                + "errors, or did not take the requests (the last: \(code)); those charged no attempt. The provider is failing "
                + "or unreachable, or every recipient left is refused by it each time: resume the run once it works, or cancel it"
        case .delivered, .invalidToken, .rejected:
            if troubleSince[lane.laneSlot] != nil { troubleSince[lane.laneSlot] = nil }
            return nil
        case .retry(.recipient, _, _), .ambiguous, .halt:
            // Say nothing about whether the provider processes requests.
            return nil
        }
    }

    private static func describe(_ duration: Duration) -> String {
        let seconds = duration.components.seconds
        return seconds >= 120 ? "\(seconds / 60) min" : "\(seconds) s"
    }
}
