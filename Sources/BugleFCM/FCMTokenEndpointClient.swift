import BugleCore
import BugleHTTP2
import Foundation
import Logging
import NIOCore

/// Trades the service account for access tokens at its `token_uri` over HTTP/2
/// (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`, PROTOCOLS.md §2.5).
final class FCMTokenEndpointClient: FCMAccessTokenFetching {
    private let account: FCMServiceAccount
    private let request: FCMTokenRequest
    private let timeout: TimeAmount
    private let epochSeconds: @Sendable () -> Int64

    /// Creates a client.
    /// - Parameters:
    ///   - account: The service account.
    ///   - pool: A connection pool to the token URI's host.
    ///   - timeout: Per-request deadline.
    ///   - epochSeconds: Wall clock for `iat`.
    init(account: FCMServiceAccount, pool: HTTP2ConnectionPool, timeout: TimeAmount, epochSeconds: @escaping @Sendable () -> Int64) {
        self.account = account
        self.request = FCMTokenRequest(url: account.tokenURI, pool: pool, source: .tokenEndpoint)
        self.timeout = timeout
        self.epochSeconds = epochSeconds
    }

    func fetch() async throws(FCMAuthError) -> FCMAccessToken {
        let assertion: String
        do {
            assertion = try FCMAssertion.make(account: account, issuedAt: epochSeconds())
        } catch {
            throw .rejected("cannot sign the assertion with the service account key")
        }
        // The assertion is base64url and dots: nothing in it needs form-encoding.
        let (status, object) = try await request.post(
            contentType: "application/x-www-form-urlencoded",
            body: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion, timeout: timeout)
        if status == 200 {
            guard let value = object?["access_token"] as? String, !value.isEmpty else {
                throw .unavailable("token endpoint answered 200 without access_token")
            }
            return FCMAccessToken(value: value, lifetime: .seconds(max(1, FCMTokenRequest.expiresIn(object))))
        }
        let code = TokenRedaction.redacted((object?["error"] as? String) ?? "HTTP \(status)")
        // The endpoint may quote the assertion it refused: relayed without it.
        let description = (object?["error_description"] as? String).map { ": " + TokenRedaction.redacted($0) } ?? ""
        if FCMTokenRequest.isTransient(status: status, error: object?["error"] as? String) {
            throw .unavailable(code + description)
        }
        throw .rejected(code + description)
    }
}
