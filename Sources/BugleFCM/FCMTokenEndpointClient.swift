import BugleHTTP2
import Foundation
import Logging
import NIOCore
import NIOHPACK

/// Trades the service account for access tokens at its `token_uri` over HTTP/2
/// (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`, PROTOCOLS.md §2.5).
final class FCMTokenEndpointClient: FCMAccessTokenFetching {
    private let account: FCMServiceAccount
    private let pool: HTTP2ConnectionPool
    private let authority: String
    private let path: String
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
        self.pool = pool
        let url = account.tokenURI
        let host = url.host ?? ""
        self.authority = url.port.map { "\(host):\($0)" } ?? host
        self.path = url.path.isEmpty ? "/" : url.path + (url.query.map { "?" + $0 } ?? "")
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
        let headers: HPACKHeaders = [
            ":method": "POST",
            ":scheme": "https",
            ":authority": authority,
            ":path": path,
            "content-type": "application/x-www-form-urlencoded",
            "accept": "application/json",
        ]
        // The assertion is base64url and dots: nothing in it needs form-encoding.
        let body = ByteBuffer(string: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion)
        let response: HTTP2Response
        do {
            response = try await pool.execute(headers: headers, body: body, deadline: .now() + timeout)
        } catch HTTP2TransportError.certificateRejected(let why) {
            // Not a passing outage: no token will come from this endpoint until its TLS settings change.
            throw .rejected("token endpoint: \(why)")
        } catch HTTP2TransportError.proxyRefused(let why) {
            // Nor is a proxy refusing the tunnel for good (credentials, a host it does not allow).
            throw .rejected("token endpoint: \(why)")
        } catch {
            throw .unavailable("\(error)")
        }
        let object = response.body.flatMap { try? JSONSerialization.jsonObject(with: Data($0.readableBytesView)) } as? [String: Any]
        if response.status == 200 {
            guard let value = object?["access_token"] as? String, !value.isEmpty else {
                throw .unavailable("token endpoint answered 200 without access_token")
            }
            let expiresIn = (object?["expires_in"] as? Int) ?? (object?["expires_in"] as? String).flatMap { Int($0) } ?? 3600
            return FCMAccessToken(value: value, lifetime: .seconds(max(1, expiresIn)))
        }
        let code = (object?["error"] as? String) ?? "HTTP \(response.status)"
        let description = (object?["error_description"] as? String).map { ": " + $0 } ?? ""
        let transient = ["internal_failure", "server_error", "temporarily_unavailable"].contains(code)
        if response.status >= 500 || response.status == 429 || response.status == 408 || transient {
            throw .unavailable(code + description)
        }
        throw .rejected(code + description)
    }
}
