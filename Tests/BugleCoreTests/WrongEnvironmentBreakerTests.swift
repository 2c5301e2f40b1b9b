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

    @Test("a delivery confirms the environment; later BadDeviceToken answers pass through")
    func deliveryConfirms() {
        var breaker = WrongEnvironmentBreaker(threshold: 3)
        let bad = SendOutcome.invalidToken(code: "BadDeviceToken", invalidSince: nil)
        #expect(breaker.observe(bad, seq: 1) == .hold)
        #expect(breaker.observe(.delivered(providerMessageID: nil), seq: 2) == nil)
        for seq in 3..<13 { #expect(breaker.observe(bad, seq: Int64(seq)) == nil) }
        #expect(breaker.observe(.invalidToken(code: "Unregistered", invalidSince: nil), seq: 20) == nil)
    }
}
