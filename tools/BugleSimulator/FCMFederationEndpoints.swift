import Foundation

/// Google's two endpoints behind workload identity federation (`external_account` credentials), as the FCM simulator
/// serves them when ``FCMSimulatorConfiguration/federation`` is set:
///
/// - `POST /v1/token`: the STS token exchange (RFC 8693). The form must carry
///   `grant_type=urn:ietf:params:oauth:grant-type:token-exchange`, the configured `audience`,
///   `requested_token_type=urn:ietf:params:oauth:token-type:access_token`, a JWT or ID-token `subject_token_type`, a
///   `scope` with `cloud-platform` or `firebase.messaging`, and a `subject_token` the identity provider vouches for
///   (or, with an AWS account configured, an AWS-signed `GetCallerIdentity` request: `AWSSignedRequestVerifier`).
///   It answers `{"access_token", "issued_token_type", "token_type": "Bearer", "expires_in"}`, or 400 with an OAuth
///   error (`invalid_grant` for an unknown subject token or audience).
/// - `POST /v1/projects/-/serviceAccounts/{email}:generateAccessToken`: IAM credentials. The bearer must be one of the
///   simulator's tokens, `{email}` the configured account (else 403 `PERMISSION_DENIED`, as for a principal without
///   `iam.serviceAccounts.getAccessToken`), and the JSON body's `scope` must hold `cloud-platform` or
///   `firebase.messaging`. It answers `{"accessToken", "expireTime"}` (RFC 3339), with the `lifetime` asked for (at
///   most 3600 s).
///
/// The tokens are the simulator's own stateless access tokens, so the send route accepts them.
struct FCMFederationEndpoints: Sendable {
    /// An answer: status and JSON body.
    struct Answer: Sendable {
        var status: Int
        var body: String
    }

    static let stsPath = "/v1/token"
    static let tokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
    static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"
    static let subjectTokenTypes: Set<String> = ["urn:ietf:params:oauth:token-type:jwt", "urn:ietf:params:oauth:token-type:id_token"]
    /// A signed AWS `GetCallerIdentity` request, accepted when ``FCMSimulatorConfiguration/Federation/aws`` is set.
    static let awsSubjectTokenType = "urn:ietf:params:aws:token-type:aws4_request"
    static let usableScopes: Set<String> = [
        "https://www.googleapis.com/auth/cloud-platform", "https://www.googleapis.com/auth/firebase.messaging",
    ]

    let federation: FCMSimulatorConfiguration.Federation
    let tokens: FCMAccessTokenAuthority
    let lifetime: Double

    /// The `{email}` of an IAM `generateAccessToken` path, or nil for other paths.
    static func impersonatedAccount(_ path: Substring) -> Substring? {
        let prefix = "/v1/projects/-/serviceAccounts/"
        let suffix = ":generateAccessToken"
        guard path.hasPrefix(prefix), path.hasSuffix(suffix), path.count > prefix.count + suffix.count else { return nil }
        return path.dropFirst(prefix.count).dropLast(suffix.count)
    }

    /// The STS exchange for a form `body`.
    func exchange(form: [String: String], now: Double) -> Answer {
        guard form["grant_type"] == Self.tokenExchangeGrant else {
            return oauthError(400, "unsupported_grant_type", "Invalid grant_type.")
        }
        guard form["requested_token_type"] == Self.accessTokenType else {
            return oauthError(400, "invalid_request", "Invalid requested_token_type.")
        }
        let aws = form["subject_token_type"] == Self.awsSubjectTokenType ? federation.aws : nil
        guard let type = form["subject_token_type"], Self.subjectTokenTypes.contains(type) || aws != nil else {
            return oauthError(400, "invalid_request", "Invalid subject_token_type.")
        }
        let scopes = Set((form["scope"] ?? "").split(separator: " ").map(String.init))
        guard !scopes.isDisjoint(with: Self.usableScopes) else {
            return oauthError(400, "invalid_scope", "The scope must include cloud-platform or firebase.messaging.")
        }
        guard form["audience"] == federation.audience else {
            return oauthError(400, "invalid_grant", "The audience in the request does not match a workload identity pool provider.")
        }
        guard let subject = form["subject_token"] else {
            return oauthError(400, "invalid_request", "Missing subject_token.")
        }
        if let aws {
            if let problem = AWSSignedRequestVerifier(account: aws, audience: federation.audience).problem(with: subject, now: now) {
                return oauthError(400, "invalid_grant", problem)
            }
        } else if !federation.subjectTokens.contains(subject) {
            return oauthError(400, "invalid_grant", "The subject token is invalid or has expired.")
        }
        let token = tokens.mint(expiresAt: now + lifetime)
        let body = "{\"access_token\":\"\(token)\",\"issued_token_type\":\"\(Self.accessTokenType)\",\"token_type\":\"Bearer\",\"expires_in\":\(Int(lifetime))}"
        return Answer(status: 200, body: body)
    }

    /// IAM's `generateAccessToken` for `account`, with the request's bearer token and JSON body.
    func impersonate(account: Substring, bearer: String?, body: [UInt8], now: Double) -> Answer {
        guard let bearer, case .valid = tokens.verify(bearer, now: now) else {
            return googleError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        }
        guard account == federation.serviceAccountEmail[...] else {
            return googleError(
                403, "PERMISSION_DENIED",
                "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).")
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        let scopes = Set((object?["scope"] as? [String]) ?? [])
        guard !scopes.isDisjoint(with: Self.usableScopes) else {
            return googleError(400, "INVALID_ARGUMENT", "Request contains an invalid argument: scope.")
        }
        var seconds = lifetime
        if let requested = object?["lifetime"] as? String, requested.hasSuffix("s"), let value = Double(requested.dropLast()) {
            guard value > 0, value <= 3600 else {
                return googleError(400, "INVALID_ARGUMENT", "Request contains an invalid argument: lifetime.")
            }
            seconds = min(seconds, value)
        }
        let token = tokens.mint(expiresAt: now + seconds)
        let expiry = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: now + seconds))
        return Answer(status: 200, body: "{\"accessToken\":\"\(token)\",\"expireTime\":\"\(expiry)\"}")
    }

    private func oauthError(_ status: Int, _ error: String, _ description: String) -> Answer {
        Answer(status: status, body: SimulatorJSON.oauthError(error, description))
    }

    private func googleError(_ code: Int, _ status: String, _ message: String) -> Answer {
        Answer(status: code, body: FCMErrorBody.render(code: code, message: message, status: status, details: []))
    }
}
