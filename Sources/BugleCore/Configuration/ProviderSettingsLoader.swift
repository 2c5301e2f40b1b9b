import Foundation

/// Loads and validates a providers file (`providers.yaml`) into ``ProviderSettings``.
///
/// Every key is documented in `campaigns/README.md`. In short (defaults in brackets):
///
///     apns:
///       endpoint: production | sandbox | https://host[:port]     (required)
///       ca_file: <path>   topic: <bundle id, required>
///       auth:     # exactly one of
///         token: { team_id: <10 chars>, key_id: <10 chars>, key_file: <path> }
///         certificate: { cert_file: <path>, key_file: <path>, passphrase_env: <VAR> }
///         # or certificate: { p12_file: <path>, passphrase_env: <VAR> }
///       connections: 1...64 [4]   timeout: <duration> [10s]   rate: { per_second: > 0, burst: ≥ 1 [per_second / 50] }
///       concurrency: requests in flight on the lane, 1...100000 [connections × 1000]
///       proxy: none | http://host[:port] | https://host[:port] | socks5h://host[:port] [the environment's https_proxy, minus no_proxy]
///       proxy_credentials_env: <VAR holding user:password for the proxy>
///       proxy_ca_file: <path: an extra CA for an https:// proxy's certificate>
///     fcm:
///       service_account_file: <path> [GOOGLE_APPLICATION_CREDENTIALS]   endpoint [https://fcm.googleapis.com]
///       credentials: service_account | metadata_server [service_account]
///       project_id: <Firebase project> [the service account's; required with metadata_server]
///       ca_file   connections [8]   timeout [10s]   rate [600000/min = 10000/s]   concurrency [connections × 100]
///       proxy   proxy_credentials_env   proxy_ca_file (as for apns; also used for the service account's token_uri)
///     legacy_apns:
///       enabled [true]   host (required)   port [2195]   feedback_port [2196]   cert_file, key_file (required)
///       ca_file   payload_limit 256...4096 [2048]   connections [1]   rate   concurrency [1000]
///       quiet_period: time without an error response before a written notification counts as delivered,
///         a duration within 0.01...60 seconds such as 200ms [0.5]
///       proxy   proxy_credentials_env   proxy_ca_file (as for apns; the gateway's and the feedback service's connections)
///
/// File paths are resolved against the providers file's folder. Plain `http://` endpoints are refused:
/// every provider connection uses TLS. Errors never quote values from this file.
public enum ProviderSettingsLoader {
    static let topKeys = ["apns", "fcm", "legacy_apns"]
    static let apnsKeys = [
        "endpoint", "ca_file", "topic", "auth", "connections", "timeout", "rate", "concurrency", "proxy", "proxy_credentials_env", "proxy_ca_file",
    ]
    static let authKeys = ["token", "certificate"]
    static let tokenKeys = ["team_id", "key_id", "key_file"]
    static let certificateKeys = ["cert_file", "key_file", "p12_file", "passphrase_env"]
    static let fcmKeys = [
        "service_account_file", "credentials", "project_id", "endpoint", "ca_file", "connections", "timeout", "rate", "concurrency", "proxy", "proxy_credentials_env", "proxy_ca_file",
    ]
    static let legacyKeys = [
        "enabled", "host", "port", "feedback_port", "cert_file", "key_file", "ca_file", "payload_limit",
        "connections", "rate", "concurrency", "quiet_period", "proxy", "proxy_credentials_env", "proxy_ca_file",
    ]
    static let rateKeys = ["per_second", "burst"]

    /// Reads, parses and validates the providers file at `path`.
    /// - Parameter path: The providers file; every file path inside is resolved against its folder.
    /// - Returns: The validated settings, with `sourcePath` set to `path`.
    /// - Throws: ``ConfigurationError`` for any problem (values are never quoted in messages).
    public static func load(path: String) throws -> ProviderSettings {
        let yaml = try ConfigurationDocument.readText(atPath: path)
        return try load(yaml: yaml, path: path)
    }

    /// Parses and validates providers YAML that was read from `path`.
    /// - Parameters:
    ///   - yaml: The file's text.
    ///   - path: Where it came from: named in errors, stored as `sourcePath`, and the base for file paths.
    /// - Returns: The validated settings.
    /// - Throws: ``ConfigurationError`` for any problem.
    public static func load(yaml: String, path: String) throws -> ProviderSettings {
        let root = try ConfigurationDocument.parse(yaml: yaml, origin: .init(file: path, redactsValues: true))
        let top = try root.mapping(allowedKeys: topKeys)
        let resolver = PathResolver(file: path)
        let apns = try top["apns"].map { try self.apns($0, paths: resolver) }
        let fcm = try top["fcm"].map { try self.fcm($0, paths: resolver) }
        let legacy = try top["legacy_apns"].map { try self.legacy($0, paths: resolver) }
        if apns == nil && fcm == nil && legacy == nil {
            throw root.error("no provider is configured; add an apns, fcm or legacy_apns section")
        }
        var settings = ProviderSettings(apns: apns, fcm: fcm, legacyAPNs: legacy, sourcePath: path)
        settings.locations = resolver.locations
        return settings
    }

