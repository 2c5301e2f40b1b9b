/// The providers file (`providers.yaml`): endpoints and credentials by file path, never inline secrets.
public struct ProviderSettings: Sendable, Equatable {
    public var apns: APNsSettings?
    public var fcm: FCMSettings?
    public var legacyAPNs: LegacyAPNsSettings?
    /// The file this came from, if any.
    public var sourcePath: String?
    /// Where each file path and environment variable name is written in ``sourcePath``: an error found when the
    /// credentials are loaded (an unreadable key, a wrong passphrase) names the line and key of the value it is about.
    public var locations: [Location] = []

    /// A value of the file (a resolved path, or a variable's name) and where it is written.
    public struct Location: Sendable, Equatable {
        /// `apns.auth.token.key_file`
        public var keyPath: String
        public var value: String
        public var line: Int
        public var column: Int

        public init(keyPath: String, value: String, line: Int, column: Int) {
            self.keyPath = keyPath
            self.value = value
            self.line = line
            self.column = column
        }
    }

    public init(apns: APNsSettings? = nil, fcm: FCMSettings? = nil, legacyAPNs: LegacyAPNsSettings? = nil, sourcePath: String? = nil) {
        self.apns = apns
        self.fcm = fcm
        self.legacyAPNs = legacyAPNs
        self.sourcePath = sourcePath
    }

    /// Equal settings, wherever their values are written (``locations`` is not compared).
    public static func == (lhs: ProviderSettings, rhs: ProviderSettings) -> Bool {
        lhs.apns == rhs.apns && lhs.fcm == rhs.fcm && lhs.legacyAPNs == rhs.legacyAPNs && lhs.sourcePath == rhs.sourcePath
    }

    /// `message`, an error of the `section` lane's credentials, prefixed with where it comes from: the file, line,
    /// column and key of the path or variable it names (the longest such value of the section), else the file and
    /// the section.
    public func locating(_ message: String, section: String) -> String {
        let source = sourcePath ?? "providers file"
        let named = locations.filter { $0.keyPath.hasPrefix(section + ".") && message.contains($0.value) }
        guard let place = named.max(by: { $0.value.count < $1.value.count }) else { return "\(source): \(section): \(message)" }
        // A message that begins with the key's path already names it.
        if message.hasPrefix(place.keyPath + " ") { return "\(source):\(place.line):\(place.column): \(message)" }
        return "\(source):\(place.line):\(place.column): \(place.keyPath): \(message)"
    }
}

/// `rate: { per_second, burst }`
public struct RateLimit: Sendable, Equatable {
    public var perSecond: Double
    public var burst: Int
    public init(perSecond: Double, burst: Int) {
        self.perSecond = perSecond
        self.burst = burst
    }
}

/// An HTTPS endpoint: host and port.
public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
    /// The URL of the endpoint; an IPv6 address in brackets (`https://[::1]:8443`), as a URL writes it.
    public var description: String { "https://\(bracketedHost):\(port)" }

    /// HTTP/2 `:authority`: the host, with `:port` unless it is 443; an IPv6 address in brackets (RFC 3986 §3.2.2).
    public var authority: String { port == 443 ? bracketedHost : "\(bracketedHost):\(port)" }

    private var bracketedHost: String { host.contains(":") ? "[\(host)]" : host }

    public static let apnsProduction = Endpoint(host: "api.push.apple.com", port: 443)
    public static let apnsSandbox = Endpoint(host: "api.sandbox.push.apple.com", port: 443)
    public static let fcm = Endpoint(host: "fcm.googleapis.com", port: 443)
}

/// The `apns:` section.
public struct APNsSettings: Sendable, Equatable {
    public enum Auth: Sendable, Equatable {
        /// `auth.token: { team_id, key_id, key_file }`
        case token(teamID: String, keyID: String, keyFile: String)
        /// `auth.certificate: { cert_file, key_file, passphrase_env }` (PEM) or `{ p12_file, passphrase_env }`.
        ///
        /// For a PKCS#12 bundle `certFile` holds the `p12_file` path and `keyFile` is `nil`; for PEM both
        /// are set. `passphraseEnv` names the environment variable holding the key's passphrase.
        case certificate(certFile: String, keyFile: String?, passphraseEnv: String?)
    }
    public var endpoint: Endpoint
    /// Extra trusted CA (PEM). Verification is never switched off.
    public var caFile: String?
    public var topic: String
    public var auth: Auth
    public var connections: Int
    public var timeoutSeconds: Double
    public var rate: RateLimit?
    /// `concurrency`: requests in flight on this lane at once (nil: connections × the provider's usual
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`, so requests wait in the pacer, not inside a connection).
    public var concurrency: Int?
    /// `proxy:` / `proxy_credentials_env`: how connections reach the endpoint.
    public var proxy: ProxySetting = .environment
    /// `proxy_ca_file`: an extra CA trusted for an `https://` proxy's certificate.
    public var proxyCAFile: String?

