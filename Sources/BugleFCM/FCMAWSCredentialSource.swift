import Foundation

/// An AWS `credential_source` of an `external_account` configuration (`"environment_id": "aws1"`): where the workload's
/// AWS region and credentials are found, and the regional STS `GetCallerIdentity` URL whose signed request is the
/// subject token.
///
/// The region comes from `AWS_REGION`, else `AWS_DEFAULT_REGION`, else `region_url` (an availability zone such as
/// `us-east-1b`, its last letter dropped). The credentials come from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
/// `AWS_SESSION_TOKEN`, else from `url` (EC2's instance metadata: the role's name, then its credentials). With
/// `imdsv2_session_token_url`, metadata requests carry an IMDSv2 session token, as instances that require IMDSv2 want.
public struct FCMAWSCredentialSource: Sendable, Equatable {
    /// A plain-HTTP address of the instance metadata service.
    public struct MetadataURL: Sendable, Equatable {
        public var host: String
        public var port: Int
        public var path: String

        /// `http://host:port/path`.
        public init(host: String, port: Int, path: String) {
            self.host = host
            self.port = port
            self.path = path
        }
    }

    /// `regional_cred_verification_url`, with `{region}` still in it.
    public var verificationURL: String
    /// `region_url`.
    public var regionURL: MetadataURL?
    /// `url`: the role's name at this path, its credentials at `path/<role>`.
    public var credentialsURL: MetadataURL?
    /// `imdsv2_session_token_url`.
    public var sessionTokenURL: MetadataURL?

    /// The subject token type Google's STS expects for a signed AWS request.
    public static let subjectTokenType = "urn:ietf:params:aws:token-type:aws4_request"

    /// Parses the `credential_source` object of `path`.
    /// - Throws: ``FCMConfigurationError`` naming the key at fault.
    static func parse(_ source: [String: Any], path: String) throws(FCMConfigurationError) -> FCMAWSCredentialSource {
        guard let environment = source["environment_id"] as? String, environment.hasPrefix("aws") else {
            throw .malformedExternalAccount(path: path, detail: "\"credential_source.environment_id\" must be \"aws1\"")
        }
        guard environment == "aws1" else {
            throw .unsupported("\(path): credential_source.environment_id \(environment) is not supported (only aws1)")
        }
        guard let verification = source["regional_cred_verification_url"] as? String,
            let url = URL(string: verification.replacingOccurrences(of: "{region}", with: "region")), url.scheme == "https", url.host != nil
        else {
            throw .malformedExternalAccount(path: path, detail: "\"credential_source.regional_cred_verification_url\" must be an https URL")
        }
        func metadata(_ key: String) throws(FCMConfigurationError) -> MetadataURL? {
            guard let value = source[key] else { return nil }
            guard let text = value as? String, let url = URL(string: text), let host = url.host, url.scheme?.lowercased() == "http" else {
                throw .malformedExternalAccount(path: path, detail: "\"credential_source.\(key)\" must be an http:// URL (the instance metadata service)")
            }
            return MetadataURL(host: host, port: url.port ?? 80, path: url.path.isEmpty ? "/" : url.path)
        }
        return FCMAWSCredentialSource(
            verificationURL: verification, regionURL: try metadata("region_url"), credentialsURL: try metadata("url"),
            sessionTokenURL: try metadata("imdsv2_session_token_url"))
    }
}
