/// One request that reached the FCM send route (`/v1/projects/{id}/messages:send`), whatever its answer:
/// the simulator's log of when each send arrived and how it was answered (``FCMSimulator/requestTimes()``),
/// so a test can check for example that no request came before a `Retry-After` had elapsed.
public struct FCMRequestEntry: Sendable, Equatable {
    /// Simulator wall-clock time of arrival, seconds since 1970.
    public var time: Double
    /// The HTTP status answered (0 when the request is never answered: the `fa11` script).
    public var status: Int
    /// The `FcmError` error code when the answer carried one (`UNREGISTERED`, `QUOTA_EXCEEDED`, ...),
    /// else the canonical status of an error (`UNAUTHENTICATED`, `PERMISSION_DENIED`, ...); nil for 200.
    public var reason: String?
    /// The message target (token, topic, condition or FID) when the body got that far.
    public var target: String?
    /// `Retry-After` seconds answered, if any.
    public var retryAfter: Int?
    /// Whether the request asked for `validate_only`.
    public var validateOnly: Bool
    /// Connection that carried it (1-based, in accept order).
    public var connectionID: Int

    /// Creates an entry.
    /// - Parameters:
    ///   - time: Arrival time.
    ///   - status: Answered status.
    ///   - reason: Error code or canonical status.
    ///   - target: Message target.
    ///   - retryAfter: `Retry-After` seconds.
    ///   - validateOnly: `validate_only` flag.
    ///   - connectionID: Connection id.
    public init(
        time: Double,
        status: Int,
        reason: String?,
        target: String?,
        retryAfter: Int?,
        validateOnly: Bool,
        connectionID: Int
    ) {
        self.time = time
        self.status = status
        self.reason = reason
        self.target = target
        self.retryAfter = retryAfter
        self.validateOnly = validateOnly
        self.connectionID = connectionID
    }
}
