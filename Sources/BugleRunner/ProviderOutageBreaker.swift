import BugleCore

/// Trips when a lane has had provider-level trouble (5xx, quota: `.retry(.provider, …)`, which charges no attempt) for
/// `limit` with no answer in between that shows the provider processing requests (a delivery, an invalid token, a
/// rejected payload). A sporadic 5xx the lane hands on as the recipient's (``LanePacer``) neither starts nor resets the
/// clock, and neither does a lost answer. The lane pauses and backs off meanwhile; this bounds how long: without it a
/// provider down for hours kept the run waiting for ever. Halting pauses the run with the reason; `bugle resume` goes
/// on once the provider works, `bugle cancel` gives up.
struct ProviderOutageBreaker: Sendable {
    /// How long a lane may answer only with provider trouble.
    let limit: Duration
    /// Per lane (``ProviderKind/laneSlot``): when its current run of provider trouble began.
    private var troubleSince = [ContinuousClock.Instant?](repeating: nil, count: ProviderKind.laneSlots)

    init(limit: Duration) {
        self.limit = limit
    }

    /// Counts `outcome` on `lane` at `now`; returns the halt's message when it trips.
    mutating func observe(_ outcome: SendOutcome, lane: ProviderKind, now: ContinuousClock.Instant) -> String? {
        switch outcome {
        case .retry(.provider, let code, _):
            guard let since = troubleSince[lane.laneSlot] else {
                troubleSince[lane.laneSlot] = now
                return nil
            }
            guard now - since >= limit else { return nil }
            troubleSince[lane.laneSlot] = now
            return "\(lane.laneName) has answered nothing but provider errors for \(Self.describe(now - since)) (the last: \(code)); "
                + "those answers charged no attempt. The provider is failing, or every recipient left is refused by it each "
                + "time: resume the run once it works, or cancel it"
        case .delivered, .invalidToken, .rejected:
            if troubleSince[lane.laneSlot] != nil { troubleSince[lane.laneSlot] = nil }
            return nil
        case .retry(.recipient, _, _), .retry(.safe, _, _), .ambiguous, .halt:
            // Say nothing about whether the provider processes requests.
            return nil
        }
    }

    private static func describe(_ duration: Duration) -> String {
        let seconds = duration.components.seconds
        return seconds >= 120 ? "\(seconds / 60) min" : "\(seconds) s"
    }
}
