/// Why reading the feedback service failed.
public enum LegacyAPNSFeedbackError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Connecting, the TLS handshake or the connection failed.
    case connectFailed(String)
    /// The service did not finish within the timeout (after this many complete tuples).
    case timedOut(completeTuples: Int)
    /// The stream ended inside a tuple (the tuples before it were complete).
    case truncated(completeTuples: Int)

    public var description: String {
        switch self {
        case .connectFailed(let why): return "cannot reach the feedback service: \(why)"
        case .timedOut(let count): return "the feedback service did not finish in time (after \(count) complete tuple(s))"
        case .truncated(let count): return "the feedback stream ended inside a tuple (after \(count) complete tuple(s))"
        }
    }
}
