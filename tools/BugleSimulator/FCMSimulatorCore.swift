import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// The decision logic shared by every connection of an ``FCMSimulator``, independent of HTTP/1.1 or HTTP/2:
/// routing, the OAuth token endpoint, access-token checks, project, quota, body validation, scripted
/// outcomes, fault injection and recording. Immutable apart from the locked ledger and bound port.
final class FCMSimulatorCore: Sendable {
    /// One complete request.
    struct Request: Sendable {
        var method: HTTPMethod
        var uri: String
        /// The `Authorization` header, if any.
        var authorization: String?
        var body: [UInt8]
        var connectionID: Int
    }

    /// An answer to write.
    struct Response: Sendable {
        var status: Int
        var headers: [(String, String)]
        var body: String
    }

    /// What to do with a request.
    enum Answer: Sendable {
        case respond(Response)
        case hang
    }

    let ledger: FCMSimulatorLedger
    let latency: TimeAmount?
    private let configuration: FCMSimulatorConfiguration
    private let tokens: FCMAccessTokenAuthority
    private let verifier: FCMAssertionVerifier
    private let validator = FCMMessageValidator()
    private let retryAfterSeconds: Int
    private let accessTokenLifetime: Double
    /// The STS and IAM endpoints, when federation is configured.
    private let federation: FCMFederationEndpoints?
    private let boundPort = NIOLockedValueBox<Int?>(nil)
    private let tokenOutage: FCMTokenOutage
    /// Expiry of access tokens whose HMAC already verified, so a busy client's token is checked once.
    private let verifiedTokens = NIOLockedValueBox<[String: Double]>([:])
    private static let verifiedTokensLimit = 1024

    static let wwwAuthenticate = #"Bearer realm="https://accounts.google.com/", error="invalid_token""#
    private static let jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    private static let jsonContentType = ("content-type", "application/json; charset=UTF-8")

    /// Creates the core.
    /// - Parameters:
    ///   - configuration: Simulator configuration.
    ///   - ledger: Shared records and counters.
    ///   - tokenOutage: The token endpoint's injected outage.
    init(configuration: FCMSimulatorConfiguration, ledger: FCMSimulatorLedger, tokenOutage: FCMTokenOutage) {
        self.configuration = configuration
        self.ledger = ledger
        self.tokenOutage = tokenOutage
        self.tokens = FCMAccessTokenAuthority(secret: configuration.accessTokenSecret)
        self.verifier = FCMAssertionVerifier(
            clientEmail: configuration.clientEmail,
            privateKeyID: configuration.privateKeyID,
            key: configuration.serviceAccountKey,
            skew: Self.seconds(configuration.assertionClockSkew)
        )
        self.latency = configuration.faults.latency.map { TimeAmount($0) }
        self.retryAfterSeconds = max(1, Int(Self.seconds(configuration.retryAfter).rounded(.up)))
        self.accessTokenLifetime = Self.seconds(configuration.accessTokenLifetime)
        self.federation = configuration.federation.map {
            FCMFederationEndpoints(federation: $0, tokens: FCMAccessTokenAuthority(secret: configuration.accessTokenSecret), lifetime: Self.seconds(configuration.accessTokenLifetime))
        }
    }

    /// Tells the core its bound port (for the `aud` check against its own token URI).
    func bind(port: Int) {
        boundPort.withLockedValue { $0 = port }
    }

    /// Decides the answer to one complete request.
    /// - Parameter request: The request.
    func handle(_ request: Request) -> Answer {
        let now = configuration.wallClock()
        let path = request.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        if path == "/token" {
            guard request.method == .POST else {
                ledger.recordTokenAnswer(error: "invalid_request")
                return oauthError(status: 405, error: "invalid_request", description: "Use POST.")
            }
            return grantToken(body: request.body, now: now)
        }
        if let federation, let answer = federated(federation, path: path, request: request, now: now) {
            return answer
        }
        if let project = Self.sendRouteProject(path) {
            guard request.method == .POST else {
                ledger.recordRouteError("METHOD_NOT_ALLOWED")
                return googleError(
                    code: 405,
                    status: "METHOD_NOT_ALLOWED",
                    message: "Method not allowed: use POST.",
                    details: []
                )
            }
            return send(project: project, request: request, now: now)
        }
        ledger.recordRouteError("NOT_FOUND")
        return googleError(code: 404, status: "NOT_FOUND", message: "The requested URL was not found on this server.", details: [])
    }

