import BugleCore

/// Keeps a claimed recipient from being sent while its device's own clock is inside the campaign's quiet hours.
///
/// The audience is planned when it is read (``LocalDeliveryPlanner/plan(timeZone:now:)``), but a recipient may be sent
/// much later: a paced run of millions takes hours, a retry waits out its backoff, a paused run is resumed the next
/// day. Each claimed recipient is checked again just before it is handed to its lane: under `hold` it goes back to
/// `retry_wait` until its quiet hours end (`quiet_hours`, no attempt spent); under `skip` it ends
/// `skipped_quiet_hours`, as it would have had the audience been read then.
struct QuietHoursGate: Sendable {
    private let planner: LocalDeliveryPlanner

    /// Nil when the campaign has no quiet hours: nothing to check.
    init?(campaign: Campaign) {
        guard campaign.delivery.localTime.quietHours != nil else { return nil }
        planner = LocalDeliveryPlanner(rules: campaign.delivery.localTime)
    }

    /// When a recipient sent now must be on the wire by: its next quiet hours' start (UNIX seconds). A send that waits
    /// for its lane's rate past it is handed back unsent (``PushRequest/sendBy``).
    func sendBy(for recipient: ClaimedRecipient, now: Double) -> Double? {
        planner.nextQuietStart(timeZone: recipient.timezone, after: Instant(secondsSince1970: now))?.secondsSince1970
    }

    /// The ledger outcome of a recipient that must not be sent at `now` (UNIX seconds), or nil to send it.
    func outcome(for recipient: ClaimedRecipient, now: Double) -> RecipientOutcome? {
        switch planner.quietHoursNow(timeZone: recipient.timezone, now: Instant(secondsSince1970: now)) {
        case nil:
            return nil
        case .skipQuietHours:
            return RecipientOutcome(
                seq: recipient.seq, state: .skippedQuietHours, code: SkipReason.quietHours.rawValue, refundAttempt: true)
        case .at(let end):
            return RecipientOutcome(
                seq: recipient.seq, state: .retryWait, code: SkipReason.quietHours.rawValue,
                retryAfterSeconds: max(end.secondsSince1970 - now, 1), refundAttempt: true)
        }
    }
}
