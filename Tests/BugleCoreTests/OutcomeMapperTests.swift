import BugleCore
import BugleTesting
import Foundation
import Testing

@Suite("Outcome mapping and backoff")
struct OutcomeMapperTests {
    struct SeededRandom: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test("each provider outcome lands in the right ledger state")
    func table() {
        var random = SeededRandom(state: 1)
        let mapper = OutcomeMapper(maxAttempts: 3, ambiguousPolicy: .drop)
        func map(_ outcome: SendOutcome, attempts: Int = 1) -> RecipientOutcome {
            mapper.map(outcome, seq: 1, deviceID: 10, attempts: attempts, using: &random)
        }
        #expect(map(.delivered(providerMessageID: "id")).state == .sent)
        #expect(map(.delivered(providerMessageID: "id")).providerMessageID == "id")
        let invalid = map(.invalidToken(code: "Unregistered", invalidSince: Instant(secondsSince1970: 100)))
        #expect(invalid.state == .invalidToken)
        #expect(invalid.deactivate?.deviceID == 10)
        #expect(invalid.deactivate?.invalidSince?.timeIntervalSince1970 == 100)
        #expect(map(.rejected(code: "PayloadTooLarge")).state == .failedPermanent)
        let provider = map(.retry(.provider, code: "ServiceUnavailable", after: .seconds(30)))
        #expect(provider.state == .retryWait)
        #expect(provider.refundAttempt)
        #expect((provider.retryAfterSeconds ?? 0) >= 30)
        let safe = map(.retry(.safe, code: "REFUSED_STREAM", after: nil))
        #expect(safe.refundAttempt && safe.retryAfterSeconds == 0)
        #expect(map(.retry(.recipient, code: "TooManyRequests", after: nil), attempts: 1).state == .retryWait)
        #expect(!map(.retry(.recipient, code: "TooManyRequests", after: nil), attempts: 1).refundAttempt)
        let exhausted = map(.retry(.recipient, code: "TooManyRequests", after: nil), attempts: 3)
        #expect(exhausted.state == .failedPermanent)
        #expect(exhausted.code == "attempts_exhausted:TooManyRequests")
        #expect(map(.ambiguous(code: "timeout")).state == .unknown)
        let halt = map(.halt(code: "InvalidProviderToken", message: "x"))
        #expect(halt.state == .retryWait && halt.refundAttempt)
        #expect(halt.deactivate == nil)
    }

    @Test("resend policy retries ambiguous sends and charges the attempt")
    func resendPolicy() {
        var random = SeededRandom(state: 2)
        let mapper = OutcomeMapper(maxAttempts: 3, ambiguousPolicy: .resend)
        let outcome = mapper.map(.ambiguous(code: "timeout"), seq: 1, deviceID: 1, attempts: 1, using: &random)
        #expect(outcome.state == .retryWait)
        #expect(!outcome.refundAttempt)
    }

    @Test("full-jitter backoff stays under min(cap, base·2^n), honours Retry-After, and is not synchronised")
    func backoff() {
        var random = SeededRandom(state: 42)
        let backoff = Backoff(base: .seconds(1), cap: .seconds(10))
        var delays: [Duration] = []
        for attempt in 1...8 {
            let delay = backoff.delay(attempt: attempt, using: &random)
            let ceiling = min(Duration.seconds(10), .seconds(1 << (attempt - 1)))
            #expect(delay <= ceiling)
            #expect(delay >= .zero)
            delays.append(delay)
        }
        #expect(Set(delays).count > 4)
        #expect(backoff.delay(attempt: 1, retryAfter: .seconds(60), using: &random) == .seconds(60))
    }
}
