import BugleCore
import BugleFCM
import Foundation

/// Where each HTTP/2 lane's connections go, for `bugle validate`: straight to the endpoint, or through which proxy
/// (the section's `proxy:`, else `https_proxy` minus `no_proxy`). Never shows the proxy's credentials.
enum ProviderRoutes {
    /// One line per configured HTTP/2 lane, such as `apns: https://api.push.apple.com:443 through the proxy
    /// http://10.0.0.5:3128 (with credentials)`, and one for FCM's metadata server when its tokens come from there.
    /// - Throws: ``UsageError`` when a lane's proxy cannot be used (an unset credentials variable, a bad `https_proxy`, an
    ///   unreadable `proxy_ca_file`).
    static func lines(_ settings: ProviderSettings, environment: [String: String]) throws -> [String] {
        let source = settings.sourcePath ?? "providers file"
        let lanes: [(String, Endpoint?, ProxySetting?, String?)] = [
            ("apns", settings.apns?.endpoint, settings.apns?.proxy, settings.apns?.proxyCAFile),
            ("fcm", settings.fcm?.endpoint, settings.fcm?.proxy, settings.fcm?.proxyCAFile),
        ]
        var lines: [String] = []
        for case let (name, endpoint?, setting?, caFile) in lanes {
            let proxy: HTTPProxy?
            do throws(ProxyConfigurationError) {
                proxy = try HTTPProxy.resolve(setting, caFile: caFile, host: endpoint.host, environment: environment)
                if let file = proxy?.caFile, !FileManager.default.isReadableFile(atPath: file) {
                    throw .unreadableCAFile(path: file)
                }
            } catch {
                throw UsageError("\(source): \(name): \(error)")
            }
            let trust = proxy?.caFile.map { " (its certificate checked against proxy_ca_file \($0) too)" } ?? ""
            lines.append("\(name): \(endpoint) " + (proxy.map { "through the proxy \($0)" + trust } ?? "directly"))
        }
        if let fcm = settings.fcm, fcm.credentials == .metadataServer {
            do throws(FCMConfigurationError) {
                let address = try FCMMetadataServerAddress.from(environment: environment)
                lines.append("fcm access tokens: the metadata server at \(address), directly, for project \(fcm.projectID ?? "")")
            } catch {
                throw UsageError("\(source): fcm: \(error)")
            }
        }
        return lines
    }
}
