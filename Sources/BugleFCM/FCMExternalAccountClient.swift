import BugleCore
import BugleHTTP2
import Foundation
import NIOCore
import NIOSSL

/// Gets access tokens by workload identity federation (``FCMExternalAccount``): reads the subject token, exchanges it
/// at Google's STS (RFC 8693, `grant_type=urn:ietf:params:oauth:grant-type:token-exchange`), and, when the
/// configuration names a service account to impersonate, trades the federated token at IAM credentials'
/// `generateAccessToken` for one with the firebase.messaging scope. Without impersonation the federated token itself
/// carries that scope.
///
/// A refusal (STS `invalid_grant`, IAM 403, an unreadable subject-token file) is permanent and halts the lane; a 5xx,
/// 429 or unreachable service, or a subject-token URL that does not answer, is unavailable and retried.
final class FCMExternalAccountClient: FCMAccessTokenFetching {
    static let cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

    private let account: FCMExternalAccount
    private let sts: FCMTokenRequest
    private let iam: FCMTokenRequest?
    private let timeout: TimeAmount
    private let group: any EventLoopGroup
    private let environment: [String: String]
    private let urlTLS: NIOSSLContext?
    private let urlTunnel: ProxyTunnel?

    /// A client exchanging at `sts` (and impersonating through `iam`, given exactly when the account names a service
    /// account), each exchange bounded by `timeout`; `group` runs a `url` or AWS source's HTTP requests (`urlTLS` for an
    /// `https://` url source, through `urlTunnel` when it has a proxy), and an AWS source reads its region and
    /// credentials from `environment` first.
    init(
        account: FCMExternalAccount, sts: FCMTokenRequest, iam: FCMTokenRequest?, timeout: TimeAmount, group: any EventLoopGroup,
        environment: [String: String], urlTLS: NIOSSLContext? = nil, urlTunnel: ProxyTunnel? = nil
    ) {
        self.account = account
        self.sts = sts
        self.iam = iam
        self.timeout = timeout
        self.group = group
        self.environment = environment
        self.urlTLS = urlTLS
        self.urlTunnel = urlTunnel
    }

    func fetch() async throws(FCMAuthError) -> FCMAccessToken {
        let subject = try await subjectToken()
        let federated = try await exchange(subject)
        guard let iam else { return federated }
        return try await impersonate(iam, with: federated.value)
    }

    /// The subject token, read from the file, fetched from the URL, signed for AWS, or printed by the executable.
    private func subjectToken() async throws(FCMAuthError) -> String {
        let raw: Data
        switch account.source {
        case .file(let file):
            guard let data = FileManager.default.contents(atPath: file) else {
                throw .rejected("cannot read the subject token file \(file) (credential_source.file)", from: .federation)
            }
            raw = data
        case .url(let host, let port, let path, let headers, let secure):
            let answer: PlainHTTPExchange.Answer
            do {
                answer = try await PlainHTTPExchange.send(
                    host: host, port: port, path: path, headers: headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
                    timeout: timeout, group: group, tls: secure ? urlTLS : nil, tunnel: secure ? urlTunnel : nil)
            } catch let error as HTTPProxyError where error.isConfiguration {
                throw .rejected("the subject token URL at \(host):\(port): \(error)", from: .federation)
            } catch {
                throw .unavailable("the subject token URL at \(host):\(port): \(error)", from: .federation)
            }
            guard answer.status == 200 else {
                let message = "the subject token URL at \(host):\(port) answered HTTP \(answer.status)"
                if answer.status >= 500 || answer.status == 429 { throw .unavailable(message, from: .federation) }
                throw .rejected(message, from: .federation)
            }
            raw = Data(answer.body)
        case .aws(let source):
            return try await FCMAWSSubjectToken(
                source: source, audience: account.audience, environment: environment, timeout: timeout, group: group
            ).make()
        case .executable(let source):
            return try await FCMExecutableSubjectToken(
                source: source, audience: account.audience, tokenType: account.subjectTokenType,
                impersonatedEmail: account.impersonatedEmail, environment: environment
            ).make()
        }
        let token: String?
        switch account.format {
        case .text:
            token = String(decoding: raw, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        case .json(let field):
            token = ((try? JSONSerialization.jsonObject(with: raw)) as? [String: Any])?[field] as? String
        }
        guard let token, !token.isEmpty else {
            throw .rejected("the subject token is empty, or not where credential_source.format says", from: .federation)
        }
        return token
    }

    /// The STS exchange.
    private func exchange(_ subject: String) async throws(FCMAuthError) -> FCMAccessToken {
        let scope = iam == nil ? FCMAssertion.scope : Self.cloudPlatformScope
        let form = [
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"),
            ("audience", account.audience),
            ("scope", scope),
            ("requested_token_type", "urn:ietf:params:oauth:token-type:access_token"),
            ("subject_token", subject),
            ("subject_token_type", account.subjectTokenType),
        ]
        let body = form.map { "\($0.0)=\(Self.formEncoded($0.1))" }.joined(separator: "&")
        let (status, object) = try await sts.post(contentType: "application/x-www-form-urlencoded", body: body, timeout: timeout)
        if status == 200, let value = object?["access_token"] as? String, !value.isEmpty {
            return FCMAccessToken(value: value, lifetime: .seconds(max(1, FCMTokenRequest.expiresIn(object))))
        }
        let error = object?["error"] as? String
        // STS may quote the subject token it refused: relayed without it.
        let message = "STS: " + (error ?? "HTTP \(status)") + ((object?["error_description"] as? String).map { ": " + TokenRedaction.redacted($0) } ?? "")
        if status == 200 || FCMTokenRequest.isTransient(status: status, error: error) { throw .unavailable(message, from: .federation) }
        throw .rejected(message, from: .federation)
    }

    /// IAM credentials' `generateAccessToken` with the federated token.
    private func impersonate(_ iam: FCMTokenRequest, with federated: String) async throws(FCMAuthError) -> FCMAccessToken {
        let body = "{\"scope\":[\"\(FCMAssertion.scope)\"],\"lifetime\":\"\(account.impersonationLifetime)s\"}"
        let (status, object) = try await iam.post(contentType: "application/json", body: body, bearer: federated, timeout: timeout)
        if status == 200, let value = object?["accessToken"] as? String, !value.isEmpty {
            let expiry = (object?["expireTime"] as? String).flatMap { Self.rfc3339($0) }
            let lifetime = expiry.map { Int($0.timeIntervalSinceNow) } ?? account.impersonationLifetime
            return FCMAccessToken(value: value, lifetime: .seconds(max(1, lifetime)))
        }
        let error = object?["error"] as? [String: Any]
        let message = "IAM generateAccessToken: " + ((error?["status"] as? String) ?? "HTTP \(status)")
            + ((error?["message"] as? String).map { ": " + TokenRedaction.redacted($0) } ?? "")
        if status == 200 || FCMTokenRequest.isTransient(status: status, error: nil) { throw .unavailable(message, from: .federation) }
        throw .rejected(message, from: .federation)
    }

    /// `application/x-www-form-urlencoded` for a value (unreserved characters kept, everything else %-encoded).
    static func formEncoded(_ value: String) -> String {
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    /// An RFC 3339 time (`2026-11-27T09:00:00Z`, fractional seconds allowed).
    static func rfc3339(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}
