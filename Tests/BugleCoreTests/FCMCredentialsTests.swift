import BugleCore
import BugleFCM
import Foundation
import Logging
import Testing

/// The `fcm:` section's `credentials` and `project_id`, and where the metadata server is.
@Suite("FCM credentials: service account or metadata server, and project_id")
struct FCMCredentialsTests {
    static func load(_ fcm: String) throws -> FCMSettings? {
        try ProviderSettingsLoader.load(yaml: "fcm:\n\(fcm)\n", path: "/etc/bugle/providers.yaml").fcm
    }

    static func loadError(_ fcm: String) -> ConfigurationError? {
        do {
            _ = try load(fcm)
        } catch let error as ConfigurationError {
            return error
        } catch {
            Issue.record("expected a ConfigurationError, got \(error)")
        }
        return nil
    }

    @Test("credentials: absent → service_account; metadata_server with project_id; project_id beside a service account overrides its project")
    func choices() throws {
        let plain = try #require(try Self.load("  service_account_file: keys/sa.json"))
        #expect(plain.credentials == .serviceAccount && plain.projectID == nil && plain.serviceAccountFile == "/etc/bugle/keys/sa.json")
        let metadata = try #require(try Self.load("  credentials: metadata_server\n  project_id: my-app-1234"))
        #expect(metadata.credentials == .metadataServer && metadata.projectID == "my-app-1234" && metadata.serviceAccountFile == nil)
        let other = try #require(try Self.load("  service_account_file: sa.json\n  project_id: other-project"))
        #expect(other.credentials == .serviceAccount && other.projectID == "other-project")
        let explicit = try #require(try Self.load("  credentials: service_account"))
        #expect(explicit.credentials == .serviceAccount)
    }

    @Test("bad credentials keys name the line, column and key")
    func badKeys() throws {
        let unknown = try #require(Self.loadError("  credentials: workload_identity"))
        #expect(unknown.line == 2 && unknown.keyPath == "fcm.credentials" && unknown.message.contains("service_account or metadata_server"), "\(unknown)")
        let both = try #require(Self.loadError("  credentials: metadata_server\n  project_id: my-app\n  service_account_file: sa.json"))
        #expect(both.line == 4 && both.keyPath == "fcm.service_account_file" && both.message.contains("not both"), "\(both)")
        let noProject = try #require(Self.loadError("  credentials: metadata_server"))
        #expect(noProject.keyPath == "fcm.project_id" && noProject.message.contains("the Firebase project to send for"), "\(noProject)")
        let badProject = try #require(Self.loadError("  credentials: metadata_server\n  project_id: My Project"))
        #expect(badProject.line == 3 && badProject.keyPath == "fcm.project_id" && badProject.message.contains("project id"), "\(badProject)")
    }

    @Test("the metadata server: 169.254.169.254:80, or GCE_METADATA_HOST as host or host:port; anything else is refused")
    func address() throws {
        #expect(try FCMMetadataServerAddress.from(environment: [:]) == .standard)
        #expect(FCMMetadataServerAddress.standard.description == "169.254.169.254:80")
        #expect(try FCMMetadataServerAddress.from(environment: ["GCE_METADATA_HOST": "metadata.google.internal"]).description == "metadata.google.internal:80")
        #expect(try FCMMetadataServerAddress.from(environment: ["GCE_METADATA_HOST": "127.0.0.1:8080"]).description == "127.0.0.1:8080")
        for bad in ["127.0.0.1:0", "host:port", "http://127.0.0.1:8080", "a:1:2", ":80"] {
            #expect(throws: FCMConfigurationError.self, "\(bad)") { try FCMMetadataServerAddress.from(environment: ["GCE_METADATA_HOST": bad]) }
        }
    }

    @Test("the metadata server's refusals read as its own, not the token endpoint's")
    func messages() {
        let source = FCMTokenSource.metadataServer("127.0.0.1:8080")
        #expect(FCMAuthError.rejected("404: x", from: source).description == "the metadata server at 127.0.0.1:8080 gave no access token: 404: x")
        #expect(FCMAuthError.unavailable("HTTP 503", from: source).description == "the metadata server at 127.0.0.1:8080 is unavailable: HTTP 503")
        #expect(FCMAuthError.rejected("invalid_grant").description == "the OAuth2 token endpoint refused the service account: invalid_grant")
    }

