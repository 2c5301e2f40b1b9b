import BugleCore
import Foundation

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

    public var claimCapacity: Int? {
        switch (pacer.claimCapacity, inner.claimCapacity) {
        case (let own?, let inner?): min(own, inner)
        case (let own, let inner): own ?? inner
        }
    }

    /// Opens the pacer again (a new run, or the same run going on after a stop) and readies the lane.
    public func prepare() async {
        pacer.reopen()
        await inner.prepare()
    }

    /// Waits for the pacer, then sends; ``SendOutcome/withdrawn`` when the wait was withdrawn (nothing sent).
    public func send(_ request: PushRequest) async -> SendOutcome {
        guard await pacer.acquire() else { return .withdrawn }
        if let unsent = mayNotBeWritten(request) {
            // The wait for the rate outlasted what the request allows: the token and the slot go to the next send.
            pacer.cancelAcquire()
            return unsent
        }
        return pacer.release(after: await inner.send(request))
    }

    /// Why a request that waited may no longer be written, as its unsent outcome: the worker lost its lease meanwhile
    /// (frozen past it: the recipient is another worker's now), or the device's quiet hours began. Nil: it may go.
    private func mayNotBeWritten(_ request: PushRequest) -> SendOutcome? {
        if !request.gateIsOpen { return .withdrawn }
        if let sendBy = request.sendBy, Date().timeIntervalSince1970 >= sendBy { return .quietHoursBegan }
        return nil
    }

    public func withdrawWaitingSends() { pacer.withdrawWaiting() }

    public func startSend(_ request: PushRequest, completion: @escaping @Sendable (SendOutcome) -> Void) -> Bool {
        if let unsent = mayNotBeWritten(request) {
            // A parked send that may no longer go: answered at once, unsent, taking no slot.
            completion(unsent)
            return true
        }
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
