import BugleCore

/// Trips when one platform's payloads render over its size limit for ``threshold`` recipients in a row, with no payload
/// of that platform composed between them.
///
/// `bugle validate` refuses copy too large with every template variable empty. Copy that grows too large only with the
/// segment's values (a long `{{blurb}}` column) is found as each recipient is composed: it fails `payload_too_large`
/// locally, without a request. A few long values fail a few recipients and the run goes on. Ten in a row mean most of
/// the platform's values are too long, and the run would fail the rest of that platform's audience one by one and
/// complete: it halts instead (exit 2, the run paused), as FCM's repeated payload-level `INVALID_ARGUMENT` does. Counted
/// per platform: a mixed run's other platforms, whose payloads fit, do not hide it.
struct OversizedPayloadBreaker: Sendable {
    /// Local `payload_too_large` failures of one platform in a row that trip it.
    let threshold: Int
    /// Per platform, indexed by ``slot(_:)``: a counter update on every answer, so no search or hashing.
    private var inARow = [Int](repeating: 0, count: 3)
    private var tripped = false

    init(threshold: Int = 10) {
        self.threshold = max(1, threshold)
    }

    /// Counts the outcome of one recipient of `platform`; returns the halt's message when it trips (once).
    mutating func observe(_ outcome: SendOutcome, platform: Platform) -> String? {
        let slot = Self.slot(platform)
        guard case .rejected(SkipReason.payloadTooLarge.rawValue) = outcome else {
            // A request was written (answered or not): its payload fit. A halt says nothing about the payload.
            if case .halt = outcome { return nil }
            inARow[slot] = 0
            return nil
        }
        inARow[slot] += 1
        guard inARow[slot] >= threshold, !tripped else { return nil }
        tripped = true
        return "the last \(inARow[slot]) \(platform.rawValue) payloads rendered over the platform's size limit "
            + "(payload_too_large), with none of that platform's fitting between them: the segment's template values make "
            + "most of its payloads too large. Those recipients failed and the run stopped (`bugle run FILE --dry-run` "
            + "counts payload_too_large); shorten the copy or the values, cancel this run and start a new one"
    }

    private static func slot(_ platform: Platform) -> Int {
        switch platform {
        case .ios: 0
        case .android: 1
        case .web: 2
        }
    }
}
