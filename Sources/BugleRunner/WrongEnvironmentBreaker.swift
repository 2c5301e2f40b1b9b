import BugleCore

/// Trips when a lane's first answers reject (nearly) every token as not belonging where it was sent:
/// `BadDeviceToken` (legacy lane: status 8 `InvalidToken`) when the tokens belong to the other APNs environment (sandbox
/// vs production), `DeviceTokenNotForTopic` when the `topic` names another app of the team than the one the tokens were
/// registered for, FCM's `SENDER_ID_MISMATCH` when the service account and `project_id` are another Firebase project's
/// than the one the apps registered with (a staging account in production). Deactivating on those answers would destroy
/// thousands of good tokens (RELIABILITY.md §2.3 #23).
///
/// Until the lane has been judged, such answers are held unconfirmed (the recipient goes back to `retry_wait` without
/// deactivation or a charged attempt). The lane is judged on the first ``window`` different tokens it answers (held or
/// delivered): `threshold` held tokens that are over 90% of those answered so far halt the run — a database of sandbox
/// tokens with a few production ones among them delivers a few and must still not lose the rest; once ``window``
/// tokens are answered with 90% or fewer held, the environment and topic are right, and held and later answers
/// deactivate as usual (held ones are re-sent and confirmed).
///
/// One breaker watches one lane: a delivery on FCM says nothing of APNs' environment (a mixed campaign used to let the
/// first Android delivery confirm the iOS lane, and every sandbox token was then deactivated).
///
/// Tokens are counted once each: a held recipient is re-sent at once, and its repeated answers used to count again, so
/// one bad token in a small run made the 50 answers alone and halted the run, and every resume again. A recipient
/// answered a third time while the lane is unjudged means the lane has no other token to judge by (fewer than
/// ``window`` iOS recipients): the breaker then judges the few it has — ``smallSample`` different tokens or more held,
/// over 90% of those answered, still halts; otherwise the lane is judged right (or, with nothing delivered, the few
/// held are taken as the bad tokens they are told to be) and they are deactivated.
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
        "SENDER_ID_MISMATCH":
            "the FCM project (the providers file's service account and `project_id`) is not the Firebase project these device tokens were registered with",
    ]

    var threshold = 50
    /// Different tokens answered (held or delivered) on which the lane is judged.
    var window = 500
    /// Different tokens held, none or few delivered, that halt a lane with fewer than ``window`` to judge by.
    static let smallSample = 5
    /// Answers of one held recipient after which its lane is judged on the tokens answered so far.
    static let repeatsToJudge = 3
    private(set) var confirmedHealthy = false
    /// Different recipients held.
    private(set) var held = 0
    /// Deliveries while the lane was unjudged.
    private(set) var delivered = 0
    /// Different recipients held, by the answer that held them first.
    private var heldByCode: [String: Int] = [:]
    /// Answers so far of each recipient held.
    private var answers: [Int64: Int] = [:]

    init(threshold: Int = 50, window: Int = 500) {
        self.threshold = threshold
        self.window = window
    }

    /// What to do with an answer of this breaker's lane for recipient `seq`; nil = record it as mapped.
    mutating func observe(_ outcome: SendOutcome, seq: Int64) -> Verdict? {
        guard !confirmedHealthy else { return nil }
        switch outcome {
        case .delivered:
            delivered += 1
            if held + delivered >= window { confirm() }
            return nil
        case .invalidToken(let code, _) where Self.heldCodes[code] != nil:
            let count = answers[seq, default: 0] + 1
            answers[seq] = count
            if count == 1 {
                held += 1
                heldByCode[code, default: 0] += 1
                if held >= threshold, mostlyHeld { return trip }
                if held + delivered >= window {
                    confirm()
                    return nil
                }
                return .hold
            }
            guard count >= Self.repeatsToJudge else { return .hold }
            if held >= Self.smallSample, mostlyHeld { return trip }
            if delivered > 0 { confirm() }
            return nil
        default:
            return nil
        }
    }

    /// Over 90% of the different tokens answered so far were held.
    private var mostlyHeld: Bool {
        held * 10 > (held + delivered) * 9
    }

    private mutating func confirm() {
        confirmedHealthy = true
        answers.removeAll()
    }

    /// The halt, named after the answer most of the held tokens got.
    private var trip: Verdict {
        let code = heldByCode.max { ($0.value, $1.key) < ($1.value, $0.key) }?.key ?? "BadDeviceToken"
        let cause = Self.heldCodes[code] ?? ""
        return .trip(
            code: code,
            message: delivered == 0
                ? "\(held) different device tokens were answered \(code) and none was delivered: \(cause); no token was deactivated for these answers"
                : "\(held) of the first \(held + delivered) different device tokens answered were answered \(code) (\(delivered) delivered): \(cause); no token was deactivated for these answers"
        )
    }
}
