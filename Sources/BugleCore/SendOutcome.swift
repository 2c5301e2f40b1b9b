/// What a provider lane says about one request, in provider-neutral terms (RELIABILITY.md §3.5).
///
/// Each provider module translates its wire answer into exactly one of these with a pure
/// `classify(...)` function; the runner turns outcomes into ledger states.
public enum SendOutcome: Sendable, Equatable {
    /// The provider accepted the notification (APNs 200, FCM 200).
    case delivered(providerMessageID: String?)
    /// The token is dead: deactivate it (unless it re-registered after `invalidSince`).
    case invalidToken(code: String, invalidSince: Instant?)
    /// This message can never be delivered as built (payload too large, bad collapse id...).
    case rejected(code: String)
    /// Try again later.
    case retry(RetryScope, code: String, after: Duration?)
    /// The request may or may not have reached the provider; the campaign's ambiguous policy decides.
    case ambiguous(code: String)
    /// Auth or configuration is wrong for every recipient: stop the run (exit 2), deactivate nothing.
    case halt(code: String, message: String)

    /// A send withdrawn before it was written, because the run is stopping (``PushProvider/withdrawWaitingSends()``):
    /// known not sent, so the recipient goes back to wait with its attempt given back (`not_sent`).
    public static let withdrawn = SendOutcome.retry(.safe, code: "not_sent", after: nil)

    /// A send whose device's quiet hours began while it waited for its lane (``PushRequest/sendBy``): known not sent;
    /// it goes back to wait with its attempt given back, and the quiet-hours check holds or skips it when it is
    /// claimed again.
    public static let quietHoursBegan = SendOutcome.retry(.safe, code: "quiet_hours", after: nil)

    /// True when the provider answered (delivered, a dead token, a rejection, a 429 or 5xx): the path to it works. A
    /// lost answer, a request known not written (a refused stream) and a halt are not answers.
    public var isAnswer: Bool {
        switch self {
        case .delivered, .invalidToken, .rejected: true
        case .retry(let scope, _, _): scope != .safe
        case .ambiguous, .halt: false
        }
    }

    /// Short machine-readable code stored in `run_recipients.outcome_code`.
    public var code: String {
        switch self {
        case .delivered: return "delivered"
        case .invalidToken(let code, _), .rejected(let code), .retry(_, let code, _), .ambiguous(let code),
            .halt(let code, _):
            return code
        }
    }
}

/// Who a retry is charged to.
public enum RetryScope: String, Sendable, Equatable {
    /// Recipient-transient (APNs 429 TooManyRequests): backoff per recipient, spends an attempt.
    case recipient
    /// Provider-transient (5xx, FCM QUOTA_EXCEEDED): pause the lane, does not spend an attempt.
    case provider
    /// Known not processed (REFUSED_STREAM, above GOAWAY last-stream-id, connect failure): retry now, free; with an
    /// `after` (the legacy gateway's next connect), not before then, and the lane pauses till then.
    case safe
}

/// A wall-clock instant as seconds since the UNIX epoch (kept free of Foundation for pure logic).
public struct Instant: Sendable, Equatable, Hashable, Comparable {
    public var secondsSince1970: Double
    public init(secondsSince1970: Double) { self.secondsSince1970 = secondsSince1970 }
    public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.secondsSince1970 < rhs.secondsSince1970 }
}
