import BugleCore
import Metrics

/// A lane that reports every send to swift-metrics (exported as Prometheus text by `--metrics-port`):
///
/// | metric | type | labels |
/// |---|---|---|
/// | `bugle_sends_total` | counter | `provider`, `outcome` (delivered, invalid_token, rejected, retry, ambiguous, halt) |
/// | `bugle_retries_total` | counter | `provider`, `code` |
/// | `bugle_in_flight` | gauge | `provider` |
/// | `bugle_rate_limit_per_second` | gauge | `provider` (0 = unpaced) |
/// | `bugle_send_duration_seconds` | histogram | `provider` |
///
/// Without a metrics backend (no `--metrics-port`) swift-metrics discards everything at almost no cost.
public struct InstrumentedProvider: PushProvider {
    private let inner: any PushProvider
    private let pacer: LanePacer?
    private let outcomes: [String: Counter]
    private let inFlight: Meter
    private let rate: Gauge
    private let duration: Timer
    private let provider: String

    /// Wraps a lane.
    /// - Parameters:
    ///   - inner: The lane (inside its ``PacedProvider``, so only requests on the wire are counted and timed).
    ///   - pacer: Its pacer, whose rate in force is exported.
    public init(_ inner: any PushProvider, pacer: LanePacer?) {
        self.inner = inner
        self.pacer = pacer
        let provider = inner.kind.rawValue
        self.provider = provider
        var outcomes: [String: Counter] = [:]
        for outcome in ["delivered", "invalid_token", "rejected", "retry", "ambiguous", "halt"] {
            outcomes[outcome] = Counter(label: "bugle_sends_total", dimensions: [("provider", provider), ("outcome", outcome)])
        }
        self.outcomes = outcomes
        self.inFlight = Meter(label: "bugle_in_flight", dimensions: [("provider", provider)])
        self.rate = Gauge(label: "bugle_rate_limit_per_second", dimensions: [("provider", provider)])
        self.duration = Timer(label: "bugle_send_duration_seconds", dimensions: [("provider", provider)], preferredDisplayUnit: .seconds)
        self.rate.record(pacer?.snapshot.rate ?? 0)
    }

    public var kind: ProviderKind { inner.kind }

    public var isAcceptingWork: Bool { inner.isAcceptingWork }

    public var claimCapacity: Int? { inner.claimCapacity }

    public func prepare() async { await inner.prepare() }


    public func send(_ request: PushRequest) async -> SendOutcome {
        inFlight.increment()
        let start = ContinuousClock.now
        let outcome = await inner.send(request)
        record(outcome, since: start)
        return outcome
    }

    public func withdrawWaitingSends() { inner.withdrawWaitingSends() }

    public func startSend(_ request: PushRequest, completion: @escaping @Sendable (SendOutcome) -> Void) -> Bool {
        inFlight.increment()
        let start = ContinuousClock.now
        let started = inner.startSend(request) { [self] outcome in
            record(outcome, since: start)
            completion(outcome)
        }
        if !started { inFlight.decrement() }
        return started
    }

    /// Counts an answered send (the in-flight gauge was raised when it started).
    private func record(_ outcome: SendOutcome, since start: ContinuousClock.Instant) {
        duration.record(duration: ContinuousClock.now - start)
        inFlight.decrement()
        let name: String
        switch outcome {
        case .delivered: name = "delivered"
        case .invalidToken: name = "invalid_token"
        case .rejected: name = "rejected"
        case .retry(_, let code, _):
            name = "retry"
            Counter(label: "bugle_retries_total", dimensions: [("provider", provider), ("code", code)]).increment()
        case .ambiguous: name = "ambiguous"
        case .halt: name = "halt"
        }
        outcomes[name]?.increment()
        if let pacer { rate.record(pacer.snapshot.rate ?? 0) }
    }

    public func shutdown() async {
        await inner.shutdown()
    }
}
