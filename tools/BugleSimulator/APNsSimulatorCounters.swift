/// Live counters of an ``APNsSimulator`` (a snapshot; read with ``APNsSimulator/counters()``).
public struct APNsSimulatorCounters: Sendable, Equatable, Encodable {
    /// Notifications answered 200.
    public var accepted: Int = 0
    /// Error answers by reason (`"Unregistered"`, `"ServiceUnavailable"`, ...).
    public var rejectedByReason: [String: Int] = [:]
    /// Streams deliberately never answered (hang fault).
    public var hung: Int = 0
    /// TLS connections accepted.
    public var connections: Int = 0
    /// Connections currently open.
    public var openConnections: Int = 0
    /// Largest number of concurrently open streams seen on any one connection.
    public var maxConcurrentStreamsObserved: Int = 0
    /// Streams refused because a client exceeded `SETTINGS_MAX_CONCURRENT_STREAMS` (each such violation
    /// is also a connection error: NIOHTTP2 answers it with GOAWAY PROTOCOL_ERROR).
    public var maxConcurrentStreamsViolations: Int = 0
    /// Largest number of streams open at once on a connection that had not yet seen a valid JWT (token auth with
    /// `streamsBeforeAuthentication`): Apple allows one.
    public var maxConcurrentStreamsBeforeAuthentication: Int = 0
    /// SETTINGS frames that changed a connection's `MAX_CONCURRENT_STREAMS` after its first: raises after
    /// authentication, drops after rejections and restorations (`streamsAfterRejection`), announced changes.
    public var streamLimitChanges: Int = 0
    /// GOAWAY frames sent by the `goAwayEvery` fault.
    public var goAwaysSent: Int = 0
    /// Connections dropped by the `dropConnectionEvery` fault.
    public var connectionsDropped: Int = 0
    /// Distinct JWTs that verified (a new token per connection counts once per connection).
    public var providerTokensAccepted: Int = 0

    /// Total error answers.
    public var rejected: Int { rejectedByReason.values.reduce(0, +) }

    /// Creates zeroed counters.
    public init() {}
}