    // MARK: - Workload identity federation

    /// The STS exchange or IAM's `generateAccessToken`, or nil when `path` is neither.
    private func federated(_ federation: FCMFederationEndpoints, path: Substring, request: Request, now: Double) -> Answer? {
        let answer: FCMFederationEndpoints.Answer
        if path == FCMFederationEndpoints.stsPath {
            guard request.method == .POST else { return oauthError(status: 405, error: "invalid_request", description: "Use POST.") }
            answer = federation.exchange(form: Self.parseForm(request.body), now: now)
            if answer.status == 200 { ledger.updateCounters { $0.stsExchanges += 1 } }
        } else if let account = FCMFederationEndpoints.impersonatedAccount(path) {
            guard request.method == .POST else { return googleError(code: 405, status: "METHOD_NOT_ALLOWED", message: "Use POST.", details: []) }
            let bearer = request.authorization.flatMap { $0.lowercased().hasPrefix("bearer ") ? String($0.dropFirst(7)) : nil }
            answer = federation.impersonate(account: account, bearer: bearer, body: request.body, now: now)
            if answer.status == 200 { ledger.updateCounters { $0.impersonations += 1 } }
        } else {
            return nil
        }
        return .respond(Response(status: answer.status, headers: [Self.jsonContentType, ("cache-control", "no-store")], body: answer.body))
    }

    // MARK: - OAuth token endpoint

    private func grantToken(body: [UInt8], now: Double) -> Answer {
        if tokenOutage.isOn(now: now) {
            ledger.recordTokenAnswer(error: "temporarily_unavailable")
            return oauthError(status: 503, error: "temporarily_unavailable", description: "The service is unavailable; try again later.")
        }
        let form = Self.parseForm(body)
        guard let grantType = form["grant_type"] else {
            ledger.recordTokenAnswer(error: "invalid_request")
            return oauthError(status: 400, error: "invalid_request", description: "Missing required parameter: grant_type")
        }
        guard grantType == Self.jwtBearerGrant else {
            ledger.recordTokenAnswer(error: "unsupported_grant_type")
            return oauthError(status: 400, error: "unsupported_grant_type", description: "Invalid grant_type.")
        }
        guard let assertion = form["assertion"], !assertion.isEmpty else {
            ledger.recordTokenAnswer(error: "invalid_request")
            return oauthError(status: 400, error: "invalid_request", description: "Missing required parameter: assertion")
        }
        switch verifier.verify(assertion[...], now: now, audiences: audiences()) {
        case .rejected(let status, let error, let description):
            ledger.recordTokenAnswer(error: error)
            return oauthError(status: status, error: error, description: description)
        case .granted:
            ledger.recordTokenAnswer(error: nil)
            let token = tokens.mint(expiresAt: now + accessTokenLifetime)
            let expiresIn = Int(accessTokenLifetime.rounded(.down))
            let body = "{\"access_token\":\"\(token)\",\"expires_in\":\(expiresIn),\"token_type\":\"Bearer\"}"
            return .respond(
                Response(status: 200, headers: [Self.jsonContentType, ("cache-control", "no-store")], body: body)
            )
        }
    }

    private func audiences() -> Set<String> {
        var accepted: Set<String> = [SimulatorCertificates.googleTokenURI, "https://accounts.google.com/o/oauth2/token"]
        accepted.formUnion(configuration.extraAudiences)
        if let port = boundPort.withLockedValue({ $0 }) {
            accepted.insert(SimulatorCertificates.fcmTokenURI(port: port))
            accepted.insert("https://localhost:\(port)/token")
        }
        return accepted
    }

