import NIOConcurrencyHelpers

/// The token endpoint's injected outage (``FCMSimulatorConfiguration/Faults/tokenOutage``): while it lasts,
/// `POST /token` answers 503 `temporarily_unavailable`, as Google's token endpoint (or a metadata server) may during an
/// incident. A test ends it early with ``FCMSimulator/endTokenOutage()`` once it has seen what it waits for.
final class FCMTokenOutage: Sendable {
    /// Wall-clock second the outage ends (0: none).
    private let until = NIOLockedValueBox<Double>(0)

    /// Starts an outage of `seconds` at `now` (none when `seconds` is 0).
    func begin(now: Double, lasting seconds: Double) {
        until.withLockedValue { $0 = seconds > 0 ? now + seconds : 0 }
    }

    /// Ends the outage now.
    func end() {
        until.withLockedValue { $0 = 0 }
    }

    /// Whether the token endpoint is down at `now`.
    func isOn(now: Double) -> Bool {
        until.withLockedValue { now < $0 }
    }
}
