/// The kind of device a token belongs to, as stored in `bugle.devices.platform` and returned by segment SQL.
public enum Platform: String, Sendable, CaseIterable, Codable, Hashable {
    case ios
    case android
    case web
}

extension Platform {
    /// The platform named in any letter case (`IOS`, `Android`); exact lowercase, the usual spelling and once per
    /// segment row, is matched without lowercasing.
    public init?(name: String) {
        switch name {
        case "ios": self = .ios
        case "android": self = .android
        case "web": self = .web
        default: self.init(rawValue: name.lowercased())
        }
    }
}

/// A provider lane a recipient is routed to.
public enum ProviderKind: String, Sendable, CaseIterable, Codable, Hashable {
    /// Apple's HTTP/2 provider API.
    case apns
    /// Google's FCM HTTP v1 API (Android and web).
    case fcm
    /// The legacy binary APNs protocol over a TLS socket.
    case legacyAPNs = "apns_legacy"
    /// No network: a dry run or a test double.
    case none

    /// The providers file's section that configures this lane (`legacy_apns:` for ``legacyAPNs``).
    public var providersSection: String {
        switch self {
        case .apns: "apns"
        case .fcm: "fcm"
        case .legacyAPNs: "legacy_apns"
        case .none: "none"
        }
    }
}