    // MARK: - Sections

    private static func apns(_ node: ConfigurationNode, paths: PathResolver) throws -> APNsSettings {
        let map = try node.mapping(allowedKeys: apnsKeys)
        let endpointNode = try map.required("endpoint")
        let endpoint: Endpoint
        switch try endpointNode.string() {
        case "production": endpoint = .apnsProduction
        case "sandbox": endpoint = .apnsSandbox
        default: endpoint = try self.endpoint(endpointNode, expected: "production, sandbox or an https://host:port URL")
        }
        let caFile = try map["ca_file"].map(paths.resolve)
        let topicNode = try map.required("topic")
        let topic = try topicNode.singleLineString(maximumLength: 255)
        if topic.contains(" ") { throw topicNode.error("must be a bundle identifier without spaces") }
        let auth = try self.auth(map.required("auth"), paths: paths)
        var settings = APNsSettings(
            endpoint: endpoint, caFile: caFile, topic: topic, auth: auth,
            connections: try map.int("connections", default: 4, in: 1...64),
            timeoutSeconds: try map["timeout"].map(timeout) ?? 10,
            rate: try map["rate"].map(rate))
        settings.concurrency = try map["concurrency"].map { try $0.int(in: 1...100_000) }
        settings.proxy = try proxy(map, paths: paths)
        settings.proxyCAFile = try proxyCAFile(map, proxy: settings.proxy, paths: paths)
        return settings
    }

    private static func auth(_ node: ConfigurationNode, paths: PathResolver) throws -> APNsSettings.Auth {
        let map = try node.mapping(allowedKeys: authKeys)
        switch (map["token"], map["certificate"]) {
        case (.some, .some(let certificate)):
            throw certificate.keyError("give exactly one of token or certificate, not both")
        case (.none, .none):
            throw map.missing("token", hint: "or certificate; exactly one is required")
        case (.some(let tokenNode), .none):
            let token = try tokenNode.mapping(allowedKeys: tokenKeys)
            return .token(
                teamID: try appleIdentifier(token.required("team_id")),
                keyID: try appleIdentifier(token.required("key_id")),
                keyFile: try paths.resolve(token.required("key_file")))
        case (.none, .some(let certificateNode)):
            let certificate = try certificateNode.mapping(allowedKeys: certificateKeys)
            let passphraseEnv = try certificate["passphrase_env"].map(paths.variable)
            if let p12 = certificate["p12_file"] {
                for key in ["cert_file", "key_file"] {
                    if let conflicting = certificate[key] {
                        throw conflicting.keyError("give either p12_file or cert_file with key_file, not both")
                    }
                }
                return .certificate(certFile: try paths.resolve(p12), keyFile: nil, passphraseEnv: passphraseEnv)
            }
            guard certificate.contains("cert_file") else {
                throw certificate.missing("cert_file", hint: "or p12_file")
            }
            return .certificate(
                certFile: try paths.resolve(certificate.required("cert_file")),
                keyFile: try paths.resolve(certificate.required("key_file")),
                passphraseEnv: passphraseEnv)
        }
    }

    private static func fcm(_ node: ConfigurationNode, paths: PathResolver) throws -> FCMSettings {
        let map = try node.mapping(allowedKeys: fcmKeys)
        var settings = FCMSettings(
            serviceAccountFile: try map["service_account_file"].map(paths.resolve),
            endpoint: try map["endpoint"].map { try endpoint($0, expected: "an https://host[:port] URL") } ?? .fcm,
            caFile: try map["ca_file"].map(paths.resolve),
            connections: try map.int("connections", default: FCMSettings.defaultConnections, in: 1...64),
            timeoutSeconds: try map["timeout"].map(timeout) ?? 10,
            rate: try map["rate"].map(rate))
        settings.concurrency = try map["concurrency"].map { try $0.int(in: 1...100_000) }
        settings.proxy = try proxy(map, paths: paths)
        settings.proxyCAFile = try proxyCAFile(map, proxy: settings.proxy, paths: paths)
        try fcmCredentials(map, into: &settings)
        return settings
    }

