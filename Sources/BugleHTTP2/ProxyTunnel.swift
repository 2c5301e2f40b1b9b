import BugleCore
import NIOCore
import NIOPosix
import NIOSSL

/// The front of a connection through a proxy: the handlers that open the tunnel before TLS to the server starts inside
/// it. SOCKS5 (``SOCKS5TunnelHandler``), or `CONNECT` (``HTTPConnectTunnelHandler``), over TLS to an `https://` proxy.
/// Used by the HTTP/2 pool and by single HTTP/1.1 exchanges (a federation `https://` token URL).
public struct ProxyTunnel: Sendable {
    public let proxy: HTTPProxy
    /// TLS to an `https://` proxy (nil: `http://` or SOCKS).
    private let tls: NIOSSLContext?
    /// The proxy's SNI name (nil for an IP literal).
    private let hostname: String?

    /// - Throws: ``BugleCore/ProxyConfigurationError`` for an unusable `proxy_ca_file`; NIOSSL errors otherwise.
    public init(proxy: HTTPProxy) throws {
        self.proxy = proxy
        self.tls = try HTTPProxyTLS.context(for: proxy)
        self.hostname = HTTP2ConnectionPool.serverHostname(proxy.host)
    }

    /// The tunnel a connection to `host` takes under `setting` (``BugleCore/HTTPProxy/resolve(_:caFile:host:environment:)``),
    /// or nil to connect directly.
    public static func resolve(
        _ setting: ProxySetting, caFile: String?, host: String, environment: [String: String]
    ) throws(ProxyConfigurationError) -> ProxyTunnel? {
        guard let proxy = try HTTPProxy.resolve(setting, caFile: caFile, host: host, environment: environment) else { return nil }
        do {
            return try ProxyTunnel(proxy: proxy)
        } catch let error as ProxyConfigurationError {
            throw error
        } catch {
            throw .tlsContext("\(error)")
        }
    }

    /// Adds the tunnel's handlers to a new channel's pipeline (connected to the proxy), asking it for `host:port`; the
    /// proxy has `timeout` to answer.
    public func addHandlers(to pipeline: ChannelPipeline.SynchronousOperations, host: String, port: Int, timeout: TimeAmount) throws {
        if proxy.socks {
            try pipeline.addHandler(SOCKS5TunnelHandler(proxy: proxy, host: host, port: port, timeout: timeout))
            return
        }
        if let tls {
            try pipeline.addHandler(TLSClientHandlers.make(context: tls, serverHostname: hostname))
        }
        try pipeline.addHandler(HTTPConnectTunnelHandler(proxy: proxy, host: host, port: port, timeout: timeout))
    }
}

/// TCP to the proxy itself failed (the tunnel's own failures are ``HTTPProxyError``s, raised once it is reached).
public struct ProxyUnreachable: Error, Sendable, CustomStringConvertible {
    /// The proxy, as ``BugleCore/HTTPProxy/description`` shows it (never its credentials).
    public var proxy: String
    /// What the connect failed with.
    public var reason: String

    public var description: String { "cannot reach the proxy \(proxy): \(reason)" }
}

extension ClientBootstrap {
    /// Connects to `host:port`, or, when `tunnel` carries the connection, to its proxy (the channel initializer adds the
    /// tunnel's handlers, which ask it for `host:port`); failing to reach the proxy is a ``ProxyUnreachable``.
    public func connect(host: String, port: Int, through tunnel: ProxyTunnel?) -> EventLoopFuture<any Channel> {
        guard let tunnel else { return connect(host: host, port: port) }
        let proxy = tunnel.proxy
        return connect(host: proxy.host, port: proxy.port).flatMapErrorThrowing { error in
            throw ProxyUnreachable(proxy: "\(proxy)", reason: NetworkErrorText.describe(error))
        }
    }
}
