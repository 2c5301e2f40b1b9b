import BugleCore
import BugleFCM
import Foundation

/// Where each lane's connections go, for `bugle validate`: straight to the endpoint, or through which proxy
/// (the section's `proxy:`, else `https_proxy` minus `no_proxy`). Never shows the proxy's credentials.
enum ProviderRoutes {
    /// One line per configured lane (the legacy one when enabled), such as `apns: https://api.push.apple.com:443 through the proxy
    /// http://10.0.0.5:3128 (with credentials)`, and one for FCM's metadata server when its tokens come from there.
    /// - Throws: ``UsageError`` when a lane's proxy cannot be used (an unset credentials variable, a bad `https_proxy`, an
    ///   unreadable `proxy_ca_file`).
    static func lines(_ settings: ProviderSettings, environment: [String: String]) throws -> [String] {
        let source = settings.sourcePath ?? "providers file"
        var lanes: [(name: String, address: String, host: String, setting: ProxySetting, caFile: String?)] = []
        if let apns = settings.apns { lanes.append(("apns", "\(apns.endpoint)", apns.endpoint.host, apns.proxy, apns.proxyCAFile)) }
        if let fcm = settings.fcm { lanes.append(("fcm", "\(fcm.endpoint)", fcm.endpoint.host, fcm.proxy, fcm.proxyCAFile)) }
        if let legacy = settings.legacyAPNs, legacy.enabled {
            let host = legacy.host.contains(":") ? "[\(legacy.host)]" : legacy.host
            lanes.append(("legacy_apns", "\(host):\(legacy.port) (feedback :\(legacy.feedbackPort))", legacy.host, legacy.proxy, legacy.proxyCAFile))
        }
        var lines: [String] = []
        for lane in lanes {
            let proxy: HTTPProxy?
            do throws(ProxyConfigurationError) {
                proxy = try HTTPProxy.resolve(lane.setting, caFile: lane.caFile, host: lane.host, environment: environment)
                if let file = proxy?.caFile, !FileManager.default.isReadableFile(atPath: file) {
                    throw .unreadableCAFile(path: file)
                }
            } catch {
                // At the line and key of the variable or file the error names, as the lanes' own errors are.
                throw UsageError(settings.locating("\(error)", section: lane.name))
            }
            let trust = proxy?.caFile.map { " (its certificate checked against proxy_ca_file \($0) too)" } ?? ""
            lines.append("\(lane.name): \(lane.address) " + (proxy.map { "through the proxy \($0)" + trust } ?? "directly"))
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
