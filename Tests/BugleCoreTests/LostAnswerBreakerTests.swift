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
        for seq in Int64(1)..<20 { #expect(breaker.observe(Self.lost, lane: .apns, seq: seq) == nil) }
        let message = breaker.observe(Self.lost, lane: .apns, seq: 20)
        #expect(message?.hasPrefix("the last 20 APNs requests were all lost") == true, "\(message ?? "nil")")
        // Past the threshold it does not trip again (the run is already stopping).
        #expect(breaker.observe(Self.lost, lane: .apns, seq: 21) == nil)
    }

    @Test("any answer from the provider starts the count again; a safe retry or a halt does not")
    func answersReset() {
        let answers: [SendOutcome] = [
            .delivered(providerMessageID: nil), .invalidToken(code: "Unregistered", invalidSince: nil), .rejected(code: "PayloadTooLarge"),
            .retry(.provider, code: "TooManyRequests", after: nil), .retry(.recipient, code: "InternalServerError", after: nil),
        ]
        for answer in answers {
            var breaker = LostAnswerBreaker(window: 5)
            for seq in Int64(1)..<10 { _ = breaker.observe(Self.lost, lane: .fcm, seq: seq) }
            _ = breaker.observe(answer, lane: .fcm, seq: 100)
            for seq in Int64(11)..<20 { #expect(breaker.observe(Self.lost, lane: .fcm, seq: seq) == nil, "\(answer)") }
            #expect(breaker.observe(Self.lost, lane: .fcm, seq: 20) != nil, "\(answer)")
        }
        for notAnAnswer: SendOutcome in [.retry(.safe, code: "refused_stream", after: nil), .halt(code: "X", message: "y")] {
            var breaker = LostAnswerBreaker(window: 5)
            for seq in Int64(1)..<10 { _ = breaker.observe(Self.lost, lane: .fcm, seq: seq) }
            _ = breaker.observe(notAnAnswer, lane: .fcm, seq: 100)
            #expect(breaker.observe(Self.lost, lane: .fcm, seq: 10) != nil, "\(notAnAnswer)")
        }
    }

    @Test("lanes count apart: one lane's deliveries do not hide another's losses")
    func lanesApart() {
        var breaker = LostAnswerBreaker(window: 3)
        var tripped: String?
        for seq in Int64(1)...6 {
            #expect(breaker.observe(.delivered(providerMessageID: nil), lane: .fcm, seq: 100 + seq) == nil)
            tripped = breaker.observe(Self.lost, lane: .legacyAPNs, seq: seq) ?? tripped
        }
        #expect(tripped?.hasPrefix("the last 6 legacy APNs requests were all lost") == true)
    }

    @Test("resends lost again: trips once 20 were, more than were answered; a cut whose resends go through never trips")
    func resendsLostAgain() {
        let delivered = SendOutcome.delivered(providerMessageID: nil)
        // A path that loses most answers but lets one through now and then: nothing is lost 2 W in a row.
        var failing = LostAnswerBreaker(window: 1_000)
        var message: String?
        for round in 0..<5 where message == nil {
            for seq in Int64(0)..<30 where message == nil {
                if seq == 29 { _ = failing.observe(delivered, lane: .apns, seq: 1_000 + Int64(round)); continue }
                message = failing.observe(Self.lost, lane: .apns, seq: seq)
            }
        }
        #expect(message?.hasPrefix("20 APNs requests sent again after a lost answer were lost again, and only 0") == true, "\(message ?? "nil")")
        // One cut loses a window; its resends are answered; later cuts lose other recipients: never trips.
        var healthy = LostAnswerBreaker(window: 100)
        for cut in Int64(0)..<20 {
            for seq in (cut * 100)..<(cut * 100 + 100) { #expect(healthy.observe(Self.lost, lane: .apns, seq: seq) == nil) }
            for seq in (cut * 100)..<(cut * 100 + 100) { #expect(healthy.observe(delivered, lane: .apns, seq: seq) == nil) }
        }
        // Resends lost again now and then, far fewer than those answered: no trip either.
        for seq in Int64(0)..<25 { #expect(healthy.observe(Self.lost, lane: .apns, seq: seq) == nil) }
    }

    @Test("connections cut together: a burst of resends lost again before any is answered does not trip while most requests are answered")
    func cutsTogether() {
        let delivered = SendOutcome.delivered(providerMessageID: nil)
        var breaker = LostAnswerBreaker(window: 400)
        for seq in Int64(0)..<1_300 { #expect(breaker.observe(delivered, lane: .apns, seq: seq) == nil) }
        // Connection A is cut with 50 open; their resends go to connection B, cut with them open, before any is answered.
        for seq in Int64(2_000)..<2_050 { #expect(breaker.observe(Self.lost, lane: .apns, seq: seq) == nil) }
        for seq in Int64(2_000)..<2_050 { #expect(breaker.observe(Self.lost, lane: .apns, seq: seq) == nil) }
        // The same burst on a lane losing most of what it sends trips.
        var failing = LostAnswerBreaker(window: 400)
        for seq in Int64(0)..<10 { #expect(failing.observe(delivered, lane: .apns, seq: seq) == nil) }
        var message: String?
        for seq in Int64(2_000)..<2_050 { message = failing.observe(Self.lost, lane: .apns, seq: seq) ?? message }
        for seq in Int64(2_000)..<2_050 where message == nil { message = failing.observe(Self.lost, lane: .apns, seq: seq) }
        #expect(message?.hasPrefix("20 APNs requests sent again after a lost answer were lost again") == true, "\(message ?? "nil")")
    }

    @Test("probing (a resume after lost answers): a lane trips at the probe's size lost in a row until its first answer, then at 2 W")
    func probe() {
        var stillFailing = LostAnswerBreaker(window: 100, probe: 20)
        for seq in Int64(1)..<20 { #expect(stillFailing.observe(Self.lost, lane: .apns, seq: seq) == nil) }
        #expect(stillFailing.observe(Self.lost, lane: .apns, seq: 20)?.hasPrefix("the run was resumed after its answers were lost, and its first 20 APNs") == true)
        var recovered = LostAnswerBreaker(window: 100, probe: 20)
        #expect(recovered.observe(.delivered(providerMessageID: nil), lane: .apns, seq: 1) == nil)
        for seq in Int64(2)..<201 { #expect(recovered.observe(Self.lost, lane: .apns, seq: seq) == nil) }
        #expect(recovered.observe(Self.lost, lane: .apns, seq: 201)?.hasPrefix("the last 200 APNs requests were all lost") == true)
    }
}
