import BugleHTTP2
import Crypto
import Foundation

/// Reads key files for the APNs lane, refusing files that group or others can read.
enum APNSKeyFile {
    /// Checks the mode of `path`.
    /// - Parameters:
    ///   - path: Key file.
    ///   - allowReadableKeys: Skip the check.
    /// - Throws: ``APNSConfigurationError``.
    static func checkPermissions(_ path: String, allowReadableKeys: Bool) throws(APNSConfigurationError) {
        switch SecretFile.check(path, allowReadableByOthers: allowReadableKeys) {
        case nil: return
        case .unreadable: throw .unreadableFile(path: path)
        case .readableByOthers(let mode): throw .keyFileReadableByOthers(path: path, mode: mode)
        }
    }

    /// Reads a PEM text file; a binary file (DER, most often) is refused as not PEM rather than unreadable.
    static func readText(_ path: String) throws(APNSConfigurationError) -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .unreadableFile(path: path)
        }
        guard let text = String(data: data, encoding: .utf8), !text.contains("\u{0}") else {
            // DER starts with an ASN.1 SEQUENCE tag.
            throw .notPEM(path: path, looksLikeDER: data.first == 0x30)
        }
        return text
    }

    /// Loads a `.p8` (PKCS#8 PEM) P-256 key after the permission check.
    static func loadP8(_ path: String, allowReadableKeys: Bool) throws(APNSConfigurationError) -> P256.Signing.PrivateKey {
        try checkPermissions(path, allowReadableKeys: allowReadableKeys)
        let pem = try readText(path)
        guard let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) else {
            throw .invalidKey(path: path)
        }
        return key
    }
}
