import Foundation

/// The HTTP proxy one provider connection goes through: Bugle connects to `host:port` (with TLS to the proxy itself for
/// an `https://` proxy, so its credentials never cross the network in the clear), asks for a `CONNECT` tunnel to the
/// provider, and runs TLS to the provider inside it (the proxy sees only the provider's name and encrypted bytes).
///
/// The `Proxy-Authorization` value is a secret: ``description`` never shows it.
public struct HTTPProxy: Sendable, Equatable, CustomStringConvertible {
    /// The proxy's host name or IP literal.
    public var host: String
    /// The proxy's port.
    public var port: Int
    /// `Basic …` for `Proxy-Authorization`, or nil.
    public var authorization: String?
    /// An `https://` proxy: the connection to it is TLS (1.2 or later, its certificate verified against the system's
    /// CAs and ``caFile``), and the `CONNECT` travels inside.
    public var tls: Bool
    /// `proxy_ca_file`: an extra CA (PEM) trusted for an `https://` proxy's certificate.
    public var caFile: String?

    /// Creates a proxy route.
    /// - Parameters:
    ///   - host: Proxy host.
    ///   - port: Proxy port.
    ///   - tls: Whether the connection to the proxy is TLS (`https://`).
    ///   - caFile: Extra CA for the proxy's certificate (`https://` only).
    ///   - authorization: `Proxy-Authorization` header value, or nil.
    public init(host: String, port: Int, tls: Bool = false, caFile: String? = nil, authorization: String? = nil) {
        self.host = host
        self.port = port
        self.tls = tls
        self.caFile = caFile
        self.authorization = authorization
    }

    /// `http(s)://host:port`, and whether credentials are sent (never the credentials).
    public var description: String {
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        return (tls ? "https://" : "http://") + authority + (authorization == nil ? "" : " (with credentials)")
    }

    /// A `Basic` authorization for `user:password`.
    public static func basicAuthorization(_ credentials: String) -> String {
        "Basic " + Data(credentials.utf8).base64EncodedString()
    }

    /// The proxy a connection to `host` uses under `setting`, or nil to connect directly.
    /// - Parameters:
    ///   - setting: The section's `proxy:` choice.
    ///   - caFile: The section's `proxy_ca_file`, trusted for an `https://` proxy (the file's or the environment's).
    ///   - host: The provider host the connection is for (matched against `no_proxy`).
    ///   - environment: Where `https_proxy`, `no_proxy` and `proxy_credentials_env` are looked up.
    /// - Throws: ``ProxyConfigurationError`` when the credentials variable is unset or `https_proxy` is not a usable
    ///   `http://` or `https://` URL.
    public static func resolve(
        _ setting: ProxySetting, caFile: String? = nil, host: String, environment: [String: String]
    ) throws(ProxyConfigurationError) -> HTTPProxy? {
        switch setting {
        case .direct:
            return nil
        case .proxy(let proxyHost, let port, let tls, let credentialsEnv):
            let caFile = tls ? caFile : nil
            guard let credentialsEnv else { return HTTPProxy(host: proxyHost, port: port, tls: tls, caFile: caFile) }
            guard let credentials = environment[credentialsEnv], !credentials.isEmpty else {
                throw .missingCredentials(variable: credentialsEnv)
            }
            guard credentials.contains(":") else { throw .malformedCredentials(variable: credentialsEnv) }
            return HTTPProxy(host: proxyHost, port: port, tls: tls, caFile: caFile, authorization: basicAuthorization(credentials))
        case .environment:
            guard let (variable, value) = ["https_proxy", "HTTPS_PROXY"].lazy
                .compactMap({ name in environment[name].map { (name, $0) } })
                .first(where: { !$0.1.isEmpty })
            else { return nil }
            if Self.isLoopback(host) { return nil }
            let bypass = ["no_proxy", "NO_PROXY"].lazy.compactMap { environment[$0] }.first ?? ""
            if NoProxyList(bypass).matches(host) { return nil }
            let url: ProxyURL
            do throws(ProxyURL.Malformed) {
                url = try ProxyURL(parsing: value.contains("://") ? value : "http://" + value)
            } catch {
                throw .malformedEnvironment(variable: variable, problem: error.problem)
            }
            let authorization = url.credentials.map(basicAuthorization)
            return HTTPProxy(host: url.host, port: url.port, tls: url.tls, caFile: url.tls ? caFile : nil, authorization: authorization)
        }
    }

    /// `localhost`, `*.localhost`, 127.0.0.0/8 and `::1`: never sent to a proxy named by the environment.
    static func isLoopback(_ host: String) -> Bool {
        let name = host.lowercased()
        return name == "localhost" || name.hasSuffix(".localhost") || name == "::1" || name == "[::1]"
            || (name.hasPrefix("127.") && name.split(separator: ".").count == 4 && name.allSatisfy { $0.isNumber || $0 == "." })
    }
}

/// Why no proxy route could be built. Descriptions name variables, never their values.
public enum ProxyConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    case missingCredentials(variable: String)
    case malformedCredentials(variable: String)
    case malformedEnvironment(variable: String, problem: String)
    /// `proxy_ca_file` cannot be read.
    case unreadableCAFile(path: String)
    /// `proxy_ca_file` holds no PEM certificate.
    case invalidCAFile(path: String)

    public var description: String {
        switch self {
        case .missingCredentials(let variable):
            return "proxy_credentials_env names \(variable), which is not set in the environment"
        case .malformedCredentials(let variable):
            return "\(variable) (proxy_credentials_env) must hold user:password"
        case .malformedEnvironment(let variable, let problem):
            return "the environment variable \(variable) is not a usable proxy URL: \(problem); "
                + "fix it, or set proxy: none (or an http:// or https:// URL) in the providers file"
        case .unreadableCAFile(let path):
            return "proxy_ca_file \(path) cannot be read"
        case .invalidCAFile(let path):
            return "proxy_ca_file \(path) holds no PEM certificate"
        }
    }
}
