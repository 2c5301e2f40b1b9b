@testable import BugleRunner
import BugleCore
import Testing

@Suite("Lost-answer breaker: 2 W requests lost in a row on one lane halt the run")
struct LostAnswerBreakerTests {
    static let lost = SendOutcome.ambiguous(code: "timeout")

    @Test("trips once, at exactly 2 W lost in a row, naming the lane")
    func tripsAtTwiceTheWindow() {
        var breaker = LostAnswerBreaker(window: 10)
        #expect(breaker.threshold == 20)
        for _ in 1..<20 { #expect(breaker.observe(Self.lost, lane: .apns) == nil) }
        let message = breaker.observe(Self.lost, lane: .apns)
        #expect(message?.hasPrefix("the last 20 APNs requests were all lost") == true, "\(message ?? "nil")")
        // Past the threshold it does not trip again (the run is already stopping).
        #expect(breaker.observe(Self.lost, lane: .apns) == nil)
    }

    @Test("any answer from the provider starts the count again; a safe retry or a halt does not")
    func answersReset() {
        let answers: [SendOutcome] = [
            .delivered(providerMessageID: nil), .invalidToken(code: "Unregistered", invalidSince: nil), .rejected(code: "PayloadTooLarge"),
            .retry(.provider, code: "TooManyRequests", after: nil), .retry(.recipient, code: "InternalServerError", after: nil),
        ]
        for answer in answers {
            var breaker = LostAnswerBreaker(window: 5)
            for _ in 1..<10 { _ = breaker.observe(Self.lost, lane: .fcm) }
            _ = breaker.observe(answer, lane: .fcm)
            for _ in 1..<10 { #expect(breaker.observe(Self.lost, lane: .fcm) == nil, "\(answer)") }
            #expect(breaker.observe(Self.lost, lane: .fcm) != nil, "\(answer)")
        }
        for notAnAnswer: SendOutcome in [.retry(.safe, code: "refused_stream", after: nil), .halt(code: "X", message: "y")] {
            var breaker = LostAnswerBreaker(window: 5)
            for _ in 1..<10 { _ = breaker.observe(Self.lost, lane: .fcm) }
            _ = breaker.observe(notAnAnswer, lane: .fcm)
            #expect(breaker.observe(Self.lost, lane: .fcm) != nil, "\(notAnAnswer)")
        }
    }

    @Test("lanes count apart: one lane's deliveries do not hide another's losses")
    func lanesApart() {
        var breaker = LostAnswerBreaker(window: 3)
        var tripped: String?
        for _ in 1...6 {
            #expect(breaker.observe(.delivered(providerMessageID: nil), lane: .fcm) == nil)
            tripped = breaker.observe(Self.lost, lane: .legacyAPNs) ?? tripped
        }
        #expect(tripped?.hasPrefix("the last 6 legacy APNs requests were all lost") == true)
    }
}
