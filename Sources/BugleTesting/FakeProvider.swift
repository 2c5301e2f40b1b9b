import BugleCore
import Synchronization

/// A working in-memory provider lane for tests: answers by token prefix and records every delivered request.
///
/// Scheme (tokens are hex for iOS, so prefixes are hex too): `dead…` → invalid token (410-like, with the
/// configured timestamp), `bad0…` → rejected, `5030…` → provider retry (503) on the first answer only, `4290…` → recipient retry,
/// `a1a1…` → ambiguous, `ha17…` → halt, `quota…` → provider retry (429 `QUOTA_EXCEEDED`) every time (non-hex on
/// purpose: only FCM-style tokens can carry them). Anything
/// else is delivered with message id `fake-<seq>`.
public final class FakeProvider: PushProvider {
    public let kind: ProviderKind
    private let deliveredRequests = Mutex<[PushRequest]>([])
    private let answers = Mutex<[String: Int]>([:])
    private let invalidSince: Instant?

    /// - Parameter invalidSince: the timestamp reported with invalid-token answers (nil = none).
    public init(kind: ProviderKind, invalidSince: Instant? = nil) {
        self.kind = kind
        self.invalidSince = invalidSince
    }

    public func send(_ request: PushRequest) async -> SendOutcome {
        let outcome: SendOutcome
        let token = request.token
        if token.hasPrefix("dead") {
            outcome = .invalidToken(code: "Unregistered", invalidSince: invalidSince)
        } else if token.hasPrefix("bad0") {
            outcome = .rejected(code: "PayloadRejected")
        } else if token.hasPrefix("5030"), firstAnswer(for: token) {
            outcome = .retry(.provider, code: "ServiceUnavailable", after: .milliseconds(10))
        } else if token.hasPrefix("4290") {
            outcome = .retry(.recipient, code: "TooManyRequests", after: .milliseconds(10))
        } else if token.hasPrefix("a1a1") {
            outcome = .ambiguous(code: "stream_reset")
        } else if token.hasPrefix("quota") {
            outcome = .retry(.provider, code: "QUOTA_EXCEEDED", after: .milliseconds(10))
        } else if token.hasPrefix("ha17") {
            outcome = .halt(code: "InvalidProviderToken", message: "the key is wrong")
        } else {
            outcome = .delivered(providerMessageID: "fake-\(request.seq)")
        }
        answers.withLock { $0[outcome.code, default: 0] += 1 }
        if case .delivered = outcome {
            deliveredRequests.withLock { $0.append(request) }
        }
        return outcome
    }

    public func shutdown() async {}

    private let seenTokens = Mutex<Set<String>>([])

    /// True the first time a token is seen (so `5030…` tokens fail once with a provider-level 503, then succeed).
    private func firstAnswer(for token: String) -> Bool {
        seenTokens.withLock { $0.insert(token).inserted }
    }

    /// Every delivered request, in answer order.
    public var delivered: [PushRequest] { deliveredRequests.withLock { $0 } }

    /// Answers given, by outcome code.
    public var answerCounts: [String: Int] { answers.withLock { $0 } }
}
