import BugleCore
import BugleHTTP2
import Foundation
import NIOCore
import NIOHPACK

/// One `POST` to a Google credentials endpoint (the OAuth2 token endpoint, STS, IAM credentials) over a pool of HTTP/2
/// connections to its host, with the transport's failures sorted as access-token failures: a certificate or proxy
/// refusal is permanent (no token will come until the settings change), anything else is unavailable (retried).
struct FCMTokenRequest: Sendable {
    /// The endpoint's URL.
    let url: URL
    /// Connections to its host.
    let pool: HTTP2ConnectionPool
    /// Who answers, for messages.
    let source: FCMTokenSource

    /// Sends `body` (of `contentType`, with `bearer` as `Authorization` when given) and returns the answer's status and
    /// JSON object (nil when the body is not one).
    /// - Throws: ``FCMAuthError``.
    func post(contentType: String, body: String, bearer: String? = nil, timeout: TimeAmount) async throws(FCMAuthError) -> (Int, [String: Any]?) {
        // An IPv6 token_uri host in brackets, as `:authority` writes it (Foundation may give the host either way).
        let authority = Endpoint(host: (url.host ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port: url.port ?? 443).authority
        var headers: HPACKHeaders = [
            ":method": "POST",
            ":scheme": "https",
            ":authority": authority,
            ":path": (url.path.isEmpty ? "/" : url.path) + (url.query.map { "?" + $0 } ?? ""),
            "content-type": contentType,
            "accept": "application/json",
        ]
        if let bearer { headers.add(name: "authorization", value: "Bearer " + bearer) }
        let response: HTTP2Response
        do {
            response = try await pool.execute(headers: headers, body: ByteBuffer(string: body), deadline: .now() + timeout)
        } catch HTTP2TransportError.certificateRejected(let why) {
            throw .rejected("\(url.host ?? ""): \(why)", from: source)
        } catch HTTP2TransportError.proxyRefused(let why) {
            throw .rejected("\(url.host ?? ""): \(why)", from: source)
        } catch {
            throw .unavailable("\(error)", from: source)
        }
        let object = response.body.flatMap { try? JSONSerialization.jsonObject(with: Data($0.readableBytesView)) } as? [String: Any]
        return (response.status, object)
    }

    /// `expires_in`, a number or (as Google sometimes sends it) a string; an hour when absent.
    static func expiresIn(_ object: [String: Any]?) -> Int {
        (object?["expires_in"] as? Int) ?? (object?["expires_in"] as? String).flatMap { Int($0) } ?? 3600
    }

    /// Whether a failed answer is worth retrying: 5xx, 429, 408, or an OAuth error Google documents as transient.
    static func isTransient(status: Int, error: String?) -> Bool {
        status >= 500 || status == 429 || status == 408
            || ["internal_failure", "server_error", "temporarily_unavailable"].contains(error ?? "")
    }
}
