import BugleCore
import Foundation

/// Keeps a claimed recipient from being sent while its device's own clock is inside the campaign's quiet hours.
///
/// The audience is planned when it is read (``LocalDeliveryPlanner/plan(timeZone:now:)``), but a recipient may be sent
/// much later: a paced run of millions takes hours, a retry waits out its backoff, a paused run is resumed the next
/// day. Each claimed recipient is checked again just before it is handed to its lane: under `hold` it goes back to
/// `retry_wait` until its quiet hours end (`quiet_hours`, no attempt spent); under `skip` it ends
/// `skipped_quiet_hours`, as it would have had the audience been read then. A held recipient carries the dedupe period
/// its quiet hours end in (``RecipientOutcome/periodKey``): held from 23:00 UTC to 07:00, it is notified on the next
/// day, and is deduped under that day.
struct QuietHoursGate: Sendable {
    private let planner: LocalDeliveryPlanner
    private let dedupe: DedupePeriod

    /// Nil when the campaign has no quiet hours: nothing to check.
    init?(campaign: Campaign) {
        guard campaign.delivery.localTime.quietHours != nil else { return nil }
        planner = LocalDeliveryPlanner(rules: campaign.delivery.localTime)
        dedupe = campaign.dedupe
    }

    /// What to do with a claimed recipient at `now` (UNIX seconds).
    enum Verdict: Equatable {
        /// Not now: its ledger outcome (held until its quiet hours end, or skipped).
        case notNow(RecipientOutcome)
        /// Send it, written before this instant (UNIX seconds), when its quiet hours begin; a send that waits for its
        /// lane's rate past it is handed back unsent (``PushRequest/sendBy``).
        case sendBy(Double)
    }

    /// The verdict for `recipient` at `now`; nil when there is nothing to say (an instant out of range).
    func check(_ recipient: ClaimedRecipient, now: Double) -> Verdict? {
        switch planner.quietHours(timeZone: recipient.timezone, at: Instant(secondsSince1970: now)) {
        case nil:
            return nil
        case .openUntil(let start):
            return .sendBy(start.secondsSince1970)
        case .skip:
            return .notNow(RecipientOutcome(
                seq: recipient.seq, state: .skippedQuietHours, code: SkipReason.quietHours.rawValue, refundAttempt: true))
        case .holdUntil(let end):
            return .notNow(RecipientOutcome(
                seq: recipient.seq, state: .retryWait, code: SkipReason.quietHours.rawValue,
                retryAfterSeconds: max(end.secondsSince1970 - now, 1), refundAttempt: true,
                periodKey: PeriodKey.key(for: dedupe, at: Date(timeIntervalSince1970: max(end.secondsSince1970, now)))))
        }
    }
}
