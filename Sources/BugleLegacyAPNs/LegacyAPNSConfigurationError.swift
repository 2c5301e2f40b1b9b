import BugleCore
import BugleHTTP2

/// Why the legacy APNs lane or its feedback client cannot start. Descriptions name files, never their
/// contents.
public struct LegacyAPNSConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Base: Sendable, Equatable {
        case keyFileReadableByOthers(path: String, mode: Int)
        case unreadableFile(path: String)
        case invalidKey(path: String)
        case encryptedKey(path: String)
        case invalidCertificate(path: String)
        case clientCertificateNotUsable(String)
        case tls(String)
        case proxy(ProxyConfigurationError)
    }

    private let base: Base

    /// The client key can be read by group or others (like ssh, refuse unless `allowReadableKeys`).
    public static func keyFileReadableByOthers(path: String, mode: Int) -> Self {
        Self(base: .keyFileReadableByOthers(path: path, mode: mode))
    }
    /// A file could not be read.
    public static func unreadableFile(path: String) -> Self { Self(base: .unreadableFile(path: path)) }
    /// The key file is not a PEM private key.
    public static func invalidKey(path: String) -> Self { Self(base: .invalidKey(path: path)) }
    /// The key file holds an encrypted private key (PKCS#8 `ENCRYPTED PRIVATE KEY`, or a traditional PEM with
    /// `Proc-Type: 4,ENCRYPTED`); `legacy_apns` takes an unencrypted one.
    public static func encryptedKey(path: String) -> Self { Self(base: .encryptedKey(path: path)) }
    /// A certificate file holds no usable PEM certificate.
    public static func invalidCertificate(path: String) -> Self { Self(base: .invalidCertificate(path: path)) }
    /// The client certificate has expired or is not yet valid (the reason names the file and the date).
    public static func clientCertificateNotUsable(_ reason: String) -> Self { Self(base: .clientCertificateNotUsable(reason)) }
    /// The TLS library refused the configuration.
    public static func tls(_ what: String) -> Self { Self(base: .tls(what)) }
    /// The section's proxy cannot be used (its credentials variable is unset, `https_proxy` is not a usable URL, or
    /// `proxy_ca_file` cannot be read).
    public static func proxy(_ error: ProxyConfigurationError) -> Self { Self(base: .proxy(error)) }

    public var description: String {
        switch base {
        case .keyFileReadableByOthers(let path, let mode):
            return "key file \(path) is readable by other users (mode \(String(mode, radix: 8))); "
                + "run chmod 600 on it, or pass --allow-readable-keys"
        case .unreadableFile(let path):
            return "cannot read \(path)" + (SecretFile.unreadableReason(path).map { ": \($0)" } ?? "")
        case .invalidKey(let path):
            return "\(path) is not a PEM private key"
        case .encryptedKey(let path):
            return "\(path) is an encrypted private key, and legacy_apns takes an unencrypted one: "
                + "decrypt it with `openssl pkey -in \(path) -out key.pem` (then chmod 600 key.pem) and name that file in key_file"
        case .invalidCertificate(let path):
            return "\(path) holds no usable PEM certificate"
        case .clientCertificateNotUsable(let reason):
            return reason
        case .tls(let what):
            return "TLS configuration rejected: \(what)"
        case .proxy(let error):
            return error.description
        }
    }
}
