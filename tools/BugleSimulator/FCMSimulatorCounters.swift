/// Live counters of an ``FCMSimulator`` (a snapshot; read with ``FCMSimulator/counters()``).
public struct FCMSimulatorCounters: Sendable, Equatable, Encodable {
    /// Requests that reached the send route (any answer).
    public var sendRequests: Int = 0
    /// Messages accepted for delivery (200, not `validate_only`).
    public var accepted: Int = 0
    /// `validate_only` requests answered 200 (never recorded as delivered).
    public var validateOnly: Int = 0
    /// Error answers of the send route by `FcmError` code, else by canonical status (`"UNREGISTERED"`,
    /// `"INVALID_ARGUMENT"`, `"QUOTA_EXCEEDED"`, `"UNAUTHENTICATED"`, `"PERMISSION_DENIED"`, `"UNAVAILABLE"`,
    /// `"INTERNAL"`, ...). Unknown paths count as `"NOT_FOUND"`, wrong methods as `"METHOD_NOT_ALLOWED"`.
    public var rejectedByReason: [String: Int] = [:]
    /// Access tokens granted by `POST /token`.
    public var tokenGrants: Int = 0
    /// Token exchanges granted by the STS endpoint (`POST /v1/token`, federation).
    public var stsExchanges: Int = 0
    /// Access tokens granted by IAM's `generateAccessToken` (federation with impersonation).
    public var impersonations: Int = 0
    /// `POST /token` errors by OAuth error (`"invalid_grant"`, `"invalid_scope"`, `"invalid_client"`, ...).
    public var tokenErrors: [String: Int] = [:]
    /// Send requests answered 401 for a missing, unknown or expired access token.
    public var unauthenticated: Int = 0
    /// Send requests answered 429 because the rolling quota was full (scripted `4290` answers not included).
    public var quotaRejections: Int = 0
    /// Send requests deliberately never answered (`fa11`).
    public var hung: Int = 0
    /// TLS connections accepted.
    public var connections: Int = 0
    /// Connections currently open.
    public var openConnections: Int = 0
    /// Connections that negotiated HTTP/2 (the rest speak HTTP/1.1).
    public var http2Connections: Int = 0

    /// Total error answers of the send route.
    public var rejected: Int { rejectedByReason.values.reduce(0, +) }

    /// Creates zeroed counters.
    public init() {}
}