    /// `credentials` and `project_id`: the metadata server needs a project and no key file.
    private static func fcmCredentials(_ map: ConfigurationMapping, into settings: inout FCMSettings) throws {
        if let node = map["credentials"] {
            guard let credentials = FCMSettings.Credentials(rawValue: try node.string()) else {
                throw node.error("expected " + FCMSettings.Credentials.allCases.map(\.rawValue).joined(separator: " or "))
            }
            settings.credentials = credentials
        }
        if let node = map["project_id"] {
            let project = try node.singleLineString(maximumLength: 100)
            let allowed = project.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || "-.:".unicodeScalars.contains($0) }
            guard project.count >= 4, allowed else {
                throw node.error("expected a Google Cloud project id: at least 4 characters, lower-case letters, digits and hyphens, such as my-app-1234")
            }
            settings.projectID = project
        }
        guard settings.credentials == .metadataServer else { return }
        if let file = map["service_account_file"] {
            throw file.keyError("give either service_account_file or credentials: metadata_server, not both")
        }
        guard settings.projectID != nil else {
            throw map.missing("project_id", hint: "the Firebase project to send for; the metadata server's tokens do not name one")
        }
    }

    private static func legacy(_ node: ConfigurationNode, paths: PathResolver) throws -> LegacyAPNsSettings {
        let map = try node.mapping(allowedKeys: legacyKeys)
        let enabled = try map.bool("enabled", default: true)
        let hostNode = try map.required("host")
        let host = try hostNode.singleLineString(maximumLength: 253)
        if host.contains("://") || host.contains("/") || host.contains(" ") || host.contains("@") {
            throw hostNode.error("expected a host name or IP address, without scheme, port or path")
        }
        // A colon belongs to an IPv6 address only: `gateway.push.apple.com:2195` was taken for one, and every connect
        // failed on DNS.
        if host.contains(":") && !IPAddressLiteral.isIPv6(host) {
            throw hostNode.error("expected a host name or IP address (an IPv6 address without brackets), without a port: the port is `port:`")
        }
        var settings = LegacyAPNsSettings(
            enabled: enabled,
            host: host,
            port: try map.int("port", default: 2195, in: 1...65_535),
            feedbackPort: try map.int("feedback_port", default: 2196, in: 1...65_535),
            certFile: try paths.resolve(map.required("cert_file")),
            keyFile: try paths.resolve(map.required("key_file")),
            caFile: try map["ca_file"].map(paths.resolve),
            payloadLimit: try map.int("payload_limit", default: LegacyAPNsSettings.defaultPayloadLimit, in: 256...4096),
            connections: try map.int("connections", default: 1, in: 1...64),
            rate: try map["rate"].map(rate),
            quietPeriodSeconds: try map["quiet_period"].map(quietPeriod) ?? 0.5)
        settings.concurrency = try map["concurrency"].map { try $0.int(in: 1...100_000) }
        settings.proxy = try proxy(map, paths: paths)
        settings.proxyCAFile = try proxyCAFile(map, proxy: settings.proxy, paths: paths)
        return settings
    }

    /// `proxy: none | http(s)://host[:port] | socks5h://host[:port]` and `proxy_credentials_env`; no `proxy:` key leaves it
    /// to the environment.
    private static func proxy(_ map: ConfigurationMapping, paths: PathResolver) throws -> ProxySetting {
        // Noted like the other variable names, so an unset or malformed variable is reported at its line and column.
        let credentialsEnv = try map["proxy_credentials_env"].map(paths.variable)
        guard let node = map["proxy"] else {
            if let credentials = map["proxy_credentials_env"] {
                throw credentials.keyError("needs proxy: http(s)://host:port or socks5h://host:port beside it (a proxy from https_proxy carries its own user:password)")
            }
            return .environment
        }
        let text = try node.string()
        if text == "none" {
            if let credentials = map["proxy_credentials_env"] {
                throw credentials.keyError("makes no sense with proxy: none")
            }
            return .direct
        }
        let url: ProxyURL
        do throws(ProxyURL.Malformed) {
            url = try ProxyURL(parsing: text)
        } catch {
            throw node.error("expected none, http://host:port, https://host:port or socks5h://host:port: \(error.problem)")
        }
        if url.credentials != nil {
            throw node.error(
                "must not hold a user name or password: put user:password in an environment variable and name it with proxy_credentials_env")
        }
        return .proxy(host: url.host, port: url.port, tls: url.tls, credentialsEnv: credentialsEnv, socks: url.socks)
    }

    /// `proxy_ca_file`: for an `https://` proxy, the file's or the environment's; meaningless beside `proxy: none` or
    /// an `http://` proxy.
    private static func proxyCAFile(_ map: ConfigurationMapping, proxy: ProxySetting, paths: PathResolver) throws -> String? {
        guard let node = map["proxy_ca_file"] else { return nil }
        switch proxy {
        case .direct:
            throw node.keyError("makes no sense with proxy: none")
        case .proxy(_, _, false, _, _):
            throw node.keyError("applies only to an https:// proxy (the connection to an http:// or SOCKS proxy has no TLS)")
        case .proxy, .environment:
            return try paths.resolve(node)
        }
    }

    private static func quietPeriod(_ node: ConfigurationNode) throws -> Double {
        let seconds = try node.durationSeconds()
        guard (0.01...60).contains(seconds) else { throw node.error("must be between 0.01 and 60 seconds") }
        return seconds
    }

    // MARK: - Values

    private static func rate(_ node: ConfigurationNode) throws -> RateLimit {
        let map = try node.mapping(allowedKeys: rateKeys)
        let perSecondNode = try map.required("per_second")
        let perSecond = try perSecondNode.number()
        guard perSecond > 0 else {
            throw perSecondNode.error("must be greater than 0, got \(perSecondNode.scalar?.text ?? "")")
        }
        guard perSecond <= 1_000_000 else { throw perSecondNode.error("must be at most 1000000") }
        // Default: 2% of a second's worth, so every one-second window stays within 2% of the rate.
        var burst = max(1, Int((perSecond / 50).rounded(.up)))
        if let burstNode = map["burst"] {
            let value = try burstNode.int()
            guard value >= 1 else { throw burstNode.error("must be at least 1, got \(value)") }
            burst = value
        }
        return RateLimit(perSecond: perSecond, burst: burst)
    }

    private static func timeout(_ node: ConfigurationNode) throws -> Double {
        let seconds = try node.durationSeconds()
        // Under a second, answers that are merely slow (a TLS handshake, an OAuth token, a loaded provider) are given
        // up as lost: `timeout: 1ms` passed and every request of the run ended lost, halting it as AnswersLost.
        guard seconds >= 1, seconds <= 300 else {
            throw node.error("must be at least 1 second and at most 300 seconds, got \(String(format: "%g", seconds)) s")
        }
        return seconds
    }


    /// Parses `https://host[:port]` (no path, query or user info). `http://` is refused: TLS only.
    private static func endpoint(_ node: ConfigurationNode, expected: String) throws -> Endpoint {
        let text = try node.string()
        let lowered = text.lowercased()
        if lowered.hasPrefix("http://") {
            throw node.error("plain http:// endpoints are refused: provider connections always use TLS; use https://")
        }
        guard lowered.hasPrefix("https://") else { throw node.error("expected \(expected)") }
        var rest = Substring(text.dropFirst("https://".count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.contains(where: { "/?#@ ".contains($0) }) {
            throw node.error("must be https://host:port with no path, query or user name")
        }
        do throws(URLAuthority.Malformed) {
            let authority = try URLAuthority(parsing: rest, defaultPort: 443)
            return Endpoint(host: authority.host, port: authority.port)
        } catch {
            throw node.error("expected \(expected): \(error.problem)")
        }
    }

    /// Apple team and key identifiers: exactly 10 ASCII letters or digits.
    private static func appleIdentifier(_ node: ConfigurationNode) throws -> String {
        let value = try node.string()
        guard value.count == 10, value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw node.error("must be exactly 10 letters or digits, got \(value.count) characters")
        }
        return value
    }

    /// The name of an environment variable (the secret itself stays in the environment).
    fileprivate static func environmentVariableName(_ node: ConfigurationNode) throws -> String {
        let value = try node.string()
        let isName =
            value.first.map { $0 == "_" || ($0.isASCII && $0.isLetter) } == true
            && value.allSatisfy { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
        guard isName, value.count <= 128 else {
            throw node.error("must name an environment variable (letters, digits and _), not hold the secret itself")
        }
        return value
    }

    /// Resolves file paths against the providers file's folder, and notes where each path and variable name is written.
    private final class PathResolver {
        let file: String
        private(set) var locations: [ProviderSettings.Location] = []

        init(file: String) {
            self.file = file
        }

        func resolve(_ node: ConfigurationNode) throws -> String {
            let path = ConfigurationPath.resolve(try node.filePath(), relativeToFileAt: file)
            note(node, path)
            return path
        }

        /// The name of an environment variable, noted like a path.
        func variable(_ node: ConfigurationNode) throws -> String {
            let name = try ProviderSettingsLoader.environmentVariableName(node)
            note(node, name)
            return name
        }

        private func note(_ node: ConfigurationNode, _ value: String) {
            locations.append(.init(keyPath: node.keyPath, value: value, line: node.line, column: node.column))
        }
    }
}
