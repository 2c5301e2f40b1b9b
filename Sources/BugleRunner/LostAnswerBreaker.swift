import BugleCore

/// Trips when a lane's requests are lost wholesale: every answer for `threshold` requests in a row was lost (the
/// connection closed under the request, or no answer came within the timeout) and the provider answered none in
/// between. One connection cut or network blip loses at most the in-flight window W; twice W lost in a row means the
/// connections opened after it failed too, so the provider or the path to it is failing. Without the breaker such a
/// run would go on claiming the whole segment into `unknown` (policy `drop`) or spend every recipient's attempts
/// (policy `resend`) and end `completed`. Halting keeps the loss to `threshold` recipients; `bugle resume` goes on
/// once the path works.
///
/// It also trips when resends are lost again: a path that cuts connections under load (a middlebox, an overloaded
/// proxy) lets a few answers through, so nothing is lost "in a row", yet under `resend` each recipient used to be sent
/// again until its attempts ran out — four or five copies to most devices. One cut loses the window once, and its
/// resends go through on the new connection; when ``lostAgainToJudge`` resends or more were lost again, more of them
/// than were answered, and most of the lane's recent requests (about the last 2 W) were lost, the path keeps losing
/// answers and every further resend may be one more duplicate. The last condition keeps periodic cuts from tripping
/// it: connections that reach their cut together lose each other's resends in a burst before any resend is answered,
/// yet the lane still loses only a small part of what it sends.
struct LostAnswerBreaker: Sendable {
    /// Lost requests in a row (per lane) that trip it.
    let threshold: Int
    /// Resends lost again (per lane) before the lane is judged on them.
    static let lostAgainToJudge = 20
    /// Per lane, indexed by ``slot(_:)``: a counter update on every answer, so no hashing.
    private var lostInARow = [Int](repeating: 0, count: ProviderKind.laneSlots)
    /// Per lane, while probing: the smaller in-a-row threshold, until the lane's first answer (0: not probing).
    private var probeThreshold = [Int](repeating: 0, count: ProviderKind.laneSlots)
    /// Per lane: requests of recipients whose previous request was lost, lost again, and answered.
    private var lostAgain = [Int](repeating: 0, count: ProviderKind.laneSlots)
    private var recovered = [Int](repeating: 0, count: ProviderKind.laneSlots)
    private var trippedAgain = [Bool](repeating: false, count: ProviderKind.laneSlots)
    /// Per lane, the lane's recent requests: lost and all (lost or answered), in the current block of ``block``
    /// outcomes and the one before it.
    private var recentLost = [Int](repeating: 0, count: 2 * ProviderKind.laneSlots)
    private var recentAll = [Int](repeating: 0, count: 2 * ProviderKind.laneSlots)
    /// Outcomes per block: W (at least ``lostAgainToJudge``), so the recent requests are the last W to 2 W.
    private let block: Int
    /// Recipients whose last request was lost (only those: the set holds at most what was lost).
    private var lostOnce: Set<Int64> = []

    /// A breaker for a run whose in-flight window is `window` (W): it trips at 2 W lost in a row.
    /// - Parameter probe: A run resumed after its answers were lost starts with this many requests in flight: each
    ///   lane trips at that many lost in a row until it has an answer.
    init(window: Int, probe: Int? = nil) {
        threshold = 2 * max(1, window)
        block = max(Self.lostAgainToJudge, window)
        if let probe { probeThreshold = [Int](repeating: max(1, probe), count: ProviderKind.laneSlots) }
    }

    /// Counts `outcome` of recipient `seq` on `lane`; returns the halt's message when it trips.
    mutating func observe(_ outcome: SendOutcome, lane: ProviderKind, seq: Int64) -> String? {
        guard case .ambiguous = outcome else {
            // Any answer (a 429 or 5xx too) says the path works; a safe retry (a refused stream, not written) or a halt
            // says nothing about requests already written.
            if outcome.isAnswer {
                answered(lane, seq: seq)
                countRecent(lane, lost: false)
            }
            return nil
        }
        countRecent(lane, lost: true)
        let lost = lostInARow[lane.laneSlot] + 1
        lostInARow[lane.laneSlot] = lost
        if probeThreshold[lane.laneSlot] > 0, lost == probeThreshold[lane.laneSlot] {
            return "the run was resumed after its answers were lost, and its first \(lost) \(lane.laneName) requests were "
                + "all lost again: the provider or the path to it still fails; only those were sent"
        }
        if lost == threshold {
            return "the last \(lost) \(lane.laneName) requests were all lost (the connection closed under them, or no "
                + "answer came within the timeout) and none was answered in between: the provider or the path to it is "
                + "failing; those recipients are recorded as delivery.ambiguous says"
        }
        guard !lostOnce.insert(seq).inserted else { return nil }
        let again = lostAgain[lane.laneSlot] + 1
        lostAgain[lane.laneSlot] = again
        guard again >= Self.lostAgainToJudge, again > recovered[lane.laneSlot], !trippedAgain[lane.laneSlot],
              mostRecentLost(lane) else { return nil }
        trippedAgain[lane.laneSlot] = true
        return "\(again) \(lane.laneName) requests sent again after a lost answer were lost again, and only "
            + "\(recovered[lane.laneSlot]) such requests were answered: the path to the provider keeps losing answers "
            + "(connections cut under load), and each lost answer may be a notification delivered twice "
            + "(delivery.ambiguous: resend)"
    }

    /// Whether more than half of the lane's recent requests were lost.
    private func mostRecentLost(_ lane: ProviderKind) -> Bool {
        let current = 2 * lane.laneSlot
        let lost = recentLost[current] + recentLost[current + 1]
        return 2 * lost > recentAll[current] + recentAll[current + 1]
    }

    private mutating func countRecent(_ lane: ProviderKind, lost: Bool) {
        let current = 2 * lane.laneSlot
        if recentAll[current] == block {
            recentLost[current + 1] = recentLost[current]
            recentAll[current + 1] = block
            recentLost[current] = 0
            recentAll[current] = 0
        }
        recentAll[current] += 1
        if lost { recentLost[current] += 1 }
    }

    private mutating func answered(_ lane: ProviderKind, seq: Int64) {
        if lostInARow[lane.laneSlot] != 0 { lostInARow[lane.laneSlot] = 0 }
        if probeThreshold[lane.laneSlot] != 0 { probeThreshold[lane.laneSlot] = 0 }
        if !lostOnce.isEmpty, lostOnce.remove(seq) != nil { recovered[lane.laneSlot] += 1 }
    }
}
