import BugleHTTP2
import Crypto
import Foundation
import _CryptoExtras

/// A Google service account as downloaded from the Firebase console (PROTOCOLS.md §2.5): the project,
/// the signing key and where to trade an assertion for an access token.
public struct FCMServiceAccount: Sendable {
    /// `project_id`: the `{id}` of `/v1/projects/{id}/messages:send`.
    public var projectID: String
    /// `private_key_id`: the assertion's `kid`.
    public var privateKeyID: String
    /// `client_email`: the assertion's `iss`.
    public var clientEmail: String
    /// `token_uri`: where assertions are exchanged (must be https).
    public var tokenURI: URL
    /// The RSA signing key (never printed).
    let privateKey: _RSA.Signing.PrivateKey

    /// Loads a service-account JSON file, refusing one that group or others can read.
    /// - Parameters:
    ///   - path: The file.
    ///   - allowReadableKeys: Accept group/other-readable files (`--allow-readable-keys`).
    /// - Returns: The account.
    /// - Throws: ``FCMConfigurationError`` naming the file and the offending key.
    public static func load(path: String, allowReadableKeys: Bool) throws(FCMConfigurationError) -> FCMServiceAccount {
        switch SecretFile.read(path, allowReadableByOthers: allowReadableKeys) {
        case .success(let data):
            return try parse(data, path: path)
        case .failure(.unreadable):
            throw .unreadableFile(path: path)
        case .failure(.readableByOthers(let mode)):
            throw .readableByOthers(path: path, mode: mode)
        }
    }

    /// Parses service-account JSON.
    /// - Parameters:
    ///   - data: The file's bytes.
    ///   - path: The file name, for errors.
    /// - Returns: The account.
    /// - Throws: ``FCMConfigurationError``.
    public static func parse(_ data: Data, path: String) throws(FCMConfigurationError) -> FCMServiceAccount {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw .malformed(path: path, detail: "not a JSON object")
        }
        func string(_ key: String) throws(FCMConfigurationError) -> String {
            guard let value = object[key] as? String, !value.isEmpty else {
                throw .malformed(path: path, detail: "missing or empty \"\(key)\"")
            }
            return value
        }
        let type = try string("type")
        guard type == "service_account" else {
            throw .malformed(path: path, detail: "\"type\" is \"\(type)\", expected \"service_account\"")
        }
        let projectID = try string("project_id")
        guard projectID.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") }) else {
            throw .malformed(path: path, detail: "\"project_id\" has characters a project id cannot have")
        }
        let keyID = try string("private_key_id")
        let email = try string("client_email")
        let tokenURIText = (object["token_uri"] as? String) ?? "https://oauth2.googleapis.com/token"
        guard let tokenURI = URL(string: tokenURIText), tokenURI.scheme == "https", tokenURI.host != nil else {
            throw .malformed(path: path, detail: "\"token_uri\" must be an https URL")
        }
        let pem = try string("private_key")
        guard let key = try? _RSA.Signing.PrivateKey(pemRepresentation: pem) else {
            throw .malformed(path: path, detail: "\"private_key\" is not a PEM RSA private key")
        }
        guard key.keySizeInBits >= 2048 else {
            throw .malformed(path: path, detail: "\"private_key\" is shorter than 2048 bits")
        }
        return FCMServiceAccount(projectID: projectID, privateKeyID: keyID, clientEmail: email, tokenURI: tokenURI, privateKey: key)
    }
}
