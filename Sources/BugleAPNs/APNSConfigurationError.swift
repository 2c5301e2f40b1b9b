import BugleCore
import BugleHTTP2

/// Why the APNs lane cannot start. Descriptions name files, never their contents.
public struct APNSConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Base: Sendable, Equatable {
        case keyFileReadableByOthers(path: String, mode: Int)
        case unreadableFile(path: String)
        /// A binary file where PEM text is read.
        case notPEM(path: String, looksLikeDER: Bool)
        case invalidKey(path: String)
        case encryptedKey(path: String)
        case invalidCertificate(path: String)
        case clientCertificateNotUsable(String)
        case invalidIdentifier(field: String)
        case missingPassphrase(variable: String)
        case wrongPassphraseOrBundle(path: String, variable: String?)
        case unsupported(String)
        case proxy(ProxyConfigurationError)
    }

    private let base: Base

    /// A key file can be read by group or others (like ssh, refuse unless `allowReadableKeys`).
    public static func keyFileReadableByOthers(path: String, mode: Int) -> Self {
        Self(base: .keyFileReadableByOthers(path: path, mode: mode))
    }
    /// A file could not be read.
    public static func unreadableFile(path: String) -> Self { Self(base: .unreadableFile(path: path)) }
    /// A file read as PEM text is binary (DER, most often).
    public static func notPEM(path: String, looksLikeDER: Bool) -> Self { Self(base: .notPEM(path: path, looksLikeDER: looksLikeDER)) }
    /// A key file is not a usable key.
    public static func invalidKey(path: String) -> Self { Self(base: .invalidKey(path: path)) }
    /// The client key is encrypted and no `passphrase_env` names its passphrase.
    public static func encryptedKey(path: String) -> Self { Self(base: .encryptedKey(path: path)) }
    /// A certificate file is not usable.
    public static func invalidCertificate(path: String) -> Self { Self(base: .invalidCertificate(path: path)) }
    /// The client certificate has expired or is not yet valid (the reason names the file and the date).
    public static func clientCertificateNotUsable(_ reason: String) -> Self { Self(base: .clientCertificateNotUsable(reason)) }
    /// `team_id` or `key_id` is not 10 alphanumeric characters.
    public static func invalidIdentifier(field: String) -> Self { Self(base: .invalidIdentifier(field: field)) }
    /// `passphrase_env` names a variable that is not set.
    public static func missingPassphrase(variable: String) -> Self { Self(base: .missingPassphrase(variable: variable)) }
    /// A PKCS#12 bundle or encrypted key could not be opened (wrong passphrase, or not such a file).
    public static func wrongPassphraseOrBundle(path: String, variable: String?) -> Self {
        Self(base: .wrongPassphraseOrBundle(path: path, variable: variable))
    }
    /// A configuration this build does not support.
    public static func unsupported(_ what: String) -> Self { Self(base: .unsupported(what)) }
    /// The section's proxy cannot be used (its credentials variable is unset, or `https_proxy` is not a usable URL).
    public static func proxy(_ error: ProxyConfigurationError) -> Self { Self(base: .proxy(error)) }

    public var description: String {
        switch base {
        case .keyFileReadableByOthers(let path, let mode):
            return "key file \(path) is readable by other users (mode \(String(mode, radix: 8))); "
                + "run chmod 600 on it, or pass --allow-readable-keys"
        case .unreadableFile(let path):
            return "cannot read \(path)" + (SecretFile.unreadableReason(path).map { ": \($0)" } ?? "")
        case .notPEM(let path, let looksLikeDER):
            return "\(path) is not PEM text"
                + (looksLikeDER
                    ? ": it holds binary DER; convert it to PEM (`openssl x509 -inform der -in FILE -out FILE.pem` for a certificate, "
                        + "`openssl pkey -inform der -in FILE -out FILE.pem` for a key)"
                    : "")
        case .invalidKey(let path):
            return "\(path) is not a PEM private key of the expected type"
        case .encryptedKey(let path):
            return "\(path) is an encrypted private key: set passphrase_env to the environment variable that holds its passphrase"
        case .invalidCertificate(let path):
            return "\(path) holds no usable PEM certificate"
        case .clientCertificateNotUsable(let reason):
            return reason
        case .invalidIdentifier(let field):
            return "apns \(field) must be 10 letters or digits"
        case .missingPassphrase(let variable):
            return "apns.auth.certificate.passphrase_env names \(variable), which is not set in the environment"
        case .wrongPassphraseOrBundle(let path, let variable):
            guard let variable else {
                // Only a PKCS#12 bundle is opened without a passphrase here; an encrypted one needs it.
                return "\(path) could not be opened without a passphrase: it may be encrypted (set passphrase_env to the "
                    + "environment variable that holds its passphrase), or it is not a valid PKCS#12 bundle"
            }
            return "\(path) could not be opened with the passphrase in \(variable): wrong passphrase, or not a valid key or PKCS#12 bundle"
        case .unsupported(let what):
            return "unsupported APNs configuration: \(what)"
        case .proxy(let error):
            return error.description
        }
    }
}
