/// An error answer from APNs: HTTP status, reason, the request's `apns-id` and (for 410) the timestamp.
/// `description` never contains device tokens, JWTs or keys.
public struct APNSError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The `reason` string of an APNs error answer. Open-ended: unknown strings are kept verbatim.
    public struct Reason: Sendable, Hashable, CustomStringConvertible {
        private enum Base: Sendable, Hashable {
            case badCollapseID, badDeviceToken, badExpirationDate, badMessageID, badPriority, badTopic
            case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken
            case missingTopic, payloadEmpty, topicDisallowed, badCertificate, badCertificateEnvironment
            case expiredProviderToken, forbidden, invalidProviderToken, missingProviderToken
            case unrelatedKeyIDInToken, badEnvironmentKeyIDInToken, badPath, methodNotAllowed, expiredToken
            case unregistered, payloadTooLarge, tooManyProviderTokenUpdates, tooManyRequests
            case internalServerError, serviceUnavailable, shutdown
            case unknown(String)
        }

        private let base: Base

        private static let table: [(Base, String)] = [
            (.badCollapseID, "BadCollapseId"), (.badDeviceToken, "BadDeviceToken"),
            (.badExpirationDate, "BadExpirationDate"), (.badMessageID, "BadMessageId"),
            (.badPriority, "BadPriority"), (.badTopic, "BadTopic"),
            (.deviceTokenNotForTopic, "DeviceTokenNotForTopic"), (.duplicateHeaders, "DuplicateHeaders"),
            (.idleTimeout, "IdleTimeout"), (.invalidPushType, "InvalidPushType"),
            (.missingDeviceToken, "MissingDeviceToken"), (.missingTopic, "MissingTopic"),
            (.payloadEmpty, "PayloadEmpty"), (.topicDisallowed, "TopicDisallowed"),
            (.badCertificate, "BadCertificate"), (.badCertificateEnvironment, "BadCertificateEnvironment"),
            (.expiredProviderToken, "ExpiredProviderToken"), (.forbidden, "Forbidden"),
            (.invalidProviderToken, "InvalidProviderToken"), (.missingProviderToken, "MissingProviderToken"),
            (.unrelatedKeyIDInToken, "UnrelatedKeyIdInToken"),
            (.badEnvironmentKeyIDInToken, "BadEnvironmentKeyIdInToken"), (.badPath, "BadPath"),
            (.methodNotAllowed, "MethodNotAllowed"), (.expiredToken, "ExpiredToken"),
            (.unregistered, "Unregistered"), (.payloadTooLarge, "PayloadTooLarge"),
            (.tooManyProviderTokenUpdates, "TooManyProviderTokenUpdates"), (.tooManyRequests, "TooManyRequests"),
            (.internalServerError, "InternalServerError"), (.serviceUnavailable, "ServiceUnavailable"),
            (.shutdown, "Shutdown"),
        ]
        private static let byRaw: [String: Base] = Dictionary(uniqueKeysWithValues: table.map { ($1, $0) })
        private static let byBase: [Base: String] = Dictionary(uniqueKeysWithValues: table.map { ($0, $1) })

        /// Parses Apple's reason string (the single raw-string mapping); unknown strings are preserved.
        /// - Parameter rawValue: The `reason` field.
        public init(rawValue: String) {
            self.base = Self.byRaw[rawValue] ?? .unknown(rawValue)
        }

        private init(_ base: Base) { self.base = base }

        /// Apple's reason string.
        public var rawValue: String {
            if case .unknown(let raw) = base { return raw }
            return Self.byBase[base] ?? ""
        }

        /// True for a reason this client does not know.
        public var isUnknown: Bool {
            if case .unknown = base { return true }
            return false
        }

        public var description: String { rawValue }

        public static let badCollapseID = Reason(.badCollapseID)
        public static let badDeviceToken = Reason(.badDeviceToken)
        public static let badExpirationDate = Reason(.badExpirationDate)
        public static let badMessageID = Reason(.badMessageID)
        public static let badPriority = Reason(.badPriority)
        public static let badTopic = Reason(.badTopic)
        public static let deviceTokenNotForTopic = Reason(.deviceTokenNotForTopic)
        public static let duplicateHeaders = Reason(.duplicateHeaders)
        public static let idleTimeout = Reason(.idleTimeout)
        public static let invalidPushType = Reason(.invalidPushType)
        public static let missingDeviceToken = Reason(.missingDeviceToken)
        public static let missingTopic = Reason(.missingTopic)
        public static let payloadEmpty = Reason(.payloadEmpty)
        public static let topicDisallowed = Reason(.topicDisallowed)
        public static let badCertificate = Reason(.badCertificate)
        public static let badCertificateEnvironment = Reason(.badCertificateEnvironment)
        public static let expiredProviderToken = Reason(.expiredProviderToken)
        public static let forbidden = Reason(.forbidden)
        public static let invalidProviderToken = Reason(.invalidProviderToken)
        public static let missingProviderToken = Reason(.missingProviderToken)
        public static let unrelatedKeyIDInToken = Reason(.unrelatedKeyIDInToken)
        public static let badEnvironmentKeyIDInToken = Reason(.badEnvironmentKeyIDInToken)
        public static let badPath = Reason(.badPath)
        public static let methodNotAllowed = Reason(.methodNotAllowed)
        public static let expiredToken = Reason(.expiredToken)
        public static let unregistered = Reason(.unregistered)
        public static let payloadTooLarge = Reason(.payloadTooLarge)
        public static let tooManyProviderTokenUpdates = Reason(.tooManyProviderTokenUpdates)
        public static let tooManyRequests = Reason(.tooManyRequests)
        public static let internalServerError = Reason(.internalServerError)
        public static let serviceUnavailable = Reason(.serviceUnavailable)
        public static let shutdown = Reason(.shutdown)
    }

    /// HTTP status.
    public var status: Int
    /// The reason, if the body had one.
    public var reason: Reason?
    /// The `apns-id` of the answer.
    public var apnsID: String?
    /// 410 only: milliseconds since 1970 when APNs last confirmed the token invalid.
    public var timestampMilliseconds: Int64?

    /// Creates an error value.
    /// - Parameters:
    ///   - status: HTTP status.
    ///   - reason: Reason.
    ///   - apnsID: `apns-id`.
    ///   - timestampMilliseconds: 410 timestamp.
    public init(status: Int, reason: Reason?, apnsID: String? = nil, timestampMilliseconds: Int64? = nil) {
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.timestampMilliseconds = timestampMilliseconds
    }

    public var description: String {
        "APNs \(status) \(reason?.rawValue ?? "(no reason)")"
    }
}
