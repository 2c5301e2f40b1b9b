/// Checks a segment row before it can become a recipient: required columns present, platform known,
/// token well-formed for its platform. Pure and table-tested.
public enum RecipientValidator {
    /// iOS tokens: even-length hex, 16...400 characters (Apple: variable length, do not hard-code 64).
    static let iosTokenLength = 16...400
    /// FCM registration tokens: printable URL-safe characters only, at most 2,048 bytes (an index entry of PostgreSQL
    /// holds about 2,700: the devices table's, and the run's token index while its segment is read).
    public static let fcmTokenMaxLength = 2048

    /// The valid recipient, or the reason the row is skipped.
    /// - Parameter iosTransport: How iOS devices are reached: their tokens are APNs device tokens, or FCM registration
    ///   tokens with `fcm`.
    public static func validate(_ row: SegmentRow, iosTransport: IOSTransport = .http2) -> Result<ValidRecipient, SkipReasonError> {
        guard let deviceID = row.deviceID else { return .failure(SkipReasonError(.missingDeviceID)) }
        guard let userID = row.userID, !userID.isEmpty else { return .failure(SkipReasonError(.missingUserID)) }
        guard let rawToken = row.token, !rawToken.isEmpty else { return .failure(SkipReasonError(.missingToken)) }
        guard let rawPlatform = row.platform, let platform = Platform(name: rawPlatform) else {
            return .failure(SkipReasonError(.unknownPlatform))
        }
        guard let token = normalizedToken(rawToken, platform: platform, iosViaFCM: iosTransport == .fcm) else {
            return .failure(SkipReasonError(.malformedToken))
        }
        return .success(
            ValidRecipient(
                deviceID: deviceID, userID: userID, token: token, platform: platform,
                locale: row.locale, timezone: row.timezone, variables: row.variables
            )
        )
    }

    /// The token in canonical form, or nil when malformed.
    /// - Parameter iosViaFCM: iOS devices are reached through FCM, so an iOS token is an FCM registration token.
    public static func normalizedToken(_ token: String, platform: Platform, iosViaFCM: Bool = false) -> String? {
        switch platform {
        case .ios where iosViaFCM:
            return fcmToken(token)
        case .ios:
            let utf8 = token.utf8
            guard iosTokenLength.contains(utf8.count), utf8.count % 2 == 0 else { return nil }
            // Fast path: already canonical (lowercase hex) — no copy. Read as contiguous bytes where the string has
            // them (a loop over a buffer, not the UTF-8 view's iterator).
            let isLowerHex: (UInt8) -> Bool = { $0 &- 0x30 < 10 || $0 &- 0x61 < 6 }
            if utf8.withContiguousStorageIfAvailable({ $0.allSatisfy(isLowerHex) }) ?? utf8.allSatisfy(isLowerHex) { return token }
            var lowered = [UInt8]()
            lowered.reserveCapacity(utf8.count)
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): lowered.append(byte)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): lowered.append(byte + 32)
                default: return nil
                }
            }
            return String(decoding: lowered, as: UTF8.self)
        case .android, .web:
            return fcmToken(token)
        }
    }

    /// An FCM registration token as given (printable URL-safe characters, at most ``fcmTokenMaxLength`` bytes), or nil.
    public static func fcmToken(_ token: String) -> String? {
        let utf8 = token.utf8
        guard !utf8.isEmpty, utf8.count <= fcmTokenMaxLength else { return nil }
        let valid = utf8.withContiguousStorageIfAvailable(onlyFCMTokenBytes) ?? onlyFCMTokenBytes(Array(utf8))
        return valid ? token : nil
    }

    /// True when every byte is one an FCM registration token may hold: `0-9 a-z A-Z _ - : .`.
    ///
    /// One bit per byte value below 128 (two words), looked up without a branch per byte: a `switch` of ranges, or an
    /// early exit, mispredicted on tokens that mix digits and letters (150 bytes, every row).
    private static func onlyFCMTokenBytes(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var rejected: UInt64 = 0
        for byte in bytes {
            let word = byte & 64 == 0 ? fcmTokenBytesLow : fcmTokenBytesHigh
            rejected |= ~(word >> UInt64(byte & 63)) & 1 | UInt64(byte >> 7)
        }
        return rejected == 0
    }

    private static func onlyFCMTokenBytes(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBufferPointer(onlyFCMTokenBytes) }

    /// Bytes 0–63 allowed in an FCM token: `-` `.` `0-9` `:` (bit n: byte n).
    private static let fcmTokenBytesLow: UInt64 = 0x07FF_6000_0000_0000
    /// Bytes 64–127 allowed in an FCM token: `A-Z` `_` `a-z` (bit n: byte 64 + n).
    private static let fcmTokenBytesHigh: UInt64 = 0x07FF_FFFE_87FF_FFFE

    /// True for an iOS token that is an FCM registration token (`<instance id>:<token>`) rather than an APNs device
    /// token: APNs tokens are hexadecimal and never contain a colon.
    public static func isFCMRegistration(_ token: String) -> Bool {
        token.utf8.contains(UInt8(ascii: ":"))
    }
}

/// A ``SkipReason`` as an `Error`, so validation can return `Result`.
public struct SkipReasonError: Error, Equatable, Sendable {
    public var reason: SkipReason
    public init(_ reason: SkipReason) { self.reason = reason }
}