    private func oauthError(status: Int, error: String, description: String) -> Answer {
        let body = SimulatorJSON.oauthError(error, description)
        return .respond(Response(status: status, headers: [Self.jsonContentType, ("cache-control", "no-store")], body: body))
    }

    // MARK: - Send route

    private func send(project: Substring, request: Request, now: Double) -> Answer {
        var entry = FCMRequestEntry(
            time: now,
            status: 0,
            reason: nil,
            target: nil,
            retryAfter: nil,
            validateOnly: false,
            connectionID: request.connectionID
        )

        if let failure = authenticate(request.authorization, now: now) {
            entry.status = 401
            entry.reason = "UNAUTHENTICATED"
            ledger.recordSendAnswer(entry)
            return googleError(
                code: 401,
                status: "UNAUTHENTICATED",
                message: failure.message,
                details: [
                    .errorInfo(
                        reason: failure.reason,
                        metadata: [
                            ("service", "fcm.googleapis.com"), ("method", "google.firebase.fcm.v1.FcmService.SendMessage"),
                        ]
                    )
                ],
                extraHeaders: [("www-authenticate", Self.wwwAuthenticate)]
            )
        }

        guard project == configuration.projectID || (configuration.projectNumber.map { project == $0 } ?? false) else {
            entry.status = 403
            entry.reason = "PERMISSION_DENIED"
            ledger.recordSendAnswer(entry)
            return googleError(
                code: 403,
                status: "PERMISSION_DENIED",
                message:
                    "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist).",
                details: [
                    .errorInfo(
                        reason: "IAM_PERMISSION_DENIED",
                        metadata: [("permission", "cloudmessaging.messages.create")]
                    )
                ]
            )
        }

        if case .exhausted(let retryAfter) = ledger.reserveQuota(now: now) {
            entry.status = 429
            entry.reason = "QUOTA_EXCEEDED"
            entry.retryAfter = retryAfter
            ledger.recordSendAnswer(entry)
            return googleError(
                code: 429,
                status: "RESOURCE_EXHAUSTED",
                message:
                    "Quota exceeded for quota metric 'Messages sent' and limit 'Messages sent per minute' of service 'fcm.googleapis.com' for consumer 'project_number:\(configuration.projectNumber ?? configuration.projectID)'.",
                details: [
                    .fcmError("QUOTA_EXCEEDED"),
                    .quotaFailure(
                        subject: "project_number:\(configuration.projectNumber ?? configuration.projectID)",
                        description: "Messages sent per minute: limit \(configuration.quotaPerMinute)"
                    ),
                ],
                extraHeaders: [("retry-after", String(retryAfter))]
            )
        }

        let message: FCMMessageValidator.Validated
        switch validator.validate(body: request.body) {
        case .failure(let failure):
            ledger.settleQuota(counts: true, now: now)
            entry.status = 400
            entry.reason = "INVALID_ARGUMENT"
            ledger.recordSendAnswer(entry)
            return invalidArgument(failure)
        case .success(let validated):
            message = validated
        }
        entry.target = message.target
        entry.validateOnly = message.validateOnly

        if message.targetKind == "token" || message.targetKind == "fid",
            let script = FCMTokenScript.script(for: message.target)
        {
            ledger.settleQuota(counts: script.countsTowardQuota, now: now)
            switch script {
            case .hang:
                entry.status = 0
                entry.reason = "HUNG"
                ledger.recordSendAnswer(entry)
                return .hang
            case .error(let status, let canonicalStatus, let errorCode, let sendsRetryAfter):
                entry.status = status
                entry.reason = errorCode
                entry.retryAfter = sendsRetryAfter ? retryAfterSeconds : nil
                ledger.recordSendAnswer(entry)
                return scriptedError(
                    status: status,
                    canonicalStatus: canonicalStatus,
                    errorCode: errorCode,
                    targetKind: message.targetKind,
                    retryAfter: entry.retryAfter
                )
            }
        }

        // validate_only: checked like a send (the token's script included, as FCM checks the registration), never
        // delivered.
        if message.validateOnly {
            ledger.settleQuota(counts: true, now: now)
            entry.status = 200
            ledger.recordSendAnswer(entry)
            return .respond(
                Response(
                    status: 200,
                    headers: [Self.jsonContentType],
                    body: "{\"name\":\"projects/\(project)/messages/fake_message_id\"}"
                )
            )
        }

        let faults = configuration.faults
        if faults.unavailableRatio > 0 || faults.internalRatio > 0 {
            let draw = ledger.nextUnitRandom()
            if draw < faults.unavailableRatio {
                ledger.settleQuota(counts: false, now: now)
                entry.status = 503
                entry.reason = "UNAVAILABLE"
                entry.retryAfter = retryAfterSeconds
                ledger.recordSendAnswer(entry)
                return scriptedError(
                    status: 503,
                    canonicalStatus: "UNAVAILABLE",
                    errorCode: "UNAVAILABLE",
                    targetKind: message.targetKind,
                    retryAfter: retryAfterSeconds
                )
            }
            if draw < faults.unavailableRatio + faults.internalRatio {
                ledger.settleQuota(counts: false, now: now)
                entry.status = 500
                entry.reason = "INTERNAL"
                ledger.recordSendAnswer(entry)
                return scriptedError(
                    status: 500,
                    canonicalStatus: "INTERNAL",
                    errorCode: "INTERNAL",
                    targetKind: message.targetKind,
                    retryAfter: nil
                )
            }
        }

        ledger.settleQuota(counts: true, now: now)
        let name = "projects/\(project)/messages/\(ledger.nextMessageID(now: now))"
        entry.status = 200
        ledger.recordAccepted(
            FCMRecord(
                target: message.target,
                targetKind: message.targetKind,
                name: name,
                collapseKey: message.collapseKey,
                tag: message.tag,
                androidPriority: message.androidPriority,
                ttl: message.ttl,
                apnsPushType: message.apnsPushType,
                apnsCollapseID: message.apnsCollapseID,
                title: message.title,
                body: message.body,
                payloadSHA256: Self.payloadDigest(request.body, message: message),
                time: now,
                connectionID: request.connectionID
            ),
            entry: entry
        )
        return .respond(Response(status: 200, headers: [Self.jsonContentType], body: "{\"name\":\"\(name)\"}"))
    }

