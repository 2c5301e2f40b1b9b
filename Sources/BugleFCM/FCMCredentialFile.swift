import BugleHTTP2
import Foundation

/// What `service_account_file` (or `GOOGLE_APPLICATION_CREDENTIALS`) names: a service account's key, or a workload
/// identity federation configuration, told apart by its `type` as Google's client libraries do.
public enum FCMCredentialFile: Sendable {
    /// `"type": "service_account"`.
    case serviceAccount(FCMServiceAccount)
    /// `"type": "external_account"`.
    case externalAccount(FCMExternalAccount)

    /// Loads the file. A service account's key must not be readable by group or others (unless `allowReadableKeys`);
    /// an `external_account` configuration holds no secret, so it may be (a Kubernetes ConfigMap is mounted 0644).
    /// - Throws: ``FCMConfigurationError`` naming the file and the key at fault.
    public static func load(path: String, allowReadableKeys: Bool) throws(FCMConfigurationError) -> FCMCredentialFile {
        guard case .success(let data) = SecretFile.read(path, allowReadableByOthers: true) else {
            throw .unreadableFile(path: path)
        }
        let type = ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any])?["type"] as? String
        switch type {
        case "external_account":
            return .externalAccount(try FCMExternalAccount.parse(data, path: path))
        case "service_account", nil:
            return .serviceAccount(try FCMServiceAccount.load(path: path, allowReadableKeys: allowReadableKeys))
        case let other?:
            throw .malformed(path: path, detail: "\"type\" is \"\(other)\", expected \"service_account\" or \"external_account\"")
        }
    }
}
