/// The status byte of a legacy error response (PROTOCOLS.md §3.3). Open-ended: an unfamiliar value keeps
/// its number and is never lost.
public struct LegacyAPNSStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The wire value.
    public var rawValue: UInt8

    /// Wraps a wire value.
    /// - Parameter rawValue: The status byte.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// 0: no errors encountered.
    public static let noErrors = LegacyAPNSStatus(rawValue: 0)
    /// 1: processing error.
    public static let processingError = LegacyAPNSStatus(rawValue: 1)
    /// 2: missing device token.
    public static let missingDeviceToken = LegacyAPNSStatus(rawValue: 2)
    /// 3: missing topic.
    public static let missingTopic = LegacyAPNSStatus(rawValue: 3)
    /// 4: missing payload.
    public static let missingPayload = LegacyAPNSStatus(rawValue: 4)
    /// 5: invalid token size.
    public static let invalidTokenSize = LegacyAPNSStatus(rawValue: 5)
    /// 6: invalid topic size.
    public static let invalidTopicSize = LegacyAPNSStatus(rawValue: 6)
    /// 7: invalid payload size.
    public static let invalidPayloadSize = LegacyAPNSStatus(rawValue: 7)
    /// 8: invalid token.
    public static let invalidToken = LegacyAPNSStatus(rawValue: 8)
    /// 10: shutdown; the identifier is the last notification that was processed.
    public static let shutdown = LegacyAPNSStatus(rawValue: 10)
    /// 128: protocol error (the gateway could not parse the notification).
    public static let protocolError = LegacyAPNSStatus(rawValue: 128)
    /// 255: none (unknown).
    public static let unknown = LegacyAPNSStatus(rawValue: 255)

    /// Apple's name for the status, in the code style of the ledger's `outcome_code` (`InvalidToken`,
    /// `Shutdown`, …); `Status<N>` for a value Apple's table does not list.
    public var name: String {
        switch rawValue {
        case 0: return "NoErrors"
        case 1: return "ProcessingError"
        case 2: return "MissingDeviceToken"
        case 3: return "MissingTopic"
        case 4: return "MissingPayload"
        case 5: return "InvalidTokenSize"
        case 6: return "InvalidTopicSize"
        case 7: return "InvalidPayloadSize"
        case 8: return "InvalidToken"
        case 10: return "Shutdown"
        case 128: return "ProtocolError"
        case 255: return "Unknown"
        default: return "Status\(rawValue)"
        }
    }

    public var description: String { "\(rawValue) \(name)" }
}
