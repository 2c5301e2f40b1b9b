import BugleCore

/// Trips when a run's first APNs answers are all `BadDeviceToken` (legacy lane: status 8 `InvalidToken`): the tokens belong to the other APNs
/// environment (sandbox vs production), so deactivating them would destroy thousands of good tokens
/// (RELIABILITY.md §2.3 #23). Until one notification is delivered, `BadDeviceToken` answers are held
/// unconfirmed (the recipient goes back to `retry_wait` without deactivation or a charged attempt); after
/// `threshold` of them with no delivery, the run halts. Once anything is delivered the environment is right,
/// and later `BadDeviceToken` answers deactivate as usual (held ones are re-sent and confirmed).
struct WrongEnvironmentBreaker: Sendable {
    enum Verdict: Equatable {
        /// Keep this answer unconfirmed.
        case hold
        /// Hold it and halt the run.
        case trip(String)
    }

    /// Answers that a token from the other environment gets: HTTP/2 `BadDeviceToken`, legacy status 8.
    static let environmentCodes: Set<String> = ["BadDeviceToken", "InvalidToken"]

    var threshold = 50
    private(set) var confirmedHealthy = false
    private(set) var held = 0

    /// What to do with an answer; nil = record it as mapped.
    mutating func observe(_ outcome: SendOutcome) -> Verdict? {
        switch outcome {
        case .delivered:
            confirmedHealthy = true
            return nil
        case .invalidToken(let code, _) where Self.environmentCodes.contains(code) && !confirmedHealthy:
            held += 1
            if held >= threshold {
                return .trip(
                    "the first \(held) APNs answers were BadDeviceToken and none was delivered: the device tokens "
                        + "belong to the other APNs environment (sandbox vs production). Nothing was deactivated."
                )
            }
            return .hold
        default:
            return nil
        }
    }
}
