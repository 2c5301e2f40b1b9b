/// An OAuth2 access token and how long it lives from the moment it was issued.
public struct FCMAccessToken: Sendable, Equatable {
    /// The bearer value (never logged).
    public var value: String
    /// `expires_in`.
    public var lifetime: Duration

    /// Creates a token.
    /// - Parameters:
    ///   - value: The bearer value.
    ///   - lifetime: Its lifetime.
    public init(value: String, lifetime: Duration) {
        self.value = value
        self.lifetime = lifetime
    }
}

/// Where a lane's access tokens come from, for messages.
public enum FCMTokenSource: Sendable, Equatable {
    /// The service account's `token_uri`.
    case tokenEndpoint
    /// Google Cloud's metadata server at this address.
    case metadataServer(String)
    /// Workload identity federation: an external subject token exchanged at Google's STS (and, with impersonation,
    /// IAM credentials).
    case federation
}

/// Why no access token could be had.
public enum FCMAuthError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The source refused (`invalid_grant`, `invalid_client`, no service account attached, …): permanent.
    case rejected(String, from: FCMTokenSource = .tokenEndpoint)
    /// The source could not be reached or failed transiently (5xx, 429, connection): retry later.
    case unavailable(String, from: FCMTokenSource = .tokenEndpoint)

    public var description: String {
        switch self {
        case .rejected(let message, .tokenEndpoint): return "the OAuth2 token endpoint refused the service account: \(message)"
        case .unavailable(let message, .tokenEndpoint): return "the OAuth2 token endpoint is unavailable: \(message)"
        case .rejected(let message, .metadataServer(let address)): return "the metadata server at \(address) gave no access token: \(message)"
        case .unavailable(let message, .metadataServer(let address)): return "the metadata server at \(address) is unavailable: \(message)"
        case .rejected(let message, .federation): return "workload identity federation gave no access token: \(message)"
        case .unavailable(let message, .federation): return "workload identity federation is unavailable: \(message)"
        }
    }
}

/// Something that gets a fresh access token (the token endpoint, the metadata server, or a test double).
public protocol FCMAccessTokenFetching: Sendable {
    /// Fetches a new token.
    /// - Throws: ``FCMAuthError``.
    func fetch() async throws(FCMAuthError) -> FCMAccessToken
}
