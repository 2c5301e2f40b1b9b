import BugleCore
import Foundation

/// A workload identity federation credential configuration (`"type": "external_account"`, as `gcloud iam
/// workload-identity-pools create-cred-config` writes it): no key, only where to find a token the workload's own
/// identity provider issued (a Kubernetes projected service-account token, an OIDC token, Azure's managed identity)
/// and how to trade it at Google's STS for an access token, optionally then impersonating a service account.
///
/// Supported `credential_source`s: `file` (read at each exchange, as a projected token is rotated) and `url` over plain
/// `http://` (a link-local metadata service such as Azure's) or `https://` (an identity provider's token URL, such as
/// GitHub Actions'), with its `headers`, each with `format` `text` or `json`
/// (`subject_token_field_name`); AWS (`environment_id: aws1`, see ``FCMAWSCredentialSource``); and `executable` (see
/// ``FCMExecutableSource``).
public struct FCMExternalAccount: Sendable {
    /// Where the subject token is read.
    public enum Source: Sendable, Equatable {
        /// A file, read at each exchange.
        case file(String)
        /// A `GET` with these headers: plain HTTP (a link-local metadata service), or HTTPS when `secure` (an identity
        /// provider's token URL, such as GitHub Actions' `ACTIONS_ID_TOKEN_REQUEST_URL`).
        case url(host: String, port: Int, path: String, headers: [String: String], secure: Bool = false)
        /// A signed AWS `GetCallerIdentity` request.
        case aws(FCMAWSCredentialSource)
        /// A program's response.
        case executable(FCMExecutableSource)
    }

    /// How the subject token is written where it is read.
    public enum Format: Sendable, Equatable {
        /// The whole text, trimmed.
        case text
        /// This string field of a JSON object.
        case json(field: String)
    }

    /// The workload identity pool provider (`//iam.googleapis.com/projects/…/providers/…`).
    public var audience: String
    /// `subject_token_type` (`urn:ietf:params:oauth:token-type:jwt`, `…:id_token`, `…:saml2`).
    public var subjectTokenType: String
    /// Google's STS endpoint (`token_url`, https).
    public var tokenURL: URL
    /// IAM credentials' `generateAccessToken` for the service account to act as, if any (https).
    public var impersonationURL: URL?
    /// The service account ``impersonationURL`` names (`…/serviceAccounts/{email}:generateAccessToken`), if any.
    public var impersonatedEmail: String? {
        guard let last = impersonationURL?.lastPathComponent, let colon = last.lastIndex(of: ":") else { return nil }
        return String(last[..<colon])
    }
    /// `service_account_impersonation.token_lifetime_seconds` (default 3600).
    public var impersonationLifetime: Int
    /// Where the subject token is read.
    public var source: Source
    /// How it is written there.
    public var format: Format

