import BugleCore
import BugleFCM
import Foundation
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
}
