import BugleCore

/// A provider lane behind its ``LanePacer``: every send waits for the pacer first and reports its outcome
/// back, so rate, concurrency and pauses hold for the lane as a whole.
public struct PacedProvider: PushProvider {
    /// The lane that sends.
    public let inner: any PushProvider
    /// Its pacer.
    public let pacer: LanePacer

    /// Wraps a lane.
    /// - Parameters:
    ///   - inner: The lane.
    ///   - pacer: Its pacer.
    public init(_ inner: any PushProvider, pacer: LanePacer) {
        self.inner = inner
        self.pacer = pacer
    }

    public var kind: ProviderKind { inner.kind }

    public var isAcceptingWork: Bool { pacer.isAcceptingWork && inner.isAcceptingWork }

    public func prepare() async { await inner.prepare() }

    public func send(_ request: PushRequest) async -> SendOutcome {
        await pacer.acquire()
        return pacer.release(after: await inner.send(request))
    }

    public func startSend(_ request: PushRequest, completion: @escaping @Sendable (SendOutcome) -> Void) -> Bool {
        guard pacer.tryAcquire() else { return false }
        let pacer = self.pacer
        let started = inner.startSend(request) { outcome in completion(pacer.release(after: outcome)) }
        if !started { pacer.cancelAcquire() }
        return started
    }

    public func shutdown() async {
        await inner.shutdown()
    }
}
