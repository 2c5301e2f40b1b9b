import BugleCore

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
            case .invalidProviderToken, .badTopic, .topicDisallowed, .badCertificate, .badCertificateEnvironment,
                .missingTopic, .missingProviderToken, .forbidden, .unrelatedKeyIDInToken,
                .badEnvironmentKeyIDInToken, .badPath, .methodNotAllowed:
                return .halt(code: code, message: haltMessage(status: status, reason: code))
            default:
                break
            }
        }
        return classifyByStatus(status: status, code: code, timestamp: timestamp, retryAfter: retryAfter)
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
            + "(key, team id, topic, endpoint)"
    }
}
