import BugleCore
import Foundation

/// Translates one APNs answer into a provider-neutral ``SendOutcome`` (RELIABILITY.md §3.5). Pure.
public enum APNSErrorClassifier {
    /// Classifies an APNs answer.
    /// - Parameters:
    ///   - status: HTTP status.
    ///   - reason: The `reason` of the JSON body, if any.
    ///   - timestamp: 410 `timestamp` in milliseconds since 1970.
    ///   - retryAfter: A `Retry-After` header, if any.
    ///   - apnsID: The answer's `apns-id` (becomes the provider message id on 200).
    /// - Returns: The outcome. `ExpiredProviderToken` comes back as `.retry(.safe, ...)`: the provider
    ///   refreshes the JWT and retries before anything reaches the runner.
    public static func classify(
        status: Int,
        reason: APNSError.Reason?,
        timestamp: Int64? = nil,
        retryAfter: Duration? = nil,
        apnsID: String? = nil
    ) -> SendOutcome {
        if status == 200 {
            return .delivered(providerMessageID: apnsID)
        }
        let code = reason?.rawValue ?? "http_\(status)"
        if let reason {
            switch reason {
            case .unregistered, .expiredToken:
                return .invalidToken(
                    code: code,
                    invalidSince: timestamp.map { Instant(secondsSince1970: Double($0) / 1000) }
                )
            case .badDeviceToken, .deviceTokenNotForTopic:
                return .invalidToken(code: code, invalidSince: nil)
            case .payloadTooLarge, .payloadEmpty, .badCollapseID, .badExpirationDate, .badPriority, .badMessageID,
                .invalidPushType, .duplicateHeaders, .missingDeviceToken:
                return .rejected(code: code)
            case .tooManyRequests:
                return .retry(.recipient, code: code, after: retryAfter)
            case .internalServerError, .serviceUnavailable, .shutdown, .idleTimeout:
                return .retry(.provider, code: code, after: retryAfter)
            case .tooManyProviderTokenUpdates:
                return .retry(.provider, code: code, after: retryAfter ?? .seconds(60))
            case .expiredProviderToken:
                return .retry(.safe, code: code, after: nil)
            case _ where haltingReasons.contains(reason):
                return .halt(code: code, message: haltMessage(status: status, reason: code))
            default:
                break
            }
        }
        return classifyByStatus(status: status, code: code, timestamp: timestamp, retryAfter: retryAfter)
    }

    /// Reasons that say the providers file is wrong (key, team, topic, certificate, environment, endpoint): no request
    /// can succeed until it is fixed, so the run halts.
    static let haltingReasons: Set<APNSError.Reason> = [
        .invalidProviderToken, .badTopic, .topicDisallowed, .badCertificate, .badCertificateEnvironment, .missingTopic,
        .missingProviderToken, .forbidden, .unrelatedKeyIDInToken, .badEnvironmentKeyIDInToken, .badPath, .methodNotAllowed,
    ]

    /// What a GOAWAY's debug data means for the requests it turned away. APNs may close a connection with GOAWAY
    /// whose debug data is `{"reason":"…"}` with the same reasons as its answers (PROTOCOLS.md §1.7): one of
    /// ``haltingReasons`` halts the run as that answer would (rather than reconnecting to be turned away again);
    /// anything else (`Shutdown`, `IdleTimeout`, no reason) is nil: the request is sent again.
    /// - Parameter debugData: The GOAWAY's debug data.
    public static func classifyGoAway(debugData: String) -> SendOutcome? {
        struct Body: Decodable { var reason: String? }
        guard let raw = try? JSONDecoder().decode(Body.self, from: Data(debugData.utf8)).reason,
            haltingReasons.contains(APNSError.Reason(rawValue: raw))
        else { return nil }
        return .halt(
            code: raw,
            message: "APNs closed the connection (GOAWAY) with reason \(raw): check the apns section of the providers file (key, team id, topic, certificate, endpoint)"
        )
    }

    /// Default for reasons this client does not know, by status class.
    private static func classifyByStatus(
        status: Int,
        code: String,
        timestamp: Int64?,
        retryAfter: Duration?
    ) -> SendOutcome {
        switch status {
        case 410:
            return .invalidToken(code: code, invalidSince: timestamp.map { Instant(secondsSince1970: Double($0) / 1000) })
        case 429:
            return .retry(.recipient, code: code, after: retryAfter)
        case 401, 403, 404, 405:
            return .halt(code: code, message: haltMessage(status: status, reason: code))
        case 500...599:
            return .retry(.provider, code: code, after: retryAfter)
        default:
            return .rejected(code: code)
        }
    }

    private static func haltMessage(status: Int, reason: String) -> String {
        "APNs refused the request with \(status) \(reason): check the apns section of the providers file "
            + "(auth: the key with its key id and team id, or the client certificate; topic; endpoint)"
    }
}