    private struct AuthenticationFailure {
        var reason: String
        var message: String
    }

    private func authenticate(_ authorization: String?, now: Double) -> AuthenticationFailure? {
        let invalid =
            "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
        guard let authorization, !authorization.isEmpty else {
            return AuthenticationFailure(
                reason: "CREDENTIALS_MISSING",
                message:
                    "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
            )
        }
        let utf8 = authorization.utf8
        guard utf8.count > 7, authorization.prefix(7).lowercased() == "bearer " else {
            return AuthenticationFailure(reason: "ACCESS_TOKEN_TYPE_UNSUPPORTED", message: invalid)
        }
        let token = String(authorization.dropFirst(7).drop(while: { $0 == " " || $0 == "\t" }))
        if let expiresAt = verifiedTokens.withLockedValue({ $0[token] }) {
            return now < expiresAt ? nil : AuthenticationFailure(reason: "ACCESS_TOKEN_EXPIRED", message: invalid)
        }
        switch tokens.verify(token, now: now) {
        case .valid(let expiresAt):
            verifiedTokens.withLockedValue { cache in
                if cache.count >= Self.verifiedTokensLimit { cache.removeAll(keepingCapacity: true) }
                cache[token] = expiresAt
            }
            return nil
        case .expired:
            return AuthenticationFailure(reason: "ACCESS_TOKEN_EXPIRED", message: invalid)
        case .invalid:
            return AuthenticationFailure(reason: "ACCESS_TOKEN_TYPE_UNSUPPORTED", message: invalid)
        }
    }

