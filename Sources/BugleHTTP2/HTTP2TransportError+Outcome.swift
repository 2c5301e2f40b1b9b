import BugleCore

extension HTTP2TransportError {
    /// True when the server certainly did not process the request, so sending it again at once is safe.
    public var isSafeToRetry: Bool {
        switch self {
        case .refused, .notWritten, .goingAway: return true
        case .timeout, .lostAfterWrite, .shutdown, .certificateRejected, .proxyRefused: return false
        }
    }

    /// The outcome of a request that failed without an answer, for a lane that makes no immediate retry itself: nil
    /// when the server certainly did not process it (send it again), else what ``outcome`` says (any other error is
    /// ambiguous).
    /// - Parameter error: What the request failed with.
    public static func outcomeWithoutRetry(of error: any Error) -> SendOutcome? {
        guard let error = error as? HTTP2TransportError else { return .ambiguous(code: "transport_error") }
        return error.isSafeToRetry ? nil : error.outcome
    }

    /// The provider-neutral outcome once no further immediate retry is made: unwritten requests are free
    /// retries, written-but-unanswered ones are ambiguous (the campaign's policy decides).
    public var outcome: SendOutcome {
        switch self {
        case .refused: return .retry(.safe, code: "refused_stream", after: nil)
        // A connection that went away before answering anything is the provider's failure (a server closing every
        // new connection would otherwise be retried for ever); one that answered before is routine (drained).
        case .goingAway(_, _, let answered):
            return answered ? .retry(.safe, code: "goaway", after: nil) : .retry(.provider, code: "goaway_unanswered", after: nil)
        case .notWritten: return .retry(.safe, code: "not_written", after: nil)
        case .timeout(let written): return written ? .ambiguous(code: "timeout") : .retry(.safe, code: "timeout_before_write", after: nil)
        case .lostAfterWrite: return .ambiguous(code: "connection_lost")
        case .shutdown: return .retry(.safe, code: "shutdown", after: nil)
        case .certificateRejected(let why): return .halt(code: "TLSCertificateRejected", message: why)
        case .proxyRefused(let why): return .halt(code: "ProxyRefused", message: why)
        }
    }
}
