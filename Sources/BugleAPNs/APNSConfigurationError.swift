/// Why the APNs lane cannot start. Descriptions name files, never their contents.
public struct APNSConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Base: Sendable, Equatable {
        case keyFileReadableByOthers(path: String, mode: Int)
        case unreadableFile(path: String)
        case invalidKey(path: String)
        case invalidCertificate(path: String)
        case invalidIdentifier(field: String)
        case unsupported(String)
    }

    private let base: Base

    /// A key file can be read by group or others (like ssh, refuse unless `allowReadableKeys`).
    public static func keyFileReadableByOthers(path: String, mode: Int) -> Self {
        Self(base: .keyFileReadableByOthers(path: path, mode: mode))
    }
    /// A file could not be read.
    public static func unreadableFile(path: String) -> Self { Self(base: .unreadableFile(path: path)) }
    /// A key file is not a usable key.
    public static func invalidKey(path: String) -> Self { Self(base: .invalidKey(path: path)) }
    /// A certificate file is not usable.
    public static func invalidCertificate(path: String) -> Self { Self(base: .invalidCertificate(path: path)) }
    /// `team_id` or `key_id` is not 10 alphanumeric characters.
    public static func invalidIdentifier(field: String) -> Self { Self(base: .invalidIdentifier(field: field)) }
    /// A configuration this build does not support.
    public static func unsupported(_ what: String) -> Self { Self(base: .unsupported(what)) }

    public var description: String {
        switch base {
        case .keyFileReadableByOthers(let path, let mode):
            return "key file \(path) is readable by other users (mode \(String(mode, radix: 8))); "
                + "run chmod 600 on it, or pass --allow-readable-keys"
        case .unreadableFile(let path):
            return "cannot read \(path)"
        case .invalidKey(let path):
            return "\(path) is not a PEM private key of the expected type"
        case .invalidCertificate(let path):
            return "\(path) holds no usable PEM certificate"
        case .invalidIdentifier(let field):
            return "apns \(field) must be 10 letters or digits"
        case .unsupported(let what):
            return "unsupported APNs configuration: \(what)"
        }
    }
}
