import BugleCore
import BugleHTTP2

/// Why the FCM lane cannot start. Descriptions name files and keys, never their contents.
public struct FCMConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    private indirect enum Base: Sendable, Equatable {
        case noServiceAccount
        case pastedInEnvironment(variable: String, PastedSecret)
        case fromEnvironment(variable: String, path: String, Base)
        case unreadableFile(path: String)
        case readableByOthers(path: String, mode: Int)
        case malformed(path: String, detail: String)
        case malformedExternalAccount(path: String, detail: String)
        case invalidCertificate(path: String)
        case unsupported(String)
        case proxy(ProxyConfigurationError)
    }

    private let base: Base

    /// Neither `service_account_file` nor `GOOGLE_APPLICATION_CREDENTIALS` names a file.
    public static let noServiceAccount = Self(base: .noServiceAccount)
    /// An environment variable that should name a file holds a secret instead (its value is never shown).
    public static func pastedInEnvironment(variable: String, _ secret: PastedSecret) -> Self {
        Self(base: .pastedInEnvironment(variable: variable, secret))
    }
    /// `error`, about the file an environment variable names: said with the variable, as `VARIABLE=path: …`.
    public static func fromEnvironment(variable: String, path: String, _ error: Self) -> Self {
        Self(base: .fromEnvironment(variable: variable, path: path, error.base))
    }
    /// A file could not be read.
    public static func unreadableFile(path: String) -> Self { Self(base: .unreadableFile(path: path)) }
    /// The service-account file can be read by group or others.
    public static func readableByOthers(path: String, mode: Int) -> Self {
        Self(base: .readableByOthers(path: path, mode: mode))
    }
    /// The service-account file is not a usable Google service account (`detail` names the key).
    public static func malformed(path: String, detail: String) -> Self { Self(base: .malformed(path: path, detail: detail)) }
    /// The `external_account` (workload identity federation) configuration is not usable (`detail` names the key).
    public static func malformedExternalAccount(path: String, detail: String) -> Self {
        Self(base: .malformedExternalAccount(path: path, detail: detail))
    }
    /// A CA file holds no usable certificate.
    public static func invalidCertificate(path: String) -> Self { Self(base: .invalidCertificate(path: path)) }
    /// A configuration this build does not support.
    public static func unsupported(_ what: String) -> Self { Self(base: .unsupported(what)) }
    /// The section's proxy cannot be used (its credentials variable is unset, or `https_proxy` is not a usable URL).
    public static func proxy(_ error: ProxyConfigurationError) -> Self { Self(base: .proxy(error)) }

    public var description: String { Self.describe(base) }

    private static func describe(_ base: Base) -> String {
        switch base {
        case .pastedInEnvironment(let variable, let secret):
            return "\(variable) holds \(secret.noun), not a path: set it to the file's path (keep secrets in files)"
        case .fromEnvironment(let variable, let path, let error):
            return "\(variable)=\(path): " + describe(error)
        case .noServiceAccount:
            return "no service account; set service_account_file or GOOGLE_APPLICATION_CREDENTIALS"
        case .unreadableFile(let path):
            return "cannot read \(path)" + (SecretFile.unreadableReason(path).map { ": \($0)" } ?? "")
        case .readableByOthers(let path, let mode):
            return "service account file \(path) is readable by other users (mode \(String(mode, radix: 8))); "
                + "run chmod 600 on it, or pass --allow-readable-keys"
        case .malformed(let path, let detail):
            return "service account file \(path): \(detail)"
        case .malformedExternalAccount(let path, let detail):
            return "external account file \(path): \(detail)"
        case .invalidCertificate(let path):
            return "\(path) holds no usable PEM certificate"
        case .unsupported(let what):
            return "unsupported FCM configuration: \(what)"
        case .proxy(let error):
            return error.description
        }
    }
}
