import BugleCore
import Foundation

/// A validated device registration: what `register` and each good CSV row store in `bugle.devices`.
public struct DeviceRegistration: Sendable, Hashable {
    /// The owning user.
    public var userID: String
    /// The provider token; iOS tokens are stored as lowercase hex.
    public var token: String
    /// The platform.
    public var platform: Platform
    /// An optional locale such as `de` or `pt-BR`.
    public var locale: String?
    /// An optional IANA time-zone name such as `Europe/Berlin`.
    public var timezone: String?
    /// An optional app version string.
    public var appVersion: String?

    /// The longest token accepted, in bytes: what the devices table's unique index on (platform, token) holds with room
    /// to spare (about 2,700 bytes an entry; a 2,800-byte token failed the whole batch with SQLSTATE 54000). Real
    /// tokens are far shorter (APNs 64 hex digits, FCM about 160 characters).
    public static let maximumTokenLength = RecipientValidator.fcmTokenMaxLength
    /// The longest user id and optional value accepted, in characters.
    public static let maximumValueLength = 256

    /// A rejected value: the column it came from and why. Never contains the value itself for tokens.
    public struct Problem: Error, Sendable, Hashable, CustomStringConvertible {
        /// The column (`user_id`, `token`, `platform`, `locale`, `timezone`, `app_version`).
        public var column: String
        /// Why it was rejected.
        public var reason: String

        /// `"column X: reason"`.
        public var description: String { "column \(self.column): \(self.reason)" }
    }

    /// Validates and normalises raw values.
    ///
    /// `userID`, `platform` and the optional values are trimmed of surrounding spaces (empty optional values become
    /// `nil`); the token is taken verbatim and must contain no whitespace or control characters, be at most
    /// ``maximumTokenLength`` bytes, and for iOS be hexadecimal (an APNs device token, lowercased) or an FCM
    /// registration token (it has a colon; kept as given).
    ///
    /// - Parameters:
    ///   - userID: The owning user.
    ///   - token: The provider token.
    ///   - platform: `ios`, `android` or `web`, any case.
    ///   - locale: Optional locale.
    ///   - timezone: Optional time zone.
    ///   - appVersion: Optional app version.
    /// - Returns: The registration, or the first problem found.
    public static func validate(
        userID: String,
        token: String,
        platform: String,
        locale: String? = nil,
        timezone: String? = nil,
        appVersion: String? = nil
    ) -> Result<DeviceRegistration, Problem> {
        let user = Self.trimmed(userID)
        guard !user.isEmpty else { return .failure(Problem(column: "user_id", reason: "missing")) }
        if let reason = Self.plainTextProblem(user) {
            return .failure(Problem(column: "user_id", reason: reason))
        }
        let platformName = Self.trimmed(platform).lowercased()
        guard !platformName.isEmpty else { return .failure(Problem(column: "platform", reason: "missing")) }
        guard let parsedPlatform = Platform(name: platformName) else {
            let shown = platformName.count <= 20 && Self.plainTextProblem(platformName) == nil
                ? "'\(platformName)'" : "value"
            return .failure(
                Problem(column: "platform", reason: "unknown platform \(shown) (expected ios, android or web)")
            )
        }
        var normalizedToken = token
        guard !token.isEmpty else { return .failure(Problem(column: "token", reason: "missing")) }
        guard token.utf8.count <= Self.maximumTokenLength else {
            return .failure(Problem(column: "token", reason: "longer than \(Self.maximumTokenLength) bytes"))
        }
        if token.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.properties.generalCategory == .control }) {
            return .failure(Problem(column: "token", reason: "contains whitespace or control characters"))
        }
        if parsedPlatform == .ios {
            if RecipientValidator.isFCMRegistration(token) {
                // An app that registers its iOS devices with Firebase (campaigns with `ios_transport: fcm`).
                guard RecipientValidator.fcmToken(token) != nil else {
                    return .failure(Problem(column: "token", reason: "an FCM registration token may hold only letters, digits and - _ : ."))
                }
            } else {
                guard token.utf8.allSatisfy({ Self.isHexDigit($0) }) else {
                    return .failure(Problem(column: "token", reason: "an iOS token must be hexadecimal (an APNs device token) or an FCM registration token"))
                }
                // What a run would skip as `malformed_token` is refused here instead of stored.
                guard let canonical = RecipientValidator.normalizedToken(token, platform: .ios) else {
                    return .failure(
                        Problem(column: "token", reason: "an APNs device token is an even number of hex digits, 16 to 400 (usually 64); this one has \(token.utf8.count)"))
                }
                normalizedToken = canonical
            }
        } else if RecipientValidator.fcmToken(token) == nil {
            // Android and web devices are reached through FCM: a run would skip any other token as `malformed_token`.
            return .failure(Problem(column: "token", reason: "an FCM registration token may hold only letters, digits and - _ : ."))
        }
        var optionals: [String?] = []
        for (column, value) in [("locale", locale), ("timezone", timezone), ("app_version", appVersion)] {
            let text = value.map(Self.trimmed) ?? ""
            if text.isEmpty {
                optionals.append(nil)
                continue
            }
            if let reason = Self.plainTextProblem(text) {
                return .failure(Problem(column: column, reason: reason))
            }
            if column == "timezone", let reason = TimeZoneNames.problem(text, shown: text.count <= 64 ? "'\(text)'" : "value") {
                return .failure(Problem(column: column, reason: reason))
            }
            optionals.append(text)
        }
        return .success(
            DeviceRegistration(
                userID: user,
                token: normalizedToken,
                platform: parsedPlatform,
                locale: optionals[0],
                timezone: optionals[1],
                appVersion: optionals[2]
            )
        )
    }

    private static func trimmed(_ text: String) -> String {
        text.trimmingCharacters(in: .whitespaces)
    }

    private static func plainTextProblem(_ text: String) -> String? {
        if text.count > Self.maximumValueLength {
            return "longer than \(Self.maximumValueLength) characters"
        }
        if text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "contains control characters"
        }
        return nil
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
    }
}
