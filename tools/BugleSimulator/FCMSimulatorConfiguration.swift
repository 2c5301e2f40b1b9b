import Crypto
import Foundation
import NIOCore
import _CryptoExtras

/// Everything an ``FCMSimulator`` needs: where to listen, TLS identity, the service account it trusts, the
/// access-token secret, token lifetime, quota, faults and recording.
public struct FCMSimulatorConfiguration: Sendable {
    /// Address to bind (default `127.0.0.1`).
    public var host: String
    /// Port to bind; 0 picks an ephemeral port (read it back from ``FCMSimulator/port``).
    public var port: Int
    /// Server certificate chain, PEM (leaf first).
    public var certificatePEM: String
    /// Server private key, PEM.
    public var privateKeyPEM: String
    /// The project id accepted in `/v1/projects/{id}/messages:send` (others get 403 `PERMISSION_DENIED`).
    public var projectID: String
    /// The project number, accepted in the path instead of ``projectID`` (nil: id only).
    public var projectNumber: String?
    /// The service account's `client_email`: the assertion's required `iss`.
    public var clientEmail: String
    /// The service account's `private_key_id`: the assertion's `kid` (when the header carries one).
    public var privateKeyID: String
    /// The service account's public key: verifies the assertion's RS256 signature.
    public var serviceAccountKey: _RSA.Signing.PublicKey
    /// HMAC secret of the stateless access tokens (``FCMAccessTokenAuthority``).
    public var accessTokenSecret: SymmetricKey
    /// Lifetime of access tokens granted by `POST /token` (`expires_in`; default 3600 s).
    public var accessTokenLifetime: Duration
    /// Clock skew tolerated on assertion times: `iat` may be this far in the future, `exp` this far in the
    /// past, and `exp - iat` may exceed 3600 s by this much (default 60 s).
    public var assertionClockSkew: Duration
    /// Assertion `aud` values accepted besides the simulator's own token URI
    /// (`https://127.0.0.1:<port>/token` or `https://localhost:<port>/token`) and Google's
    /// (`https://oauth2.googleapis.com/token`, `https://accounts.google.com/o/oauth2/token`).
    public var extraAudiences: [String]
    /// Messages per ``quotaWindow`` and project (default 600,000 per 60 s, Google's default quota).
    /// Answers 200 and 4xx count, 429 and 5xx do not; over quota → 429 `RESOURCE_EXHAUSTED`/`QUOTA_EXCEEDED`
    /// with `Retry-After` = whole seconds until a slot frees.
    public var quotaPerMinute: Int
    /// Length of the rolling quota window (default 60 s; tests shorten it).
    public var quotaWindow: Duration
    /// `Retry-After` on the scripted 429 (`4290`) and 503 (`5030`) answers and on injected 503s (default 1 s;
    /// sent as whole seconds, at least 1).
    public var retryAfter: Duration
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` sent to HTTP/2 clients (default 100).
    public var maxConcurrentStreams: Int
    /// Fault injection.
    public var faults: Faults
    /// When set, each accepted (delivered) message is appended to this file as one JSON line.
    public var recordFile: String?
    /// Keep accepted records and the send-request log in memory for ``FCMSimulator/accepted()`` and
    /// ``FCMSimulator/requestTimes()`` (turn off for huge benchmarks).
    public var keepRecordsInMemory: Bool
    /// Wall clock, seconds since 1970 (assertion and access-token times, quota window, record times).
    /// Injectable for tests.
    public var wallClock: @Sendable () -> Double
    /// Number of event-loop threads (default: number of cores).
    public var threads: Int

    /// Workload identity federation (`external_account` credentials): when set, the simulator also serves Google's
    /// STS token exchange (`POST /v1/token`) and IAM's `generateAccessToken` for the service account it names.
    public var federation: Federation?

    /// What the simulated STS and IAM credentials endpoints accept.
    public struct Federation: Sendable {
        /// The workload identity pool provider (`//iam.googleapis.com/projects/…/providers/…`) exchanges must name.
        public var audience: String
        /// Subject tokens the external identity provider vouches for (a Kubernetes projected token, an OIDC token).
        public var subjectTokens: Set<String>
        /// The service account federated tokens may impersonate.
        public var serviceAccountEmail: String
        /// When set, the STS also accepts AWS subject tokens (signed `GetCallerIdentity` requests) this account signed;
        /// see `AWSSignedRequestVerifier`.
        public var aws: AWSAccount?

