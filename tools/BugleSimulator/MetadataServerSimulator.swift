import Crypto
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOSSL

/// What a ``MetadataServerSimulator`` serves and how it misbehaves.
public struct MetadataServerConfiguration: Sendable {
    /// Address to bind (default `127.0.0.1`).
    public var host = "127.0.0.1"
    /// Port to bind; 0 picks an ephemeral one.
    public var port: Int
    /// Signs the access tokens, so the FCM simulator with the same secret accepts them.
    public var accessTokenSecret: SymmetricKey
    /// `expires_in` of each token (default 3600 s, as Google's).
    public var accessTokenLifetime: Duration = .seconds(3600)
    /// Whether a service account is attached to the workload. Without one every token request is answered 404, as on
    /// a GKE node pool without Workload Identity for the pod's Kubernetes service account.
    public var serviceAccountAttached = true
    /// The first this many token requests are answered 503 (a metadata server still starting, as GKE's can be for
    /// a pod's first seconds).
    public var unavailableFirst = 0
    /// When set, also answers as Azure's instance metadata service does for a managed identity's token:
    /// `GET /metadata/identity/oauth2/token?…` with `Metadata: true` → `{"access_token": <this>}` (the subject token of
    /// an `external_account` whose `credential_source` is a `url`).
    public var azureIdentityToken: String?
    /// When set, also answers as EC2's instance metadata service does under `/latest/` (see ``AWSInstance``).
    public var awsInstance: AWSInstance?
    /// When set, also answers as GitHub Actions' OIDC token service: a `GET` of a path ending in `/idtoken` with
    /// `Authorization: Bearer <requestToken>` → `{"value": <idToken>}` (401 for another bearer). An `https://` url
    /// subject-token source, with ``tls``.
    public var oidcToken: (requestToken: String, idToken: String)?
    /// When set, connections are TLS with this server context (as an identity provider's token URL is).
    public var tls: NIOSSLContext?
    /// Wall clock, seconds since 1970.
    public var wallClock: @Sendable () -> Double = { Date().timeIntervalSince1970 }

    /// An EC2 instance as its metadata service describes it: `PUT /latest/api/token` (with
    /// `X-aws-ec2-metadata-token-ttl-seconds`, 1 to 21600) issues an IMDSv2 session token;
    /// `GET /latest/meta-data/placement/availability-zone` answers the zone;
    /// `GET /latest/meta-data/iam/security-credentials/` the role's name (404 without a role) and `…/<role>` its
    /// temporary credentials as JSON (`AccessKeyId`, `SecretAccessKey`, `Token`, `Expiration`). With
    /// ``requireSessionToken`` (IMDSv2 required, as new instances are) a `GET` without a token it issued is answered 401.
    public struct AWSInstance: Sendable {
        public var availabilityZone: String
        /// The instance profile's role; `nil` for an instance without one.
        public var roleName: String?
        public var credentials: FCMSimulatorConfiguration.AWSAccount
        public var requireSessionToken = true

        /// An instance in `availabilityZone` whose role `roleName` has `credentials`.
        public init(availabilityZone: String, roleName: String?, credentials: FCMSimulatorConfiguration.AWSAccount) {
            self.availabilityZone = availabilityZone
            self.roleName = roleName
            self.credentials = credentials
        }
    }

    /// A configuration whose tokens the FCM simulator of `certificates` accepts.
    public init(certificates: SimulatorCertificates, port: Int = 0) {
        self.port = port
        self.accessTokenSecret = certificates.fcmTokenSecret
    }
}

/// What the metadata server has answered.
public struct MetadataServerCounters: Sendable, Equatable, Encodable {
    /// Token requests that carried `Metadata-Flavor: Google`.
    public var tokenRequests = 0
    /// Tokens issued (200).
    public var tokensIssued = 0
    /// Requests refused for their headers (403: no `Metadata-Flavor: Google`, or an `X-Forwarded-For`).
    public var refusedHeaders = 0
    /// Identity tokens served (``MetadataServerConfiguration/azureIdentityToken``, ``MetadataServerConfiguration/oidcToken``).
    public var identityTokens = 0
    /// The `scopes` of the last token request (empty when it named none).
    public var lastScopes: [String] = []
    /// IMDSv2 session tokens issued (``MetadataServerConfiguration/awsInstance``).
    public var awsSessionTokens = 0
    /// Role credentials served.
    public var awsCredentials = 0
    /// Instance-metadata `GET`s refused for want of a session token (401).
    public var awsRefused = 0
}

