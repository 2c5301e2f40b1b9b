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

/// Why no access token could be had.
public enum FCMAuthError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The token endpoint refused the service account (`invalid_grant`, `invalid_client`, …): permanent.
    case rejected(String)
    /// The token endpoint could not be reached or failed transiently (5xx, 429, connection): retry later.
    case unavailable(String)

    public var description: String {
        switch self {
        case .rejected(let message): return "the OAuth2 token endpoint refused the service account: \(message)"
        case .unavailable(let message): return "the OAuth2 token endpoint is unavailable: \(message)"
        }
    }
}

/// Something that trades the service account for a fresh access token (the token endpoint, or a test double).
public protocol FCMAccessTokenFetching: Sendable {
    /// Fetches a new token.
    /// - Throws: ``FCMAuthError``.
    func fetch() async throws(FCMAuthError) -> FCMAccessToken
}