    // MARK: - Answers

    private func invalidArgument(_ failure: FCMMessageValidator.Failure) -> Answer {
        let details: [FCMErrorBody.Detail]
        switch failure.shape {
        case .badRequest: details = [.badRequest(failure.violations), .fcmError("INVALID_ARGUMENT")]
        case .invalidToken: details = [.fcmError("INVALID_ARGUMENT"), .badRequest(failure.violations)]
        case .tooBig: details = [.fcmError("INVALID_ARGUMENT")]
        }
        return googleError(code: 400, status: "INVALID_ARGUMENT", message: failure.message, details: details)
    }

    private func scriptedError(
        status: Int,
        canonicalStatus: String,
        errorCode: String,
        targetKind: String,
        retryAfter: Int?
    ) -> Answer {
        let message: String
        var details: [FCMErrorBody.Detail] = [.fcmError(errorCode)]
        switch errorCode {
        case "UNREGISTERED":
            message = "Requested entity was not found."
        case "INVALID_ARGUMENT":
            message = FCMMessageValidator.invalidTokenMessage
            details = [
                .badRequest([.init(field: "message.\(targetKind)", description: "Invalid registration token")]),
                .fcmError(errorCode),
            ]
        case "SENDER_ID_MISMATCH":
            message = "SenderId mismatch"
        case "THIRD_PARTY_AUTH_ERROR":
            message = "Auth error from APNS or Web Push Service"
        case "QUOTA_EXCEEDED":
            message = "Message rate exceeded for this device."
        case "UNAVAILABLE":
            message = "The service is currently unavailable."
        default:
            message = "Internal error encountered."
        }
        return googleError(
            code: status,
            status: canonicalStatus,
            message: message,
            details: details,
            extraHeaders: retryAfter.map { [("retry-after", String($0))] } ?? []
        )
    }

    private func googleError(
        code: Int,
        status: String,
        message: String,
        details: [FCMErrorBody.Detail],
        extraHeaders: [(String, String)] = []
    ) -> Answer {
        .respond(
            Response(
                status: code,
                headers: [Self.jsonContentType] + extraHeaders,
                body: FCMErrorBody.render(code: code, message: message, status: status, details: details)
            )
        )
    }

    // MARK: - Helpers

    /// The `{id}` of `/v1/projects/{id}/messages:send` (`:` may be percent-encoded), or nil for other paths.
    static func sendRouteProject(_ path: Substring) -> Substring? {
        let prefix = "/v1/projects/"
        guard path.hasPrefix(prefix) else { return nil }
        let rest = path.dropFirst(prefix.utf8.count)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        let project = rest[..<slash]
        let tail = rest[rest.index(after: slash)...]
        guard !project.isEmpty, tail == "messages:send" || tail.lowercased() == "messages%3asend" else { return nil }
        return project
    }

    /// Parses an `application/x-www-form-urlencoded` body (later duplicates win).
    static func parseForm(_ body: [UInt8]) -> [String: String] {
        var form: [String: String] = [:]
        let text = String(decoding: body, as: UTF8.self)
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let rawName = parts.first else { continue }
            let rawValue = parts.count > 1 ? parts[1] : ""
            guard let name = rawName.replacingOccurrences(of: "+", with: " ").removingPercentEncoding,
                let value = rawValue.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
            else { continue }
            form[name] = value
        }
        return form
    }

    /// SHA-256 of the `message` text with the target's value cut out.
    static func payloadDigest(_ body: [UInt8], message: FCMMessageValidator.Validated) -> String {
        var hasher = SHA256()
        body.withUnsafeBytes { raw in
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: raw[message.messageRange.lowerBound..<message.targetRange.lowerBound]))
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: raw[message.targetRange.upperBound..<message.messageRange.upperBound]))
        }
        return hasher.finalize().hexString
    }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
