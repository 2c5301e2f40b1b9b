import Foundation

/// The proxy one provider connection goes through: Bugle connects to `host:port` (with TLS to the proxy itself for
/// an `https://` proxy, so its credentials never cross the network in the clear), asks for a tunnel to the provider
/// (an HTTP `CONNECT`, or a SOCKS5 `CONNECT` for a ``socks`` proxy), and runs TLS to the provider inside it (the proxy
/// sees only the provider's name and encrypted bytes).
///
/// The `Proxy-Authorization` value and the SOCKS credentials are secrets: ``description`` never shows them.
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
    /// A SOCKS5 proxy (`socks5h://`): the tunnel is SOCKS5's, the proxy resolves the provider's name.
    public var socks: Bool
    /// `user:password` for a SOCKS5 proxy's username/password method (RFC 1929), or nil.
    public var socksCredentials: String?

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
        self.socks = false
    }

    /// A SOCKS5 proxy at `host:port`, with `user:password` credentials or none.
    public static func socks5(host: String, port: Int, credentials: String?) -> HTTPProxy {
        var proxy = HTTPProxy(host: host, port: port)
        proxy.socks = true
        proxy.socksCredentials = credentials
        return proxy
    }

    /// `http(s)://host:port` or `socks5h://host:port`, and whether credentials are sent (never the credentials).
    public var description: String {
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let scheme = socks ? "socks5h://" : tls ? "https://" : "http://"
        return scheme + authority + (authorization == nil && socksCredentials == nil ? "" : " (with credentials)")
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
    /// - Throws: ``ProxyConfigurationError`` when the credentials variable is unset or `https_proxy` (else `all_proxy`)
    ///   is not a usable `http://`, `https://` or `socks5h://` URL.
    public static func resolve(
        _ setting: ProxySetting, caFile: String? = nil, host: String, environment: [String: String]
    ) throws(ProxyConfigurationError) -> HTTPProxy? {
        switch setting {
        case .direct:
            return nil
        case .proxy(let proxyHost, let port, let tls, let credentialsEnv, let socks):
            let caFile = tls ? caFile : nil
            var credentials: String?
            if let credentialsEnv {
                guard let value = environment[credentialsEnv], !value.isEmpty else { throw .missingCredentials(variable: credentialsEnv) }
                guard value.contains(":") else { throw .malformedCredentials(variable: credentialsEnv) }
                credentials = value
            }
            if socks {
                try checkSOCKSCredentials(credentials, variable: credentialsEnv ?? "proxy_credentials_env")
                return .socks5(host: proxyHost, port: port, credentials: credentials)
            }
            return HTTPProxy(host: proxyHost, port: port, tls: tls, caFile: caFile, authorization: credentials.map(basicAuthorization))
        case .environment:
            guard let (variable, value) = ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"].lazy
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
            if url.socks {
                try checkSOCKSCredentials(url.credentials, variable: variable)
                return .socks5(host: url.host, port: url.port, credentials: url.credentials)
            }
            let authorization = url.credentials.map(basicAuthorization)
            return HTTPProxy(host: url.host, port: url.port, tls: url.tls, caFile: url.tls ? caFile : nil, authorization: authorization)
        }
    }

    /// RFC 1929 carries a user name and a password of 1 to 255 bytes each.
    private static func checkSOCKSCredentials(_ credentials: String?, variable: String) throws(ProxyConfigurationError) {
        guard let credentials, let colon = credentials.firstIndex(of: ":") else { return }
        let user = credentials[..<colon].utf8.count
        let password = credentials[credentials.index(after: colon)...].utf8.count
        guard (1...255).contains(user), (1...255).contains(password) else {
            throw .socksCredentialLength(variable: variable)
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
    /// A SOCKS5 proxy's user name or password (from this variable) is empty or longer than 255 bytes.
    case socksCredentialLength(variable: String)
    /// The TLS library refused the client configuration for an `https://` proxy.
    case tlsContext(String)

    public var description: String {
        switch self {
        case .missingCredentials(let variable):
            return "proxy_credentials_env names \(variable), which is not set in the environment"
        case .malformedCredentials(let variable):
            return "\(variable) (proxy_credentials_env) must hold user:password"
        case .malformedEnvironment(let variable, let problem):
            return "the environment variable \(variable) is not a usable proxy URL: \(problem); "
                + "fix it, or set proxy: none (or an http://, https:// or socks5h:// URL) in the providers file"
        case .unreadableCAFile(let path):
            return "proxy_ca_file \(path) cannot be read"
        case .invalidCAFile(let path):
            return "proxy_ca_file \(path) holds no PEM certificate"
        case .socksCredentialLength(let variable):
            return "\(variable): a SOCKS5 proxy's user name and password must each be 1 to 255 bytes"
        case .tlsContext(let reason):
            return "TLS to the https:// proxy cannot be configured: \(reason)"
        }
    }
}
