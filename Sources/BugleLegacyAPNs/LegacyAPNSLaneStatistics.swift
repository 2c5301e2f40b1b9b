/// Counters of one legacy lane, for logs, tests and the benchmark.
public struct LegacyAPNSLaneStatistics: Sendable, Equatable {
    /// Connections whose TLS handshake completed.
    public var connections = 0
    /// Connect or TLS handshake failures.
    public var connectFailures = 0
    /// Error responses received, by status name.
    public var errorResponses: [String: Int] = [:]
    /// Closes without an error response while notifications were unconfirmed.
    public var silentCloses = 0
    /// Notifications written again after the gateway discarded them.
    public var resent = 0
    /// Notifications handed back to the runner as free retries after ``LegacyAPNSProvider/Options/resendLimit``
    /// resends.
    public var resendLimitReached = 0
    /// Notifications confirmed by the quiet period or by a later error response.
    public var delivered = 0
    /// Notifications left ambiguous by a silent close.
    public var ambiguous = 0

    /// Creates zeroed counters.
    public init() {}
}
