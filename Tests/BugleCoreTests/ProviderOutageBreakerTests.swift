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
        for second in stride(from: 0, through: 599, by: 100) {
            #expect(breaker.observe(Self.unavailable, lane: .apns, now: Self.start + .seconds(second)) == nil)
        }
        // Another lane's trouble has its own clock.
        for second in stride(from: 599, through: 1_099, by: 100) {
            #expect(breaker.observe(Self.unavailable, lane: .fcm, now: Self.start + .seconds(second)) == nil)
        }
        let message = breaker.observe(.retry(.provider, code: "InternalServerError", after: nil), lane: .apns, now: Self.start + .seconds(600))
        #expect(message?.hasPrefix("APNs has processed no request for 10 min: it answered only with provider errors, or did not take the requests (the last: InternalServerError)") == true, "\(message ?? "nil")")
        #expect(breaker.observe(Self.unavailable, lane: .fcm, now: Self.start + .seconds(1_199)) != nil)
    }

    @Test("an answer that shows the provider processing requests starts the clock again; a recipient's retry, a safe retry, a lost answer or a halt does not", arguments: [
        (SendOutcome.delivered(providerMessageID: nil), true), (.invalidToken(code: "Unregistered", invalidSince: nil), true),
        (.rejected(code: "BadPayload"), true), (.retry(.recipient, code: "InternalServerError", after: nil), false),
        (.retry(.safe, code: "refused_stream", after: nil), false), (.ambiguous(code: "timeout"), false),
        (.halt(code: "BadTopic", message: "x"), false),
    ])
    func answersReset(_ answer: SendOutcome, _ resets: Bool) {
        var breaker = ProviderOutageBreaker(limit: .seconds(10))
        _ = breaker.observe(Self.unavailable, lane: .fcm, now: Self.start)
        _ = breaker.observe(answer, lane: .fcm, now: Self.start + .seconds(5))
        let tripped = breaker.observe(Self.unavailable, lane: .fcm, now: Self.start + .seconds(11)) != nil
        #expect(tripped == !resets, "\(answer)")
    }

    /// A provider that takes no request (connections refused, closed or turned away before anything is written) gives
    /// only safe retries: without counting them the run went on reconnecting for ever.
    @Test("requests the provider did not take count as trouble: a lane with only safe retries for the limit trips")
    func safeRetriesAlone() {
        var breaker = ProviderOutageBreaker(limit: .seconds(600))
        let notTaken = SendOutcome.retry(.safe, code: "not_written", after: nil)
        #expect(breaker.observe(notTaken, lane: .apns, now: Self.start) == nil)
        #expect(breaker.observe(.retry(.safe, code: "goaway", after: nil), lane: .apns, now: Self.start + .seconds(300)) == nil)
        let message = breaker.observe(notTaken, lane: .apns, now: Self.start + .seconds(600))
        #expect(message?.contains("(the last: not_written)") == true, "\(message ?? "nil")")
    }

    /// Trouble must be continuous: a lane with nothing due between two troubled answers has not been failing all along.
    @Test("a silence longer than the quiet gap between two troubled answers starts the clock again")
    func silenceRestarts() {
        var breaker = ProviderOutageBreaker(limit: .seconds(600))
        #expect(breaker.quietGap == .seconds(300))
        #expect(breaker.observe(Self.unavailable, lane: .apns, now: Self.start) == nil)
        // Nothing for 301 s (the lane had nothing due), then trouble again: a new run of trouble, not 11 min of it.
        #expect(breaker.observe(Self.unavailable, lane: .apns, now: Self.start + .seconds(301)) == nil)
        #expect(breaker.observe(Self.unavailable, lane: .apns, now: Self.start + .seconds(550)) == nil)
        #expect(breaker.observe(Self.unavailable, lane: .apns, now: Self.start + .seconds(800)) == nil)
        #expect(breaker.observe(Self.unavailable, lane: .apns, now: Self.start + .seconds(901)) != nil, "600 s of trouble since 301 s, no gap over 300 s")
        #expect(ProviderOutageBreaker(limit: .seconds(3)).quietGap == .seconds(60))
    }
}
