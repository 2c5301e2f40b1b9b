import Crypto
import Foundation
import NIOCore

/// Everything an ``APNsSimulator`` needs: where to listen, TLS identity, accepted keys, rules and faults.
public struct APNsSimulatorConfiguration: Sendable {
    /// Address to bind (default `127.0.0.1`).
    public var host: String
    /// Port to bind; 0 picks an ephemeral port (read it back from ``APNsSimulator/port``).
    public var port: Int
    /// Server certificate chain, PEM (leaf first).
    public var certificatePEM: String
    /// Server private key, PEM.
    public var privateKeyPEM: String
    /// Accepted bundle id (the `apns-topic` without push-type suffix).
    public var topic: String
    /// Other apps of the team (bundle ids): the key may push to them, but every device token here was registered for
    /// ``topic``, so a request for one of these is answered 400 `DeviceTokenNotForTopic`, as APNs answers a campaign
    /// whose `topic` names the wrong app (default none: such a topic is `TopicDisallowed`).
    public var otherTopics: [String] = []
    /// Team id every JWT's `iss` must carry.
    public var teamID: String
    /// Known APNs auth keys by key id (`kid`).
    public var keys: [String: P256.Signing.PublicKey]
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` sent to every client (default 1000, like APNs today).
    public var maxConcurrentStreams: Int
    /// Token auth: the stream limit a new connection starts with, until a request on it carries a valid JWT; then
    /// ``maxConcurrentStreams`` is sent. Apple: "only one stream until a request with a valid token has been posted"
    /// (default 1). Nil: ``maxConcurrentStreams`` from the start. Certificate connections are authorised by their
    /// handshake and start at ``maxConcurrentStreams``.
    public var streamsBeforeAuthentication: Int? = 1
    /// When set, a rejected request (any non-200 answer) lowers the connection's limit to this until the next 200
    /// restores it (seen on APNs: 500 dropped to 1 after a rejected push, restored after the next success). Nil: off.
    public var streamsAfterRejection: Int? = nil
    /// A JWT whose `iat` is older than this gets 403 `ExpiredProviderToken` (Apple: one hour).
    public var jwtMaxAge: Duration
    /// A different JWT on one connection sooner than this after the previous gets 429
    /// `TooManyProviderTokenUpdates` (Apple: 20 minutes).
    public var tokenUpdateMinInterval: Duration
    /// Fault injection.
    public var faults: Faults
    /// When set, each accepted notification is appended to this file as one JSON line.
    public var recordFile: String?
    /// Keep accepted records in memory for ``APNsSimulator/accepted()`` (turn off for huge benchmarks).
    public var keepRecordsInMemory: Bool
    /// Wall clock, seconds since 1970 (JWT ages, 410 timestamps, record times). Injectable for tests.
    public var wallClock: @Sendable () -> Double
    /// Number of event-loop threads (default: number of cores).
    public var threads: Int
    /// Certificate mode: when set, every connection must present a client certificate issued by this CA (PEM),
    /// and its requests are authorised by that certificate, so they need no bearer token (one sent anyway is
    /// ignored, as APNs does on a certificate connection). Nil: token auth only (the default).
    public var clientCAPEM: String? = nil
    /// Answer as APNs' development (sandbox) environment does: every answer also carries `apns-unique-id`, the id
    /// Apple's Push Notifications Console looks a push up by (a lowercase UUID here; Apple does not specify its form).
    public var sandbox = false

    /// Fault injection knobs. Random choices use one seeded generator, so a run is reproducible
    /// for a given request order.
    public struct Faults: Sendable {
        /// Fraction (0...1) of otherwise valid requests answered 503 `ServiceUnavailable`.
        public var serviceUnavailableRatio: Double
        /// Fraction (0...1) of otherwise valid requests that are never answered (the stream hangs).
        public var hangRatio: Double
        /// Delay before every answer.
        public var latency: Duration?
        /// Send GOAWAY (NO_ERROR) after this many streams on a connection; streams above the
        /// last-stream-id are not processed, the connection closes once the rest are answered.
        public var goAwayEvery: Int?
        /// Close the TCP connection abruptly when its Nth stream arrives (that stream is not answered).
        public var dropConnectionEvery: Int?
        /// Answer each connection's first stream with GOAWAY (last-stream-id 0) carrying this debug data, and process
        /// nothing on it: a server turning every connection away (`{"reason":"BadCertificateEnvironment"}`, or ""
        /// for no reason, as seen from APNs for a certificate of the wrong environment).
        public var goAwayOnFirstStream: String?
        /// Seed of the random generator.
        public var seed: UInt64

        /// Creates fault settings (all off by default).
        /// - Parameters:
        ///   - serviceUnavailableRatio: Fraction answered 503.
        ///   - hangRatio: Fraction never answered.
        ///   - latency: Delay before every answer.
        ///   - goAwayEvery: GOAWAY after N streams per connection.
        ///   - dropConnectionEvery: Abrupt close at the Nth stream per connection.
        ///   - goAwayOnFirstStream: GOAWAY with this debug data at each connection's first stream.
        ///   - seed: Random seed.
        public init(
            serviceUnavailableRatio: Double = 0,
            hangRatio: Double = 0,
            latency: Duration? = nil,
            goAwayEvery: Int? = nil,
            dropConnectionEvery: Int? = nil,
            goAwayOnFirstStream: String? = nil,
            seed: UInt64 = 0x5EED
        ) {
            self.goAwayOnFirstStream = goAwayOnFirstStream
            self.serviceUnavailableRatio = serviceUnavailableRatio
            self.hangRatio = hangRatio
            self.latency = latency
            self.goAwayEvery = goAwayEvery
            self.dropConnectionEvery = dropConnectionEvery
            self.seed = seed
        }
    }

    /// Creates a configuration.
    /// - Parameters:
    ///   - host: Bind address.
    ///   - port: Bind port (0 = ephemeral).
    ///   - certificatePEM: Server certificate PEM.
    ///   - privateKeyPEM: Server key PEM.
    ///   - topic: Accepted bundle id.
    ///   - teamID: Accepted team id.
    ///   - keys: Accepted auth keys by key id.
    ///   - maxConcurrentStreams: Advertised stream limit.
    ///   - jwtMaxAge: Maximum JWT age.
    ///   - tokenUpdateMinInterval: Minimum time between token changes on one connection.
    ///   - faults: Fault injection.
    ///   - recordFile: Optional JSONL record file.
    ///   - keepRecordsInMemory: Keep records for ``APNsSimulator/accepted()``.
    ///   - threads: Event-loop threads.
    ///   - wallClock: Wall clock in seconds since 1970.
    public init(
        host: String = "127.0.0.1",
        port: Int = 0,
        certificatePEM: String,
        privateKeyPEM: String,
        topic: String,
        teamID: String,
        keys: [String: P256.Signing.PublicKey],
        maxConcurrentStreams: Int = 1000,
        jwtMaxAge: Duration = .seconds(3600),
        tokenUpdateMinInterval: Duration = .seconds(1200),
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
        self.topic = topic
        self.teamID = teamID
        self.keys = keys
        self.maxConcurrentStreams = maxConcurrentStreams
        self.jwtMaxAge = jwtMaxAge
        self.tokenUpdateMinInterval = tokenUpdateMinInterval
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
            topic: certificates.topic,
            teamID: certificates.teamID,
            keys: [certificates.keyID: certificates.apnsPublicKey]
        )
    }
}