    public init(endpoint: Endpoint, caFile: String?, topic: String, auth: Auth, connections: Int = 4, timeoutSeconds: Double = 10, rate: RateLimit? = nil) {
        self.endpoint = endpoint
        self.caFile = caFile
        self.topic = topic
        self.auth = auth
        self.connections = connections
        self.timeoutSeconds = timeoutSeconds
        self.rate = rate
    }
}

/// The `fcm:` section.
public struct FCMSettings: Sendable, Equatable {
    /// `connections` when the file gives none. Google allows 100 streams on each FCM connection, and a lane sends at
    /// most its requests in flight per round trip: 8 connections (800 in flight) keep FCM's default quota rate of
    /// 10,000 a second up to an 80 ms round trip, where 2 (200) fell below it past 20 ms.
    public static let defaultConnections = 8

    /// Where the lane's OAuth2 access tokens come from (`credentials:`).
    public enum Credentials: String, Sendable, Equatable, CaseIterable {
        /// A service account's key file, traded for tokens at its `token_uri` (the default).
        case serviceAccount = "service_account"
        /// Google Cloud's metadata server, for the service account attached to the workload (GKE Workload Identity,
        /// Compute Engine, Cloud Run): no key file at all.
        case metadataServer = "metadata_server"
    }

    /// `service_account_file` (or `GOOGLE_APPLICATION_CREDENTIALS` when absent).
    public var serviceAccountFile: String?
    /// `credentials:`.
    public var credentials: Credentials = .serviceAccount
    /// `project_id`: the Firebase project messages are sent for. Required with ``Credentials/metadataServer``; with a
    /// service account it replaces the account's own `project_id` (an account of one project sending for another).
    public var projectID: String?
    public var endpoint: Endpoint
    public var caFile: String?
    public var connections: Int
    public var timeoutSeconds: Double
    public var rate: RateLimit?
    /// `concurrency`: requests in flight on this lane at once (nil: connections × the provider's usual
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`, so requests wait in the pacer, not inside a connection).
    public var concurrency: Int?
    /// `proxy:` / `proxy_credentials_env`: how connections reach the endpoint and the token endpoint.
    public var proxy: ProxySetting = .environment
    /// `proxy_ca_file`: an extra CA trusted for an `https://` proxy's certificate.
    public var proxyCAFile: String?

    public init(serviceAccountFile: String?, endpoint: Endpoint = .fcm, caFile: String? = nil, connections: Int = FCMSettings.defaultConnections, timeoutSeconds: Double = 10, rate: RateLimit? = nil) {
        self.serviceAccountFile = serviceAccountFile
        self.endpoint = endpoint
        self.caFile = caFile
        self.connections = connections
        self.timeoutSeconds = timeoutSeconds
        self.rate = rate
    }
}

/// The `legacy_apns:` section.
public struct LegacyAPNsSettings: Sendable, Equatable {
    public var enabled: Bool
    public var host: String
    public var port: Int
    public var feedbackPort: Int
    public var certFile: String
    public var keyFile: String
    public var caFile: String?
    public var payloadLimit: Int
    public var connections: Int
    public var rate: RateLimit?
    /// `concurrency`: notifications written and not yet confirmed at once (nil: 1000).
    public var concurrency: Int?
    /// `quiet_period`: seconds after a notification reached the socket without an error response before it
    /// counts as delivered (the gateway never confirms success).
    public var quietPeriodSeconds: Double
    /// `proxy:` / `proxy_credentials_env`: how the gateway and feedback connections reach `host`.
    public var proxy: ProxySetting = .environment
    /// `proxy_ca_file`: an extra CA trusted for an `https://` proxy's certificate.
    public var proxyCAFile: String?

    /// `payload_limit` when the section leaves it out (the gateway's 2 KB).
    public static let defaultPayloadLimit = 2048

    public init(enabled: Bool, host: String, port: Int = 2195, feedbackPort: Int = 2196, certFile: String, keyFile: String, caFile: String? = nil, payloadLimit: Int = defaultPayloadLimit, connections: Int = 1, rate: RateLimit? = nil, quietPeriodSeconds: Double = 0.5) {
        self.enabled = enabled
        self.host = host
        self.port = port
        self.feedbackPort = feedbackPort
        self.certFile = certFile
        self.keyFile = keyFile
        self.caFile = caFile
        self.payloadLimit = payloadLimit
        self.connections = connections
        self.rate = rate
        self.quietPeriodSeconds = quietPeriodSeconds
    }
}
