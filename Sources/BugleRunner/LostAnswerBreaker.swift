import BugleCore

/// Trips when a lane's requests are lost wholesale: every answer for `threshold` requests in a row was lost (the
/// connection closed under the request, or no answer came within the timeout) and the provider answered none in
/// between. One connection cut or network blip loses at most the in-flight window W; twice W lost in a row means the
/// connections opened after it failed too, so the provider or the path to it is failing. Without the breaker such a
/// run would go on claiming the whole segment into `unknown` (policy `drop`) or spend every recipient's attempts
/// (policy `resend`) and end `completed`. Halting keeps the loss to `threshold` recipients; `bugle resume` goes on
/// once the path works.
struct LostAnswerBreaker: Sendable {
    /// Lost requests in a row (per lane) that trip it.
    let threshold: Int
    /// Per lane, indexed by ``slot(_:)``: a counter update on every answer, so no hashing.
    private var lostInARow = [Int](repeating: 0, count: ProviderKind.laneSlots)

    /// A breaker for a run whose in-flight window is `window` (W): it trips at 2 W lost in a row.
    init(window: Int) {
        threshold = 2 * max(1, window)
    }

    /// Counts `outcome` on `lane`; returns the halt's message when it trips.
    mutating func observe(_ outcome: SendOutcome, lane: ProviderKind) -> String? {
        switch outcome {
        case .ambiguous:
            let lost = lostInARow[lane.laneSlot] + 1
            lostInARow[lane.laneSlot] = lost
            guard lost == threshold else { return nil }
            return "the last \(lost) \(lane.laneName) requests were all lost (the connection closed under them, or no "
                + "answer came within the timeout) and none was answered in between: the provider or the path to it is "
                + "failing; those recipients are recorded as delivery.ambiguous says. Resume the run once it works"
        case .delivered, .invalidToken, .rejected:
            reset(lane)
            return nil
        case .retry(let scope, _, _):
            // A provider's 429 or 5xx is an answer: the path works. A safe retry (refused stream, not written) says
            // nothing about requests already written.
            if scope != .safe { reset(lane) }
            return nil
        case .halt:
            return nil
        }
    }

    private mutating func reset(_ lane: ProviderKind) {
        if lostInARow[lane.laneSlot] != 0 { lostInARow[lane.laneSlot] = 0 }
    }
}
