import Foundation

/// One FCM error answer in Google's RPC model (PROTOCOLS.md §2.3):
/// `{"error":{"code":…,"message":…,"status":…,"details":[{"@type":"…FcmError","errorCode":…}, …]}}`.
public struct FCMError: Sendable, Equatable {
    /// `FcmError.errorCode`. Open-ended: an unfamiliar code is kept, never lost.
    public struct Reason: Sendable, Hashable, CustomStringConvertible {
        private enum Known: String, Sendable {
            case unspecified = "UNSPECIFIED_ERROR"
            case invalidArgument = "INVALID_ARGUMENT"
            case unregistered = "UNREGISTERED"
            case senderIDMismatch = "SENDER_ID_MISMATCH"
            case quotaExceeded = "QUOTA_EXCEEDED"
            case unavailable = "UNAVAILABLE"
            case internalError = "INTERNAL"
            case thirdPartyAuthError = "THIRD_PARTY_AUTH_ERROR"
            case apnsAuthError = "APNS_AUTH_ERROR"
        }

        private enum Base: Sendable, Hashable {
            case known(Known)
            case unknown(String)
        }

        private let base: Base

        /// Wraps a wire string.
        /// - Parameter rawValue: The `errorCode`.
        public init(rawValue: String) {
            base = Known(rawValue: rawValue).map(Base.known) ?? .unknown(rawValue)
        }

        /// The wire string.
        public var rawValue: String {
            switch base {
            case .known(let known): return known.rawValue
            case .unknown(let raw): return raw
            }
        }

        public var description: String { rawValue }

        public static let unspecified = Reason(rawValue: "UNSPECIFIED_ERROR")
        public static let invalidArgument = Reason(rawValue: "INVALID_ARGUMENT")
        public static let unregistered = Reason(rawValue: "UNREGISTERED")
        public static let senderIDMismatch = Reason(rawValue: "SENDER_ID_MISMATCH")
        public static let quotaExceeded = Reason(rawValue: "QUOTA_EXCEEDED")
        public static let unavailable = Reason(rawValue: "UNAVAILABLE")
        public static let internalError = Reason(rawValue: "INTERNAL")
        public static let thirdPartyAuthError = Reason(rawValue: "THIRD_PARTY_AUTH_ERROR")
        public static let apnsAuthError = Reason(rawValue: "APNS_AUTH_ERROR")
    }

    /// HTTP status.
    public var httpStatus: Int
    /// Top-level canonical `status` (`NOT_FOUND`, `INVALID_ARGUMENT`, …), if present.
    public var status: String?
    /// The `FcmError` detail's `errorCode`, if present.
    public var reason: Reason?
    /// Human-readable `message` (Google's text; never contains our secrets).
    public var message: String?
    /// `google.rpc.BadRequest` field names (`message.token`, `message.data[0].value`, …).
    public var fieldViolations: [String]

    /// Creates an error value.
    public init(httpStatus: Int, status: String? = nil, reason: Reason? = nil, message: String? = nil, fieldViolations: [String] = []) {
        self.httpStatus = httpStatus
        self.status = status
        self.reason = reason
        self.message = message
        self.fieldViolations = fieldViolations
    }

    /// Parses an error body; a body that is not Google's model yields just the status.
    /// - Parameters:
    ///   - httpStatus: The HTTP status.
    ///   - body: The body bytes.
    /// - Returns: The error.
    public static func parse(httpStatus: Int, body: some Collection<UInt8>) -> FCMError {
        var result = FCMError(httpStatus: httpStatus)
        guard !body.isEmpty,
            let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any],
            let error = object["error"] as? [String: Any]
        else {
            return result
        }
        result.status = error["status"] as? String
        result.message = error["message"] as? String
        for detail in (error["details"] as? [[String: Any]]) ?? [] {
            let type = (detail["@type"] as? String) ?? ""
            if type.hasSuffix("google.firebase.fcm.v1.FcmError"), let code = detail["errorCode"] as? String {
                result.reason = Reason(rawValue: code)
            } else if type.hasSuffix("google.rpc.BadRequest") {
                for violation in (detail["fieldViolations"] as? [[String: Any]]) ?? [] {
                    if let field = violation["field"] as? String { result.fieldViolations.append(field) }
                }
            }
        }
        return result
    }

    /// True when an `INVALID_ARGUMENT` is about the registration token rather than the message.
    public var isAboutToken: Bool {
        if fieldViolations.contains(where: { $0 == "message.token" || $0.hasPrefix("message.token") }) { return true }
        guard let message = message?.lowercased() else { return false }
        return message.contains("registration token")
    }
}