    static func external(_ changes: [String: Any?]) -> Data {
        var object: [String: Any] = [
            "type": "external_account",
            "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k",
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": "https://sts.googleapis.com/v1/token",
            "credential_source": ["file": "/var/run/secrets/tokens/gcp"],
        ]
        for (key, value) in changes { object[key] = value }
        return (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
    }

    static func parseError(_ data: Data) -> String? {
        do {
            _ = try FCMExternalAccount.parse(data, path: "/etc/bugle/wif.json")
            return nil
        } catch {
            return error.description
        }
    }

    @Test("external_account: file and url sources, text and json formats, impersonation and its lifetime")
    func externalAccount() throws {
        let plain = try FCMExternalAccount.parse(Self.external([:]), path: "wif.json")
        #expect(plain.source == .file("/var/run/secrets/tokens/gcp") && plain.format == .text)
        #expect(plain.impersonationURL == nil && plain.impersonationLifetime == 3600 && plain.tokenURL.host == "sts.googleapis.com")
        let url = try FCMExternalAccount.parse(
            Self.external([
                "credential_source": [
                    "url": "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=x",
                    "headers": ["Metadata": "True"], "format": ["type": "json", "subject_token_field_name": "access_token"],
                ],
                "service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/a@b.iam.gserviceaccount.com:generateAccessToken",
                "service_account_impersonation": ["token_lifetime_seconds": 1800],
            ]), path: "wif.json")
        #expect(url.source == .url(host: "169.254.169.254", port: 80, path: "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=x", headers: ["Metadata": "True"]))
        #expect(url.format == .json(field: "access_token") && url.impersonationLifetime == 1800 && url.impersonationURL != nil)
        #expect(url.impersonatedEmail == "a@b.iam.gserviceaccount.com" && plain.impersonatedEmail == nil)
        let secure = try FCMExternalAccount.parse(Self.external(["credential_source": ["url": "https://idp.example/token?a=1"]]), path: "wif.json")
        #expect(secure.source == .url(host: "idp.example", port: 443, path: "/token?a=1", headers: [:], secure: true))
        let executable = try FCMExternalAccount.parse(
            Self.external(["credential_source": ["executable": ["command": "/usr/local/bin/token-helper --pool  p", "output_file": "/tmp/t.json"]]]),
            path: "wif.json")
        #expect(executable.source == .executable(FCMExecutableSource(command: ["/usr/local/bin/token-helper", "--pool", "p"], timeout: .seconds(30), outputFile: "/tmp/t.json")))
    }

    static let awsVerification = "https://sts.{region}.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15"

    @Test("external_account with an AWS source: the verification URL kept with {region}, the metadata URLs as host, port and path")
    func awsSource() throws {
        let account = try FCMExternalAccount.parse(
            Self.external([
                "subject_token_type": "urn:ietf:params:aws:token-type:aws4_request",
                "credential_source": [
                    "environment_id": "aws1", "regional_cred_verification_url": Self.awsVerification,
                    "region_url": "http://169.254.169.254/latest/meta-data/placement/availability-zone",
                    "url": "http://169.254.169.254/latest/meta-data/iam/security-credentials",
                    "imdsv2_session_token_url": "http://169.254.169.254/latest/api/token",
                ],
            ]), path: "aws.json")
        guard case .aws(let source) = account.source else {
            Issue.record("not an AWS source: \(account.source)")
            return
        }
        #expect(source.verificationURL == Self.awsVerification)
        #expect(source.regionURL == .init(host: "169.254.169.254", port: 80, path: "/latest/meta-data/placement/availability-zone"))
        #expect(source.credentialsURL?.path == "/latest/meta-data/iam/security-credentials" && source.sessionTokenURL?.path == "/latest/api/token")
    }

    @Test("external_account errors name the external account file and key; URL sources other than http(s)://, and AWS sources other than aws1, are refused by name; a source of none of the four kinds names all four")
    func externalAccountErrors() {
        let cases: [([String: Any?], String)] = [
            (["audience": nil], "missing or empty \"audience\""),
            (["token_url": "http://sts.example/v1/token"], "\"token_url\" must be an https URL"),
            (["credential_source": ["environment_id": "aws2", "regional_cred_verification_url": Self.awsVerification]], "environment_id aws2 is not supported (only aws1)"),
            (["credential_source": ["environment_id": "aws1", "region_url": "http://169.254.169.254"]], "\"credential_source.regional_cred_verification_url\" must be an https URL"),
            (
                ["credential_source": ["environment_id": "aws1", "regional_cred_verification_url": Self.awsVerification, "url": "https://169.254.169.254/x"]],
                "\"credential_source.url\" must be an http:// URL"
            ),
            (["credential_source": ["environment_id": "aws1", "regional_cred_verification_url": Self.awsVerification]], "an AWS credential_source needs \"subject_token_type\""),
            (["credential_source": ["executable": ["command": "token-helper --x"]]], "\"credential_source.executable.command\" must start with the program's absolute path"),
            (["credential_source": ["executable": ["command": "/bin/token", "timeout_millis": 1000]]], "\"credential_source.executable.timeout_millis\" must be 5000 to 120000"),
            (["credential_source": ["executable": ["command": "/bin/token", "output_file": "cache.json"]]], "\"credential_source.executable.output_file\" must be an absolute path"),
            (
                ["credential_source": ["executable": ["command": "/bin/token"]], "subject_token_type": "urn:ietf:params:aws:token-type:aws4_request"],
                "an executable credential_source needs a jwt, id_token or saml2 \"subject_token_type\""
            ),
            (["credential_source": ["url": "ftp://idp.example/token"]], "\"credential_source.url\" must be an http:// or https:// URL"),
            (["credential_source": ["format": ["type": "text"]]], "names no subject token source: it needs \"file\", \"url\", \"executable\" or \"environment_id\": \"aws1\""),
            (["credential_source": nil], "missing \"credential_source\": it needs \"file\", \"url\", \"executable\" or \"environment_id\": \"aws1\""),
            (["credential_source": ["file": "/t", "format": ["type": "json"]]], "subject_token_field_name"),
            (["credential_source": ["file": "/t", "format": ["type": "xml"]]], "must be text or json"),
            (["service_account_impersonation": ["token_lifetime_seconds": 60]], "must be 600 to 43200"),
        ]
        for (changes, expected) in cases {
            let message = Self.parseError(Self.external(changes))
            #expect(message?.contains(expected) == true && message?.contains("/etc/bugle/wif.json") == true, "\(changes): \(String(describing: message))")
            // It is an external account's configuration, not a service account's key.
            #expect(message?.contains("service account file") == false, "\(String(describing: message))")
        }
        #expect(
            Self.parseError(Self.external(["credential_source": nil]))?.hasPrefix("external account file /etc/bugle/wif.json: missing \"credential_source\"") == true)
    }

