/// Provider payload limits, in UTF-8 bytes of the final JSON.
public enum PayloadLimits {
    /// APNs: every push type but VoIP.
    public static let apns = 4096
    /// APNs VoIP.
    public static let apnsVoIP = 5120
    /// FCM v1 message payload (keys and values, token excluded).
    public static let fcm = 4096
}

/// A payload that is too large for its provider; the recipient is failed locally, nothing is sent.
public struct PayloadTooLarge: Error, Equatable, Sendable, CustomStringConvertible {
    public var size: Int
    public var limit: Int
    public var description: String { "payload is \(size) bytes, over the \(limit)-byte limit" }

    public init(size: Int, limit: Int) {
        self.size = size
        self.limit = limit
    }

    /// `size`, a `platform` body's, as its lane takes it: an iOS body sent through the legacy gateway
    /// (`ios_transport: legacy`) over the gateway's `payload_limit` is too large there, whatever APNs' own limit (the
    /// lane refuses it locally). `validate` and the dry run judge copy by it.
    public static func meetingLegacyLimit(
        _ size: Result<Int, PayloadTooLarge>, platform: Platform, transport: IOSTransport, legacyLimit: Int
    ) -> Result<Int, PayloadTooLarge> {
        guard platform == .ios, transport == .legacy, case .success(let bytes) = size, bytes > legacyLimit else { return size }
        return .failure(PayloadTooLarge(size: bytes, limit: legacyLimit))
    }
}
