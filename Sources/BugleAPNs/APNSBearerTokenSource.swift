/// Supplies provider JWTs to the APNs lane (implemented by ``APNSAuthenticationTokenSigner``).
public protocol APNSBearerTokenSource: Sendable {
    /// The token to send now (cached; minted when due). Never suspends: sends call it on their fast path.
    func currentToken() -> String
    /// Called after APNs answered `ExpiredProviderToken` for `rejected`.
    /// - Parameter rejected: The token APNs refused.
    /// - Returns: A token to retry with (a fresh one, or one another task already refreshed), or nil when
    ///   no new token may be minted yet (the 20-minute rule).
    func tokenAfterExpiry(rejected: String) async -> String?
}
