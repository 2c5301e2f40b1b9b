import BugleCore

/// Trips when a run's first APNs answers are all `BadDeviceToken` (legacy lane: status 8 `InvalidToken`): the tokens belong to the other APNs
/// environment (sandbox vs production), so deactivating them would destroy thousands of good tokens
/// (RELIABILITY.md §2.3 #23). Until one notification is delivered, `BadDeviceToken` answers are held
/// unconfirmed (the recipient goes back to `retry_wait` without deactivation or a charged attempt); after
/// `threshold` different tokens so answered with no delivery, the run halts. Once anything is delivered the environment
/// is right, and later `BadDeviceToken` answers deactivate as usual (held ones are re-sent and confirmed).
///
/// Tokens are counted once each: a held recipient is re-sent at once, and its repeated answers used to count again, so
/// one bad token in a small run made the 50 answers alone and halted the run, and every resume again. A recipient
/// answered `BadDeviceToken` a third time while nothing was delivered means the lane has no other token to judge by
/// (fewer than `threshold` iOS recipients): the breaker then judges the few it has — ``smallSample`` different tokens
/// or more, none delivered, still halts; fewer are taken as the bad tokens they are told to be and deactivated.
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
    /// Different tokens, none delivered, that halt a lane with fewer than ``threshold`` to judge by.
    static let smallSample = 5
    /// Answers of one held recipient after which its lane is judged on the tokens held so far.
    static let repeatsToJudge = 3
    private(set) var confirmedHealthy = false
    /// Different recipients held.
    private(set) var held = 0
    /// Answers so far of each recipient held.
    private var answers: [Int64: Int] = [:]

    init(threshold: Int = 50) {
        self.threshold = threshold
    }

    /// What to do with an answer for recipient `seq`; nil = record it as mapped.
    mutating func observe(_ outcome: SendOutcome, seq: Int64) -> Verdict? {
        switch outcome {
        case .delivered:
            confirmedHealthy = true
            answers.removeAll()
            return nil
        case .invalidToken(let code, _) where Self.environmentCodes.contains(code) && !confirmedHealthy:
            let count = answers[seq, default: 0] + 1
            answers[seq] = count
            if count == 1 {
                held += 1
                return held >= threshold ? .trip(message) : .hold
            }
            guard count >= Self.repeatsToJudge else { return .hold }
            return held >= Self.smallSample ? .trip(message) : nil
        default:
            return nil
        }
    }

    private var message: String {
        "\(held) different device tokens were answered BadDeviceToken and none was delivered: the device tokens "
            + "belong to the other APNs environment (sandbox vs production). Nothing was deactivated."
    }
}