    /// Parses an `external_account` configuration.
    /// - Parameters:
    ///   - data: The file's bytes.
    ///   - path: The file, for errors.
    /// - Throws: ``FCMConfigurationError`` naming the file and the key at fault.
    public static func parse(_ data: Data, path: String) throws(FCMConfigurationError) -> FCMExternalAccount {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw .malformedExternalAccount(path: path, detail: "not a JSON object")
        }
        func string(_ key: String, in object: [String: Any], named name: String? = nil) throws(FCMConfigurationError) -> String {
            guard let value = object[key] as? String, !value.isEmpty else {
                throw .malformedExternalAccount(path: path, detail: "missing or empty \"\(name ?? key)\"")
            }
            return value
        }
        func httpsURL(_ key: String) throws(FCMConfigurationError) -> URL {
            guard let url = URL(string: try string(key, in: object)), url.scheme == "https", url.host != nil else {
                throw .malformedExternalAccount(path: path, detail: "\"\(key)\" must be an https URL")
            }
            return url
        }
        guard (object["type"] as? String) == "external_account" else {
            throw .malformedExternalAccount(path: path, detail: "\"type\" is not \"external_account\"")
        }
        let audience = try string("audience", in: object)
        let subjectTokenType = try string("subject_token_type", in: object)
        let tokenURL = try httpsURL("token_url")
        let impersonationURL = object["service_account_impersonation_url"] == nil ? nil : try httpsURL("service_account_impersonation_url")
        var lifetime = 3600
        if let impersonation = object["service_account_impersonation"] as? [String: Any], let seconds = impersonation["token_lifetime_seconds"] {
            guard let value = seconds as? Int, (600...43_200).contains(value) else {
                throw .malformedExternalAccount(path: path, detail: "\"service_account_impersonation.token_lifetime_seconds\" must be 600 to 43200")
            }
            lifetime = value
        }
        guard let source = object["credential_source"] as? [String: Any] else {
            throw .malformedExternalAccount(path: path, detail: "missing \"credential_source\": \(Self.sourceKinds)")
        }
        let parsed = try Self.source(source, path: path)
        if case .aws = parsed, subjectTokenType != FCMAWSCredentialSource.subjectTokenType {
            throw .malformedExternalAccount(path: path, detail: "an AWS credential_source needs \"subject_token_type\": \"\(FCMAWSCredentialSource.subjectTokenType)\"")
        }
        if case .executable = parsed, !FCMExecutableSource.subjectTokenTypes.contains(subjectTokenType) {
            throw .malformedExternalAccount(path: path, detail: "an executable credential_source needs a jwt, id_token or saml2 \"subject_token_type\"")
        }
        return FCMExternalAccount(
            audience: audience, subjectTokenType: subjectTokenType, tokenURL: tokenURL, impersonationURL: impersonationURL,
            impersonationLifetime: lifetime, source: parsed, format: try Self.format(source, path: path))
    }

    /// The four kinds of `credential_source`, for an error about one that names none.
    private static let sourceKinds = "it needs \"file\", \"url\", \"executable\" or \"environment_id\": \"aws1\""

    private static func source(_ source: [String: Any], path: String) throws(FCMConfigurationError) -> Source {
        if source["environment_id"] != nil {
            return .aws(try FCMAWSCredentialSource.parse(source, path: path))
        }
        if let executable = source["executable"] {
            guard let object = executable as? [String: Any] else {
                throw .malformedExternalAccount(path: path, detail: "\"credential_source.executable\" must be an object")
            }
            return .executable(try FCMExecutableSource.parse(object, path: path))
        }
        if let file = source["file"] as? String, !file.isEmpty {
            // A token pasted where its file belongs would be echoed in "cannot read the subject token file …", on
            // stderr and in the run's pause reason.
            if let secret = PastedSecret.judge(file) {
                throw .malformedExternalAccount(path: path, detail: "\"credential_source.file\" holds \(secret.noun), not the path of the file that holds it")
            }
            return .file(file)
        }
        guard let text = source["url"] as? String, !text.isEmpty else {
            throw .malformedExternalAccount(
                path: path, detail: "\"credential_source\" names no subject token source: \(Self.sourceKinds)")
        }
        guard let url = URL(string: text), let host = url.host, let scheme = url.scheme?.lowercased() else {
            throw .malformedExternalAccount(path: path, detail: "\"credential_source.url\" is not a URL")
        }
        guard scheme == "http" || scheme == "https" else {
            throw .malformedExternalAccount(path: path, detail: "\"credential_source.url\" must be an http:// or https:// URL")
        }
        let headers = (source["headers"] as? [String: String]) ?? [:]
        let target = (url.path.isEmpty ? "/" : url.path) + (url.query.map { "?" + $0 } ?? "")
        let secure = scheme == "https"
        return .url(host: host, port: url.port ?? (secure ? 443 : 80), path: target, headers: headers, secure: secure)
    }

    private static func format(_ source: [String: Any], path: String) throws(FCMConfigurationError) -> Format {
        guard let format = source["format"] as? [String: Any] else { return .text }
        switch format["type"] as? String {
        case nil, "text":
            return .text
        case "json":
            guard let field = format["subject_token_field_name"] as? String, !field.isEmpty else {
                throw .malformedExternalAccount(path: path, detail: "missing or empty \"credential_source.format.subject_token_field_name\"")
            }
            return .json(field: field)
        default:
            throw .malformedExternalAccount(path: path, detail: "\"credential_source.format.type\" must be text or json")
        }
    }
}
