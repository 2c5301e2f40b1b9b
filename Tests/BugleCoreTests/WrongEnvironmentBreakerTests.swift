@testable import BugleRunner
import BugleCore
import Testing

@Suite("Wrong-environment breaker")
struct WrongEnvironmentBreakerTests {
    @Test("trips after the threshold of BadDeviceToken answers with no delivery")
    func trips() {
        var breaker = WrongEnvironmentBreaker(threshold: 3)
        let bad = SendOutcome.invalidToken(code: "BadDeviceToken", invalidSince: nil)
        #expect(breaker.observe(bad) == .hold)
        #expect(breaker.observe(bad) == .hold)
        guard case .trip = breaker.observe(bad) else {
            Issue.record("expected a trip")
            return
        }
    }

    @Test("a delivery confirms the environment; later BadDeviceToken answers pass through")
    func deliveryConfirms() {
        var breaker = WrongEnvironmentBreaker(threshold: 3)
        let bad = SendOutcome.invalidToken(code: "BadDeviceToken", invalidSince: nil)
        #expect(breaker.observe(bad) == .hold)
        #expect(breaker.observe(.delivered(providerMessageID: nil)) == nil)
        for _ in 0..<10 { #expect(breaker.observe(bad) == nil) }
        #expect(breaker.observe(.invalidToken(code: "Unregistered", invalidSince: nil)) == nil)
    }
}