/// A local stand-in for Google Cloud's metadata server (`169.254.169.254`, `metadata.google.internal`): plain HTTP/1.1,
/// as the real one. It serves `GET /computeMetadata/v1/instance/service-accounts/default/token[?scopes=a,b]` with
/// `{"access_token", "expires_in", "token_type": "Bearer"}`, tokens the FCM simulator accepts. As the real server it
/// refuses (403) a request without `Metadata-Flavor: Google` and any request with `X-Forwarded-For` (one that came
/// through a proxy), answers every answer with `Metadata-Flavor: Google`, and 404 for a path it does not know or
/// when no service account is attached. Point Bugle at it with `GCE_METADATA_HOST=127.0.0.1:<port>`.
public final class MetadataServerSimulator: Sendable {
    static let tokenPath = "/computeMetadata/v1/instance/service-accounts/default/token"
    static let azureIdentityPath = "/metadata/identity/oauth2/token"

    private let configuration: MetadataServerConfiguration
    private let listener = SimulatorHTTP1Listener(name: "the metadata server")
    private let state = NIOLockedValueBox(MetadataServerCounters())
    /// IMDSv2 session tokens issued.
    private let sessionTokens = NIOLockedValueBox(Set<String>())
    private let logger: Logger

    /// A server, not yet listening.
    public init(configuration: MetadataServerConfiguration, logger: Logger = Logger(label: "bugle.sim.metadata")) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Starts listening.
    /// - Returns: The bound port.
    @discardableResult
    public func start() async throws -> Int {
        let port = try await listener.start(host: configuration.host, port: configuration.port, tls: configuration.tls) { [self] head in
            self.response(to: head)
        }
        logger.info("metadata server listening", metadata: ["port": "\(port)"])
        return port
    }

    /// Stops listening and closes its event loop.
    public func stop() async throws {
        try await listener.stop()
    }

    /// What it has answered so far.
    public func counters() -> MetadataServerCounters {
        state.withLockedValue { $0 }
    }

    /// The whole answer to one request: ``answer(method:uri:headers:)`` with `Metadata-Flavor: Google`, as the real
    /// server sends on every answer.
    private func response(to head: HTTPRequestHead) -> SimulatorHTTP1Responder.Response {
        let (status, contentType, body) = answer(method: head.method, uri: head.uri, headers: head.headers)
        return .init(status: status, headers: ["Metadata-Flavor": "Google", "Content-Type": contentType], body: body)
    }

