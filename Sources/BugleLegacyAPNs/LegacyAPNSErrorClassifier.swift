import BugleCore

/// Translates the status of a legacy error response into a provider-neutral ``SendOutcome`` for the
/// notification it names (RELIABILITY.md §3.5). Pure; table-tested.
///
/// | Status | Outcome |
/// |---|---|
/// | 8 invalid token | `invalidToken` (deactivate) |
/// | 2 missing token, 4 missing payload, 5 invalid token size, 7 invalid payload size | `rejected` |
/// | 3 missing topic, 6 invalid topic size, 128 protocol error | `halt` (the certificate or the frame format is wrong for every notification) |
/// | 1 processing error, 255 unknown, any unlisted value | `retry` charged to the recipient |
///
/// Status 10 (shutdown) does not judge a notification: the lane resends what followed the identifier, so
/// it never reaches this table in normal operation; it maps to a provider retry for completeness.
public enum LegacyAPNSErrorClassifier {
    /// The outcome for the notification an error response names.
    /// - Parameter status: The response's status.
    /// - Returns: The outcome.
    public static func classify(_ status: LegacyAPNSStatus) -> SendOutcome {
        let code = status.name
        switch status {
        case .invalidToken:
            return .invalidToken(code: code, invalidSince: nil)
        case .missingDeviceToken, .missingPayload, .invalidTokenSize, .invalidPayloadSize:
            return .rejected(code: code)
        case .missingTopic, .invalidTopicSize:
            return .halt(code: code, message: "the legacy gateway rejected the topic (status \(status.rawValue)): check the client certificate")
        case .protocolError:
            return .halt(code: code, message: "the legacy gateway could not parse a notification frame (status 128)")
        case .shutdown:
            return .retry(.provider, code: code, after: nil)
        default:
            return .retry(.recipient, code: code, after: nil)
        }
    }
}
