@testable import BugleRunner
import BugleCore
import Testing

@Suite("Provider-outage breaker: a lane answering only provider errors for the limit halts the run")
struct ProviderOutageBreakerTests {
    static let unavailable = SendOutcome.retry(.provider, code: "ServiceUnavailable", after: nil)
    static let start = ContinuousClock.now

    @Test("trips once the lane's provider errors have lasted the limit, naming the lane, the time and the last code")
    func tripsAtTheLimit() {
        var breaker = ProviderOutageBreaker(limit: .seconds(600))
        #expect(breaker.observe(Self.unavailable, lane: .apns, now: Self.start) == nil)
        #expect(breaker.observe(Self.unavailable, lane: .apns, now: Self.start + .seconds(599)) == nil)
        // Another lane's trouble has its own clock.
        #expect(breaker.observe(Self.unavailable, lane: .fcm, now: Self.start + .seconds(599)) == nil)
        let message = breaker.observe(.retry(.provider, code: "InternalServerError", after: nil), lane: .apns, now: Self.start + .seconds(600))
        #expect(message?.hasPrefix("APNs has answered nothing but provider errors for 10 min (the last: InternalServerError)") == true, "\(message ?? "nil")")
        #expect(breaker.observe(Self.unavailable, lane: .fcm, now: Self.start + .seconds(1_199)) != nil)
    }

    @Test("an answer that shows the provider processing requests starts the clock again; a recipient's retry, a safe retry, a lost answer or a halt does not", arguments: [
        (SendOutcome.delivered(providerMessageID: nil), true), (.invalidToken(code: "Unregistered", invalidSince: nil), true),
        (.rejected(code: "BadPayload"), true), (.retry(.recipient, code: "InternalServerError", after: nil), false),
        (.retry(.safe, code: "REFUSED_STREAM", after: nil), false), (.ambiguous(code: "timeout"), false),
        (.halt(code: "BadTopic", message: "x"), false),
    ])
    func answersReset(_ answer: SendOutcome, _ resets: Bool) {
        var breaker = ProviderOutageBreaker(limit: .seconds(10))
        _ = breaker.observe(Self.unavailable, lane: .fcm, now: Self.start)
        _ = breaker.observe(answer, lane: .fcm, now: Self.start + .seconds(5))
        let tripped = breaker.observe(Self.unavailable, lane: .fcm, now: Self.start + .seconds(11)) != nil
        #expect(tripped == !resets, "\(answer)")
    }
}