    @Test("a credentials file is told apart by its type: an external_account readable by others is fine, an unknown type is named")
    func credentialFile() throws {
        let directory = NSTemporaryDirectory() + "bugle-credentials-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/wif.json"
        try Self.external([:]).write(to: URL(fileURLWithPath: file))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
        guard case .externalAccount = try FCMCredentialFile.load(path: file, allowReadableKeys: false) else {
            Issue.record("not read as an external_account")
            return
        }
        try #"{"type": "authorized_user"}"#.write(toFile: file, atomically: true, encoding: .utf8)
        #expect(throws: FCMConfigurationError.malformed(path: file, detail: "\"type\" is \"authorized_user\", expected \"service_account\" or \"external_account\"")) {
            try FCMCredentialFile.load(path: file, allowReadableKeys: false)
        }
    }

    /// The lane's configuration error for `environment`, with no `service_account_file` in the `fcm:` section.
    static func laneError(environment: [String: String]) async -> String? {
        do {
            let provider = try FCMProvider(
                settings: FCMSettings(serviceAccountFile: nil), environment: environment, logger: Logger(label: "test"))
            await provider.shutdown()
            return nil
        } catch {
            return error.description
        }
    }

    @Test("GOOGLE_APPLICATION_CREDENTIALS holding a key file's contents, a key's base64 body or a token is refused by name, never echoed")
    func pastedCredentialsVariable() async throws {
        let body = "MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQC7Vx9kQ2mPz3Lw"
        let json = #"{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\n"# + body + #"\n-----END PRIVATE KEY-----\n"}"#
        let token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJlLWJ5dGVz"
        let cases: [(String, String)] = [
            (json, "GOOGLE_APPLICATION_CREDENTIALS holds a file's contents, not a path"),
            ("-----BEGIN PRIVATE KEY-----\n" + body + "\n-----END PRIVATE KEY-----\n", "GOOGLE_APPLICATION_CREDENTIALS holds a file's contents, not a path"),
            (body, "GOOGLE_APPLICATION_CREDENTIALS holds a key's base64 contents, not a path"),
            (String(body.prefix(44)) + "\n" + String(body.dropFirst(44)), "GOOGLE_APPLICATION_CREDENTIALS holds a key's base64 contents, not a path"),
            (token, "GOOGLE_APPLICATION_CREDENTIALS holds a token, not a path"),
        ]
        for (value, expected) in cases {
            let message = try #require(await Self.laneError(environment: ["GOOGLE_APPLICATION_CREDENTIALS": value]))
            #expect(message.contains(expected), "\(message)")
            #expect(!message.contains("MIIEvAIBADAN") && !message.contains("BKYwggSi") && !message.contains("eyJzdWIi"), "\(message)")
        }
    }

    @Test("errors about the file GOOGLE_APPLICATION_CREDENTIALS names say the variable: missing, readable by others, malformed")
    func credentialsVariableNamed() async throws {
        let missing = try #require(await Self.laneError(environment: ["GOOGLE_APPLICATION_CREDENTIALS": "/nonexist/gac.json"]))
        #expect(missing.hasPrefix("GOOGLE_APPLICATION_CREDENTIALS=/nonexist/gac.json: cannot read /nonexist/gac.json"), "\(missing)")
        let directory = NSTemporaryDirectory() + "bugle-gac-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/sa.json"
        try #"{"type": "service_account", "project_id": "p"}"#.write(toFile: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: file)
        let readable = try #require(await Self.laneError(environment: ["GOOGLE_APPLICATION_CREDENTIALS": file]))
        #expect(readable.hasPrefix("GOOGLE_APPLICATION_CREDENTIALS=\(file): service account file \(file) is readable by other users"), "\(readable)")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        let malformed = try #require(await Self.laneError(environment: ["GOOGLE_APPLICATION_CREDENTIALS": file]))
        #expect(malformed.hasPrefix("GOOGLE_APPLICATION_CREDENTIALS=\(file): service account file \(file): missing or empty"), "\(malformed)")
        // Named by the providers file instead, the error is as it was: the file (the caller adds its line and key).
        do {
            let provider = try FCMProvider(settings: FCMSettings(serviceAccountFile: file), environment: [:], logger: Logger(label: "test"))
            await provider.shutdown()
            Issue.record("a malformed service account was accepted")
        } catch {
            #expect(error.description.hasPrefix("service account file \(file): missing or empty"), "\(error)")
        }
    }

    @Test("an external_account whose credential_source.file is a token is refused when loaded, without the token")
    func subjectTokenPastedAsFile() {
        let token = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMifQ.c2lnbmF0dXJl"
        let message = Self.parseError(Self.external(["credential_source": ["file": token]]))
        #expect(message?.contains("\"credential_source.file\" holds a token, not the path of the file that holds it") == true, "\(String(describing: message))")
        #expect(message?.contains("eyJ") == false, "\(String(describing: message))")
    }

    @Test("tokens quoted in a token endpoint's or STS's error text are redacted before it is relayed")
    func relayedTextRedacted() {
        let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJhQGIuY29tIn0.c2ln-_bmF0dXJl"
        #expect(TokenRedaction.redacted("Invalid JWT Signature: \(jwt).") == "Invalid JWT Signature: [redacted].")
        #expect(TokenRedaction.redacted("subject_token=\(jwt)&x") == "subject_token=[redacted]&x")
        #expect(TokenRedaction.redacted("token ya29.a0AfH6SMB-x_y.z expired") == "token [redacted] expired")
        #expect(TokenRedaction.redacted("Invalid JWT: Failed audience check.") == "Invalid JWT: Failed audience check.")
        #expect(TokenRedaction.redacted("keyJWT.a.b eyJonly.one") == "keyJWT.a.b eyJonly.one")
    }
}
