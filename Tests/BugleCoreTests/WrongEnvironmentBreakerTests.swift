@testable import BugleRunner
import BugleCore
import Testing

@Suite("Wrong-environment breaker")
struct WrongEnvironmentBreakerTests {
    @Test("trips after the threshold of different tokens answered BadDeviceToken with no delivery; repeats do not count")
    func trips() {
        var breaker = WrongEnvironmentBreaker(threshold: 3)
        let bad = SendOutcome.invalidToken(code: "BadDeviceToken", invalidSince: nil)
        #expect(breaker.observe(bad, seq: 1) == .hold)
        #expect(breaker.observe(bad, seq: 1) == .hold)  // the same recipient re-sent: not a second token
        #expect(breaker.observe(bad, seq: 2) == .hold)
        guard case .trip(let code, let message) = breaker.observe(bad, seq: 3) else {
            Issue.record("expected a trip")
            return
        }
        #expect(code == "BadDeviceToken")
        #expect(message.hasPrefix("3 different device tokens were answered BadDeviceToken"))
        #expect(message.contains("other APNs environment"))
    }

    @Test("DeviceTokenNotForTopic for every token is held and trips with its own code and cause; the code most held names the trip")
    func wrongTopic() {
        var breaker = WrongEnvironmentBreaker(threshold: 3)
        let notForTopic = SendOutcome.invalidToken(code: "DeviceTokenNotForTopic", invalidSince: nil)
        let bad = SendOutcome.invalidToken(code: "BadDeviceToken", invalidSince: nil)
        #expect(breaker.observe(notForTopic, seq: 1) == .hold)
        #expect(breaker.observe(bad, seq: 2) == .hold)
        guard case .trip(let code, let message) = breaker.observe(notForTopic, seq: 3) else {
            Issue.record("expected a trip")
            return
        }
        #expect(code == "DeviceTokenNotForTopic")
        #expect(message.contains("is not the app these device tokens were registered for"), "\(message)")
    }

    @Test("a lane with too few tokens to judge: one or a few bad tokens answered three times are let through to be deactivated; five or more halt")
    func smallSamples() {
        let bad = SendOutcome.invalidToken(code: "BadDeviceToken", invalidSince: nil)
        var lone = WrongEnvironmentBreaker()
        #expect(lone.observe(bad, seq: 7) == .hold)
        #expect(lone.observe(bad, seq: 7) == .hold)
        #expect(lone.observe(bad, seq: 7) == nil)
        var several = WrongEnvironmentBreaker()
        for seq in 1...5 { #expect(several.observe(bad, seq: Int64(seq)) == .hold) }
        #expect(several.observe(bad, seq: 1) == .hold)
        guard case .trip = several.observe(bad, seq: 1) else {
            Issue.record("five different tokens, none delivered, must halt")
            return
        }
    }

    @Test("the lane is judged on its first answers: 90% or fewer held confirms it once the window is answered; later BadDeviceToken answers pass through")
    func windowConfirms() {
        var breaker = WrongEnvironmentBreaker(threshold: 3, window: 10)
        let bad = SendOutcome.invalidToken(code: "BadDeviceToken", invalidSince: nil)
        #expect(breaker.observe(bad, seq: 1) == .hold)
        #expect(breaker.observe(.delivered(providerMessageID: nil), seq: 2) == nil)
        #expect(breaker.observe(bad, seq: 3) == .hold)  // one delivery no longer confirms the lane
        for seq in 4..<11 { #expect(breaker.observe(.delivered(providerMessageID: nil), seq: Int64(seq)) == nil) }
        #expect(breaker.confirmedHealthy)
        for seq in 11..<21 { #expect(breaker.observe(bad, seq: Int64(seq)) == nil) }
        #expect(breaker.observe(bad, seq: 1) == nil)  // a held one re-sent is deactivated now
        #expect(breaker.observe(.invalidToken(code: "Unregistered", invalidSince: nil), seq: 30) == nil)
    }

    @Test("a few deliveries among held tokens (over 90% held) still trip, and the message counts the deliveries")
    func fewDeliveriesTrip() {
        var breaker = WrongEnvironmentBreaker(threshold: 50)
        let bad = SendOutcome.invalidToken(code: "BadDeviceToken", invalidSince: nil)
        for seq in 1...3 { #expect(breaker.observe(.delivered(providerMessageID: nil), seq: Int64(seq)) == nil) }
        for seq in 4..<53 { #expect(breaker.observe(bad, seq: Int64(seq)) == .hold) }
        guard case .trip(let code, let message) = breaker.observe(bad, seq: 53) else {
            Issue.record("50 held of 53 answered must trip")
            return
        }
        #expect(code == "BadDeviceToken")
        #expect(message.hasPrefix("50 of the first 53 different device tokens answered were answered BadDeviceToken (3 delivered)"), "\(message)")
        // 50 held among 60 answered (83%) is a real share of dead tokens, not a wrong environment.
        var mixed = WrongEnvironmentBreaker(threshold: 50)
        for seq in 1...10 { _ = mixed.observe(.delivered(providerMessageID: nil), seq: Int64(seq)) }
        for seq in 11...60 { #expect(mixed.observe(bad, seq: Int64(seq)) == .hold) }
    }

    @Test("a small lane with deliveries: a held token answered a third time judges the lane on what it has")
    func smallLaneWithDeliveries() {
        let bad = SendOutcome.invalidToken(code: "BadDeviceToken", invalidSince: nil)
        var healthy = WrongEnvironmentBreaker()
        for seq in 1...20 { _ = healthy.observe(.delivered(providerMessageID: nil), seq: Int64(seq)) }
        for seq in 21...26 { #expect(healthy.observe(bad, seq: Int64(seq)) == .hold) }
        #expect(healthy.observe(bad, seq: 21) == .hold)
        #expect(healthy.observe(bad, seq: 21) == nil)
        #expect(healthy.confirmedHealthy)
        var wrong = WrongEnvironmentBreaker()
        _ = wrong.observe(.delivered(providerMessageID: nil), seq: 1)
        for seq in 2...12 { #expect(wrong.observe(bad, seq: Int64(seq)) == .hold) }
        #expect(wrong.observe(bad, seq: 2) == .hold)
        guard case .trip = wrong.observe(bad, seq: 2) else {
            Issue.record("11 held of 12 answered must halt a small lane")
            return
        }
    }
}
