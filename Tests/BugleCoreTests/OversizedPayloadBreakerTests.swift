@testable import BugleRunner
import BugleCore
import Testing

@Suite("Oversized-payload breaker: a platform whose payloads render too large ten times in a row halts the run")
struct OversizedPayloadBreakerTests {
    static let tooLarge = SendOutcome.rejected(code: SkipReason.payloadTooLarge.rawValue)

    @Test("trips at the tenth local payload_too_large of one platform in a row, once, naming the platform")
    func tripsAtTheThreshold() {
        var breaker = OversizedPayloadBreaker()
        for _ in 1...9 { #expect(breaker.observe(Self.tooLarge, platform: .ios) == nil) }
        // Another platform's failures are counted apart, and its fitting payloads do not reset this one's count.
        for _ in 1...9 { #expect(breaker.observe(Self.tooLarge, platform: .android) == nil) }
        #expect(breaker.observe(.delivered(providerMessageID: nil), platform: .android) == nil)
        let message = breaker.observe(Self.tooLarge, platform: .ios)
        #expect(message?.hasPrefix("the last 10 ios payloads rendered over the platform's size limit (payload_too_large)") == true, "\(message ?? "nil")")
        // It has stopped the run: it does not trip again.
        #expect(breaker.observe(Self.tooLarge, platform: .ios) == nil)
    }

    @Test("a payload of the platform that fit (whatever its answer) starts the count again; a halt does not", arguments: [
        (SendOutcome.delivered(providerMessageID: nil), true), (.invalidToken(code: "Unregistered", invalidSince: nil), true),
        (.rejected(code: "PayloadTooLarge"), true), (.retry(.provider, code: "ServiceUnavailable", after: nil), true),
        (.retry(.safe, code: "refused_stream", after: nil), true), (.ambiguous(code: "timeout"), true),
        (.halt(code: "BadTopic", message: "x"), false),
    ])
    func fittingPayloadsReset(_ answer: SendOutcome, _ resets: Bool) {
        var breaker = OversizedPayloadBreaker()
        for _ in 1...5 { _ = breaker.observe(Self.tooLarge, platform: .web) }
        _ = breaker.observe(answer, platform: .web)
        var tripped = false
        for _ in 1...5 { tripped = breaker.observe(Self.tooLarge, platform: .web) != nil || tripped }
        #expect(tripped == !resets, "\(answer)")
    }
}
