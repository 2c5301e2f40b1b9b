import Foundation

/// An HTTP proxy URL, `http://[user:password@]host[:port][/]` (port 80 when absent), as `https_proxy` and a providers
/// file's `proxy:` give it. Only `http://` proxies are supported: Bugle speaks plain HTTP to the proxy and TLS to the
/// provider through its tunnel.
struct ProxyURL: Equatable {
    /// Why a text is not a proxy URL. Never quotes the text, which may hold a password.
    struct Malformed: Error, Equatable {
        var problem: String
    }

    var host: String
    var port: Int
    /// `user:password` (percent-decoded), or nil.
    var credentials: String?

    /// Parses `text`.
    /// - Throws: ``Malformed``.
    init(parsing text: String) throws(Malformed) {
        guard let schemeEnd = text.range(of: "://") else { throw Malformed(problem: "expected http://host:port") }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" else {
            throw Malformed(problem: "only http:// proxies are supported (Bugle tunnels TLS through the proxy's CONNECT)")
        }
        var rest = Substring(text[schemeEnd.upperBound...])
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.contains(where: { "/?# ".contains($0) }) { throw Malformed(problem: "must be http://host:port with no path or query") }
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let decoded = String(userInfo).removingPercentEncoding ?? String(userInfo)
            credentials = decoded.contains(":") ? decoded : decoded + ":"
        }
        let authority: URLAuthority
        do throws(URLAuthority.Malformed) {
            authority = try URLAuthority(parsing: rest, defaultPort: 80)
        } catch {
            throw Malformed(problem: error.problem)
        }
        host = authority.host
        port = authority.port
    }
}
