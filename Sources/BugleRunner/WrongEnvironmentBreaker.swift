import BugleCore

/// Trips when an APNs lane's first answers reject every token as not belonging where it was sent: `BadDeviceToken`
/// (legacy lane: status 8 `InvalidToken`) when the tokens belong to the other APNs environment (sandbox vs production),
/// `DeviceTokenNotForTopic` when the `topic` names another app of the team than the one the tokens were registered for.
/// Deactivating on those answers would destroy thousands of good tokens (RELIABILITY.md §2.3 #23). Until the lane
/// delivers one notification, such answers are held unconfirmed (the recipient goes back to `retry_wait` without
/// deactivation or a charged attempt); after `threshold` different tokens so answered with no delivery, the run halts.
/// Once the lane delivered, its environment and topic are right, and later answers deactivate as usual (held ones are
/// re-sent and confirmed).
///
/// One breaker watches one lane: a delivery on FCM says nothing of APNs' environment (a mixed campaign used to let the
/// first Android delivery confirm the iOS lane, and every sandbox token was then deactivated).
///
/// Tokens are counted once each: a held recipient is re-sent at once, and its repeated answers used to count again, so
/// one bad token in a small run made the 50 answers alone and halted the run, and every resume again. A recipient
/// answered a third time while nothing was delivered means the lane has no other token to judge by (fewer than
/// `threshold` iOS recipients): the breaker then judges the few it has — ``smallSample`` different tokens or more, none
/// delivered, still halts; fewer are taken as the bad tokens they are told to be and deactivated.
struct WrongEnvironmentBreaker: Sendable {
    enum Verdict: Equatable {
        /// Keep this answer unconfirmed.
        case hold
        /// Hold it and halt the run with this code and message.
        case trip(code: String, message: String)
    }

    /// Answers that a token from another environment or app gets, and what each says is wrong.
    static let heldCodes: [String: String] = [
        "BadDeviceToken": "the device tokens belong to the other APNs environment (sandbox vs production)",
        "InvalidToken": "the device tokens belong to the other APNs environment (sandbox vs production)",
        "DeviceTokenNotForTopic":
            "the APNs topic (the campaign's or the providers file's `topic`) is not the app these device tokens were registered for",
    ]

    var threshold = 50
    /// Different tokens, none delivered, that halt a lane with fewer than ``threshold`` to judge by.
    static let smallSample = 5
    /// Answers of one held recipient after which its lane is judged on the tokens held so far.
    static let repeatsToJudge = 3
    private(set) var confirmedHealthy = false
    /// Different recipients held.
    private(set) var held = 0
    /// Different recipients held, by the answer that held them first.
    private var heldByCode: [String: Int] = [:]
    /// Answers so far of each recipient held.
    private var answers: [Int64: Int] = [:]

    init(threshold: Int = 50) {
        self.threshold = threshold
    }

    /// What to do with an answer of this breaker's lane for recipient `seq`; nil = record it as mapped.
    mutating func observe(_ outcome: SendOutcome, seq: Int64) -> Verdict? {
        switch outcome {
        case .delivered:
            confirmedHealthy = true
            answers.removeAll()
            return nil
        case .invalidToken(let code, _) where Self.heldCodes[code] != nil && !confirmedHealthy:
            let count = answers[seq, default: 0] + 1
            answers[seq] = count
            if count == 1 {
                held += 1
                heldByCode[code, default: 0] += 1
                return held >= threshold ? trip : .hold
            }
            guard count >= Self.repeatsToJudge else { return .hold }
            return held >= Self.smallSample ? trip : nil
        default:
            return nil
        }
    }

    /// The halt, named after the answer most of the held tokens got.
    private var trip: Verdict {
        let code = heldByCode.max { ($0.value, $1.key) < ($1.value, $0.key) }?.key ?? "BadDeviceToken"
        let cause = Self.heldCodes[code] ?? ""
        return .trip(
            code: code,
            message: "\(held) different device tokens were answered \(code) and none was delivered: \(cause); no token was deactivated for these answers"
        )
    }
}
