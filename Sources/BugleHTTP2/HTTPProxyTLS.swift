import BugleCore
import NIOSSL

/// TLS to an `https://` proxy itself, the outer layer of a connection that then carries the `CONNECT` and, inside the
/// tunnel, TLS to the provider: TLS 1.2 or later, offering `http/1.1`, the proxy's certificate verified against the
/// system's CAs and `proxy_ca_file` (verification is never switched off).
enum HTTPProxyTLS {
    /// The client context for `proxy`, or nil for an `http://` proxy.
    /// - Throws: ``ProxyConfigurationError`` for an unreadable or empty `proxy_ca_file`; NIOSSL errors otherwise.
    static func context(for proxy: HTTPProxy?) throws -> NIOSSLContext? {
        guard let proxy, proxy.tls else { return nil }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.certificateVerification = .fullVerification
        tls.applicationProtocols = ["http/1.1"]
        if let caFile = proxy.caFile {
            switch TrustedCertificates.load(caFile) {
            case .success(let certificates): tls.additionalTrustRoots = [.certificates(certificates)]
            case .failure(.unreadable): throw ProxyConfigurationError.unreadableCAFile(path: caFile)
            case .failure(.noCertificate): throw ProxyConfigurationError.invalidCAFile(path: caFile)
            }
        }
        return try NIOSSLContext(configuration: tls)
    }

    /// What a failed TLS handshake with the proxy means: a certificate Bugle refused, or an answer that is not TLS, is
    /// configuration (reconnecting cannot fix it); anything else (a reset, a close mid-handshake) is an outage. Nil
    /// when `error` is not a TLS error.
    static func failure(_ error: any Error) -> HTTPProxyError.Kind? {
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
            return .tls(reason: "its TLS certificate does not name the proxy's host (\(extra)); check the host in proxy: or https_proxy", configuration: true)
        }
        switch error as? NIOSSLError {
        case .handshakeFailed(let underlying)?:
            let text = String(describing: underlying)
            if text.contains("CERTIFICATE_VERIFY_FAILED") {
                return .tls(
                    reason: "its TLS certificate was refused (not issued by a trusted CA, expired or not yet valid); check proxy_ca_file",
                    configuration: true)
            }
            return .tls(reason: "the TLS handshake failed (\(text)); if the proxy does not speak TLS, write its URL as http://", configuration: true)
        case .uncleanShutdown?:
            return .tls(reason: "it closed the connection during the TLS handshake", configuration: false)
        case let other?:
            return .tls(reason: "TLS failed (\(other))", configuration: false)
        case nil:
            return nil
        }
    }
}
