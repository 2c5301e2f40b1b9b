import BugleCore

/// Where each HTTP/2 lane's connections go, for `bugle validate`: straight to the endpoint, or through which proxy
/// (the section's `proxy:`, else `https_proxy` minus `no_proxy`). Never shows the proxy's credentials.
enum ProviderRoutes {
    /// One line per configured HTTP/2 lane, such as `apns: https://api.push.apple.com:443 through the proxy
    /// http://10.0.0.5:3128 (with credentials)`.
    /// - Throws: ``UsageError`` when a lane's proxy cannot be used (an unset credentials variable, a bad `https_proxy`).
    static func lines(_ settings: ProviderSettings, environment: [String: String]) throws -> [String] {
        let source = settings.sourcePath ?? "providers file"
        let lanes: [(String, Endpoint?, ProxySetting?)] = [
            ("apns", settings.apns?.endpoint, settings.apns?.proxy), ("fcm", settings.fcm?.endpoint, settings.fcm?.proxy),
        ]
        var lines: [String] = []
        for case let (name, endpoint?, setting?) in lanes {
            let proxy: HTTPProxy?
            do throws(ProxyConfigurationError) {
                proxy = try HTTPProxy.resolve(setting, host: endpoint.host, environment: environment)
            } catch {
                throw UsageError("\(source): \(name): \(error)")
            }
            lines.append("\(name): \(endpoint) " + (proxy.map { "through the proxy \($0)" } ?? "directly"))
        }
        return lines
    }
}