        /// Federation settings.
        public init(audience: String, subjectTokens: Set<String>, serviceAccountEmail: String, aws: AWSAccount? = nil) {
            self.audience = audience
            self.subjectTokens = subjectTokens
            self.serviceAccountEmail = serviceAccountEmail
            self.aws = aws
        }
    }

    /// AWS credentials the simulated STS knows, as AWS would: requests they signed are the workload's identity.
    public struct AWSAccount: Sendable, Equatable {
        public var accessKeyID: String
        public var secretAccessKey: String
        /// The session token of temporary credentials (an instance role's); requests must carry it.
        public var sessionToken: String?

        /// An account.
        public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
            self.accessKeyID = accessKeyID
            self.secretAccessKey = secretAccessKey
            self.sessionToken = sessionToken
        }
    }

    /// Fault injection knobs. Random choices use one seeded generator, so a run is reproducible for a given
    /// request order. Faults apply only to requests that passed every check and are not scripted.
    public struct Faults: Sendable {
        /// Fraction (0...1) answered 503 `UNAVAILABLE` with `Retry-After`.
        public var unavailableRatio: Double
        /// Fraction (0...1) answered 500 `INTERNAL`.
        public var internalRatio: Double
        /// Delay before every answer (the decision is made at once; only the write waits).
        public var latency: Duration?
        /// Seed of the random generator.
        public var seed: UInt64
        /// How long after start the OAuth token endpoint answers 503 `temporarily_unavailable` to every grant (zero:
        /// never; ``FCMSimulator/endTokenOutage()`` ends it early).
        public var tokenOutage: Duration

        /// Creates fault settings (all off by default).
        /// - Parameters:
        ///   - unavailableRatio: Fraction answered 503.
        ///   - internalRatio: Fraction answered 500.
        ///   - latency: Delay before every answer.
        ///   - seed: Random seed.
        ///   - tokenOutage: How long after start the token endpoint is down.
        public init(
            unavailableRatio: Double = 0,
            internalRatio: Double = 0,
            latency: Duration? = nil,
            seed: UInt64 = 0x5EED,
            tokenOutage: Duration = .zero
        ) {
            self.unavailableRatio = unavailableRatio
            self.internalRatio = internalRatio
            self.latency = latency
            self.seed = seed
            self.tokenOutage = tokenOutage
        }
    }

    /// Creates a configuration.
    /// - Parameters:
    ///   - host: Bind address.
    ///   - port: Bind port (0 = ephemeral).
    ///   - certificatePEM: Server certificate PEM.
    ///   - privateKeyPEM: Server key PEM.
    ///   - projectID: Accepted project id.
    ///   - projectNumber: Accepted project number (optional).
    ///   - clientEmail: The service account's e-mail (`iss`).
    ///   - privateKeyID: The service account's key id (`kid`).
    ///   - serviceAccountKey: The service account's public key.
    ///   - accessTokenSecret: Access-token HMAC secret.
    ///   - accessTokenLifetime: Lifetime of granted access tokens.
    ///   - assertionClockSkew: Tolerated assertion clock skew.
    ///   - extraAudiences: Further accepted assertion audiences.
    ///   - quotaPerMinute: Messages per quota window.
    ///   - quotaWindow: Quota window length.
    ///   - retryAfter: `Retry-After` of scripted 429/503 and injected 503 answers.
    ///   - maxConcurrentStreams: Advertised HTTP/2 stream limit.
    ///   - faults: Fault injection.
    ///   - recordFile: Optional JSONL record file.
    ///   - keepRecordsInMemory: Keep records and the request log in memory.
    ///   - threads: Event-loop threads.
    ///   - wallClock: Wall clock in seconds since 1970.
    public init(
        host: String = "127.0.0.1",
        port: Int = 0,
        certificatePEM: String,
        privateKeyPEM: String,
        projectID: String,
        projectNumber: String? = nil,
        clientEmail: String,
        privateKeyID: String,
        serviceAccountKey: _RSA.Signing.PublicKey,
        accessTokenSecret: SymmetricKey,
        accessTokenLifetime: Duration = .seconds(3600),
        assertionClockSkew: Duration = .seconds(60),
        extraAudiences: [String] = [],
        quotaPerMinute: Int = 600_000,
        quotaWindow: Duration = .seconds(60),
        retryAfter: Duration = .seconds(1),
        maxConcurrentStreams: Int = 100,
        faults: Faults = Faults(),
        recordFile: String? = nil,
        keepRecordsInMemory: Bool = true,
        threads: Int = System.coreCount,
        wallClock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) {
        self.host = host
        self.port = port
        self.certificatePEM = certificatePEM
        self.privateKeyPEM = privateKeyPEM
        self.projectID = projectID
        self.projectNumber = projectNumber
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        self.serviceAccountKey = serviceAccountKey
        self.accessTokenSecret = accessTokenSecret
        self.accessTokenLifetime = accessTokenLifetime
        self.assertionClockSkew = assertionClockSkew
        self.extraAudiences = extraAudiences
        self.quotaPerMinute = quotaPerMinute
        self.quotaWindow = quotaWindow
        self.retryAfter = retryAfter
        self.maxConcurrentStreams = maxConcurrentStreams
        self.faults = faults
        self.recordFile = recordFile
        self.keepRecordsInMemory = keepRecordsInMemory
        self.threads = threads
        self.wallClock = wallClock
    }

    /// A configuration serving the material of a simulator directory.
    /// - Parameters:
    ///   - certificates: Material from ``SimulatorCertificates``.
    ///   - port: Bind port (0 = ephemeral).
    public init(certificates: SimulatorCertificates, port: Int = 0) {
        self.init(
            port: port,
            certificatePEM: certificates.serverCertificatePEM,
            privateKeyPEM: certificates.serverKeyPEM,
            projectID: certificates.fcmProjectID,
            projectNumber: certificates.fcmProjectNumber,
            clientEmail: certificates.fcmClientEmail,
            privateKeyID: certificates.fcmPrivateKeyID,
            serviceAccountKey: certificates.fcmPublicKey,
            accessTokenSecret: certificates.fcmTokenSecret
        )
    }
}