    /// The answer to one request: status, content type and body.
    func answer(method: HTTPMethod, uri: String, headers: HTTPHeaders) -> (HTTPResponseStatus, String, String) {
        if let oidc = configuration.oidcToken, (URLComponents(string: uri)?.path ?? uri).hasSuffix("/idtoken") {
            guard headers.first(name: "authorization") == "Bearer \(oidc.requestToken)" else {
                state.withLockedValue { $0.refusedHeaders += 1 }
                return (.unauthorized, "application/json", "{\"message\":\"Unauthorized\"}")
            }
            state.withLockedValue { $0.identityTokens += 1 }
            return (.ok, "application/json", "{\"count\":1,\"value\":\"\(oidc.idToken)\"}")
        }
        if let instance = configuration.awsInstance, uri.hasPrefix("/latest/") {
            return awsAnswer(instance, method: method, path: URLComponents(string: uri)?.path ?? uri, headers: headers)
        }
        if let token = configuration.azureIdentityToken, uri.hasPrefix(Self.azureIdentityPath) {
            guard headers.first(name: "metadata")?.lowercased() == "true" else {
                state.withLockedValue { $0.refusedHeaders += 1 }
                return (.badRequest, "application/json", SimulatorJSON.oauthError("invalid_request", "Required metadata header not specified"))
            }
            state.withLockedValue { $0.identityTokens += 1 }
            return (.ok, "application/json", "{\"access_token\":\"\(token)\",\"token_type\":\"Bearer\"}")
        }
        guard headers.first(name: "metadata-flavor") == "Google", !headers.contains(name: "x-forwarded-for") else {
            state.withLockedValue { $0.refusedHeaders += 1 }
            return (.forbidden, "text/plain", "Missing required header \"Metadata-Flavor\": \"Google\", or a proxied request\n")
        }
        let components = URLComponents(string: uri)
        let path = components?.path ?? uri
        guard path == Self.tokenPath else { return (.notFound, "text/plain", "Not Found\n") }
        guard method == .GET else { return (.methodNotAllowed, "text/plain", "Method Not Allowed\n") }
        let scopes = components?.queryItems?.first { $0.name == "scopes" }?.value?.split(separator: ",").map(String.init) ?? []
        let attempt = state.withLockedValue { counters -> Int in
            counters.tokenRequests += 1
            counters.lastScopes = scopes
            return counters.tokenRequests
        }
        if attempt <= configuration.unavailableFirst {
            return (.serviceUnavailable, "text/plain", "Service Unavailable\n")
        }
        guard configuration.serviceAccountAttached else {
            return (.notFound, "text/plain", "Not Found: no service account is attached to this workload\n")
        }
        let lifetime = Double(configuration.accessTokenLifetime.components.seconds)
        let token = FCMAccessTokenAuthority(secret: configuration.accessTokenSecret).mint(expiresAt: configuration.wallClock() + lifetime)
        state.withLockedValue { $0.tokensIssued += 1 }
        return (.ok, "application/json", "{\"access_token\":\"\(token)\",\"expires_in\":\(Int(lifetime)),\"token_type\":\"Bearer\"}")
    }
}

extension MetadataServerSimulator {
    /// EC2's instance metadata (``MetadataServerConfiguration/AWSInstance``).
    private func awsAnswer(
        _ instance: MetadataServerConfiguration.AWSInstance, method: HTTPMethod, path: String, headers: HTTPHeaders
    ) -> (HTTPResponseStatus, String, String) {
        if headers.contains(name: "x-forwarded-for") {
            return (.forbidden, "text/plain", "Forbidden\n")
        }
        if path == "/latest/api/token" {
            guard method == .PUT else { return (.methodNotAllowed, "text/plain", "Method Not Allowed\n") }
            guard let ttl = headers.first(name: "x-aws-ec2-metadata-token-ttl-seconds").flatMap(Int.init), (1...21_600).contains(ttl) else {
                return (.badRequest, "text/plain", "Bad Request\n")
            }
            let token = "IMDS-" + UUID().uuidString
            sessionTokens.withLockedValue { _ = $0.insert(token) }
            state.withLockedValue { $0.awsSessionTokens += 1 }
            return (.ok, "text/plain", token)
        }
        guard method == .GET else { return (.methodNotAllowed, "text/plain", "Method Not Allowed\n") }
        if instance.requireSessionToken {
            let token = headers.first(name: "x-aws-ec2-metadata-token") ?? ""
            guard sessionTokens.withLockedValue({ $0.contains(token) }) else {
                state.withLockedValue { $0.awsRefused += 1 }
                return (.unauthorized, "text/plain", "Unauthorized\n")
            }
        }
        let credentialsPath = "/latest/meta-data/iam/security-credentials"
        switch path {
        case "/latest/meta-data/placement/availability-zone":
            return (.ok, "text/plain", instance.availabilityZone)
        case credentialsPath, credentialsPath + "/":
            guard let role = instance.roleName else { return (.notFound, "text/plain", "Not Found\n") }
            return (.ok, "text/plain", role)
        case credentialsPath + "/" + (instance.roleName ?? "/"):
            state.withLockedValue { $0.awsCredentials += 1 }
            let expiry = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: configuration.wallClock() + 21_600))
            let object: [String: String] = [
                "Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": instance.credentials.accessKeyID,
                "SecretAccessKey": instance.credentials.secretAccessKey, "Token": instance.credentials.sessionToken ?? "",
                "Expiration": expiry,
            ]
            let body = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            return (.ok, "application/json", body)
        default:
            return (.notFound, "text/plain", "Not Found\n")
        }
    }
}
