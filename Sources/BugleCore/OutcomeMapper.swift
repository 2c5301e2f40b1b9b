import Foundation

/// Maps a provider's ``SendOutcome`` for one recipient to the ledger write (RELIABILITY.md §3.5).
public struct OutcomeMapper: Sendable {
    public var maxAttempts: Int
    public var ambiguousPolicy: AmbiguousPolicy
    public var backoff: Backoff

    public init(maxAttempts: Int, ambiguousPolicy: AmbiguousPolicy, backoff: Backoff = Backoff()) {
        self.maxAttempts = maxAttempts
        self.ambiguousPolicy = ambiguousPolicy
        self.backoff = backoff
    }

    /// The ledger write for `outcome` of the recipient (`seq`, `deviceID`) on its `attempts`-th attempt.
    public func map(
        _ outcome: SendOutcome,
        seq: Int64,
        deviceID: Int64,
        attempts: Int,
        using random: inout some RandomNumberGenerator
    ) -> RecipientOutcome {
        switch outcome {
        case .delivered(let id):
            return RecipientOutcome(seq: seq, state: .sent, code: "delivered", providerMessageID: id)
        case .invalidToken(let code, let since):
            let date = since.map { Date(timeIntervalSince1970: $0.secondsSince1970) }
            return RecipientOutcome(
                seq: seq, state: .invalidToken, code: code,
                deactivate: Deactivation(deviceID: deviceID, reason: code, invalidSince: date)
            )
        case .rejected(let code):
            return RecipientOutcome(seq: seq, state: .failedPermanent, code: code)
        case .retry(.recipient, let code, let after):
            return chargedRetry(seq: seq, code: code, attempts: attempts, after: after, random: &random)
        case .retry(.provider, let code, let after):
            let delay = backoff.delay(attempt: attempts, retryAfter: after, using: &random)
            return RecipientOutcome(seq: seq, state: .retryWait, code: code, retryAfterSeconds: delay.inSeconds, refundAttempt: true)
        case .retry(.safe, let code, let after):
            return RecipientOutcome(seq: seq, state: .retryWait, code: code, retryAfterSeconds: after?.inSeconds ?? 0, refundAttempt: true)
        case .ambiguous(let code):
            switch ambiguousPolicy {
            case .drop:
                return RecipientOutcome(seq: seq, state: .unknown, code: code)
            case .resend:
                return chargedRetry(seq: seq, code: code, attempts: attempts, after: nil, random: &random)
            }
        case .halt(let code, _):
            // Not the recipient's fault: give the attempt back so a resumed run sends it.
            return RecipientOutcome(seq: seq, state: .retryWait, code: code, retryAfterSeconds: 0, refundAttempt: true)
        }
    }

    private func chargedRetry(seq: Int64, code: String, attempts: Int, after: Duration?, random: inout some RandomNumberGenerator) -> RecipientOutcome {
        guard attempts < maxAttempts else {
            return RecipientOutcome(seq: seq, state: .failedPermanent, code: "attempts_exhausted:" + code)
        }
        let delay = backoff.delay(attempt: attempts, retryAfter: after, using: &random)
        return RecipientOutcome(seq: seq, state: .retryWait, code: code, retryAfterSeconds: delay.inSeconds)
    }
}
