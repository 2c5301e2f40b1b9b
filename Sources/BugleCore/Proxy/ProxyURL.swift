import Foundation

/// A proxy URL, `http://[user:password@]host[:port][/]` (port 80 when absent), `https://…` (port 443 when absent:
/// TLS to the proxy itself) or `socks5h://…` / `socks5://…` (port 1080 when absent: a SOCKS5 proxy), as `https_proxy`
/// and a providers file's `proxy:` give it. Bugle asks the proxy for a tunnel (HTTP `CONNECT`, or SOCKS5's) and runs
/// TLS to the provider through it.
struct ProxyURL: Equatable {
    /// Why a text is not a proxy URL. Never quotes the text, which may hold a password.
    struct Malformed: Error, Equatable {
        var problem: String
    }

    var host: String
    var port: Int
    /// `https://`: the connection to the proxy is TLS.
    var tls: Bool
    /// `socks5h://` or `socks5://`: a SOCKS5 proxy.
    var socks: Bool
    /// `user:password` (percent-decoded), or nil.
    var credentials: String?

    /// Parses `text`.
    /// - Throws: ``Malformed``.
    init(parsing text: String) throws(Malformed) {
        guard let schemeEnd = text.range(of: "://") else { throw Malformed(problem: "expected http://host:port or https://host:port") }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        guard ["http", "https", "socks5", "socks5h"].contains(scheme) else {
            throw Malformed(problem: "only http://, https:// and socks5h:// (or socks5://) proxies are supported (Bugle tunnels TLS through the proxy)")
        }
        tls = scheme == "https"
        socks = scheme.hasPrefix("socks")
        var rest = Substring(text[schemeEnd.upperBound...])
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.contains(where: { "/?# ".contains($0) }) { throw Malformed(problem: "must be scheme://host:port with no path or query") }
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let decoded = String(userInfo).removingPercentEncoding ?? String(userInfo)
            credentials = decoded.contains(":") ? decoded : decoded + ":"
        }
        let authority: URLAuthority
        do throws(URLAuthority.Malformed) {
            authority = try URLAuthority(parsing: rest, defaultPort: socks ? 1080 : tls ? 443 : 80)
        } catch {
            throw Malformed(problem: error.problem)
        }
        host = authority.host
        port = authority.port
    }
}
