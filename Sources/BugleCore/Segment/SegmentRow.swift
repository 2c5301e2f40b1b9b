/// One row of a campaign segment as returned by its SQL, before validation.
public struct SegmentRow: Sendable, Equatable {
    public var deviceID: Int64?
    public var userID: String?
    public var token: String?
    public var platform: String?
    public var locale: String?
    public var timezone: String?
    /// Other columns (template variables), as text; NULL → nil.
    public var variables: [String: String?]

    public init(deviceID: Int64?, userID: String?, token: String?, platform: String?, locale: String? = nil, timezone: String? = nil, variables: [String: String?] = [:]) {
        self.deviceID = deviceID
        self.userID = userID
        self.token = token
        self.platform = platform
        self.locale = locale
        self.timezone = timezone
        self.variables = variables
    }
}

/// Why a segment row is never sent.
public enum SkipReason: String, Sendable, CaseIterable, Equatable, Comparable {
    case missingDeviceID = "missing_device_id"
    case missingUserID = "missing_user_id"
    case missingToken = "missing_token"
    case malformedToken = "malformed_token"
    case unknownPlatform = "unknown_platform"
    case duplicateToken = "duplicate_token"
    case payloadTooLarge = "payload_too_large"
    /// A template variable is NULL, has no default, and the campaign says `on_null: skip`.
    case nullVariable = "null_variable"
    /// The send time falls in quiet hours and the campaign says `quiet_hours_action: skip`.
    case quietHours = "quiet_hours"

    public static func < (lhs: SkipReason, rhs: SkipReason) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A segment row that passed validation: it may be sent.
public struct ValidRecipient: Sendable, Equatable {
    public var deviceID: Int64
    public var userID: String
    /// Normalised token (iOS: lowercase hex).
    public var token: String
    public var platform: Platform
    public var locale: String?
    public var timezone: String?
    public var variables: [String: String?]
}
