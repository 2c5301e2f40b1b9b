/// A connection through a proxy (HTTP `CONNECT` or SOCKS5) that did not get its tunnel. Names the proxy (never its credentials) and the
/// provider it was asked for.
public struct HTTPProxyError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The proxy answered `CONNECT` with a non-2xx status.
        case refused(status: Int, reason: String)
        /// The proxy's answer was not an HTTP/1.x status line and headers.
        case malformedAnswer
        /// The proxy closed the connection before answering.
        case closed
        /// The proxy did not answer in time.
        case noAnswer(milliseconds: Int64)
        /// TLS with an `https://` proxy failed; `configuration` when reconnecting cannot fix it (a refused
        /// certificate, a proxy that does not speak TLS).
        case tls(reason: String, configuration: Bool)
        /// A SOCKS5 proxy refused: its method choice, the credentials, or the `CONNECT` (`reply` says which);
        /// `configuration` when reconnecting cannot fix it.
        case socks(reply: String, configuration: Bool)
    }

    /// The proxy, as ``BugleCore/HTTPProxy/description`` shows it.
    public var proxy: String
    /// `host:port` the tunnel was asked for.
    public var target: String
    public var kind: Kind

    /// Whether reconnecting cannot help until the configuration changes: the proxy wants (other) credentials (407, or
    /// 401 as tinyproxy answers wrong ones), will not tunnel to this host (403, 405), cannot read the request (400), or
    /// its TLS certificate was refused. Anything else (408, 429, 5xx: the provider unreachable, the proxy busy) is an
    /// outage.
    public var isConfiguration: Bool {
        switch kind {
        case .refused(let status, _): return Self.configurationStatuses.contains(status)
        case .tls(_, let configuration), .socks(_, let configuration): return configuration
        case .malformedAnswer, .closed, .noAnswer: return false
        }
    }

    static let configurationStatuses: Set<Int> = [400, 401, 403, 405, 407]

    public var description: String {
        let what = "the proxy \(proxy) "
        switch kind {
        case .refused(let status, let reason) where status == 401 || status == 407:
            return what + "refused the tunnel to \(target): \(status) \(reason); "
                + (proxy.hasSuffix("(with credentials)")
                    ? "it did not accept the credentials (check the variable proxy_credentials_env names, or https_proxy's user:password)"
                    : "it asks for credentials: set proxy_credentials_env in the providers file")
        case .refused(let status, let reason):
            return what + "refused the tunnel to \(target): \(status) \(reason)"
                + (isConfiguration ? "; the proxy does not allow this host or CONNECT" : "")
        case .malformedAnswer where proxy.hasPrefix("socks5h://"):
            return what + "did not answer as a SOCKS5 proxy (is it one?) for the tunnel to \(target)"
        case .malformedAnswer:
            return what + "did not answer CONNECT \(target) with an HTTP/1.x status (is it an HTTP proxy?)"
        case .closed where proxy.hasPrefix("http://"):
            // A TLS port read as plain HTTP: some servers close without an alert (squid sends one, and that halts).
            return what + "closed the connection before answering CONNECT \(target) (if that port expects TLS, write https:// for the proxy)"
        case .closed:
            return what + "closed the connection before answering CONNECT \(target)"
        case .noAnswer(let milliseconds):
            return what + "did not answer CONNECT \(target) within \(milliseconds) ms"
        case .tls(let reason, _):
            return what + "could not be used for the tunnel to \(target): " + reason
        case .socks(let reply, _):
            return what + reply + " (tunnel to \(target))"
        }
    }
}
