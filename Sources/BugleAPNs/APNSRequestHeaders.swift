import BugleCore
import BugleHTTP2

/// Builds the HTTP/2 request headers of one APNs notification. This is the only place APNs headers are
/// formatted.
public enum APNSRequestHeaders {
    /// Builds the headers.
    /// - Parameters:
    ///   - deviceToken: Hex device token (goes into `:path`).
    ///   - headers: Campaign-derived APNs headers.
    ///   - topic: Bundle id from the providers file; the push type's suffix is appended.
    ///   - authority: `host[:port]` for `:authority`.
    ///   - bearerToken: The provider JWT (nil on certificate connections).
    /// - Returns: The header block, encoded as Apple asks: `:path`, `authorization` and the per-notification
    ///   `apns-id`, `apns-expiration` and `apns-collapse-id` as literals without indexing (never in the server's table;
    ///   `:method` and `:scheme` are static-table entries); `apns-topic`, `apns-push-type` and `apns-priority`, which
    ///   repeat on every request of a campaign, with incremental indexing (one byte each once the connection has sent
    ///   them).
    public static func make(
        deviceToken: String,
        headers: APNsHeaders,
        topic: String,
        authority: String,
        bearerToken: String?
    ) -> HTTP2HeaderBlock {
        var block = HTTP2HeaderBlock(capacity: 256 + (bearerToken?.utf8.count ?? 0))
        block.add(.methodPOST)
        block.add(.schemeHTTPS)
        block.add(.authority, value: authority)
        block.add(.path, value: "/3/device/", deviceToken)
        if let bearerToken {
            block.add(.authorization, value: "bearer ", bearerToken)
        }
        let suffix = headers.pushType.topicSuffix
        block.addIndexed(name: "apns-topic", value: suffix.isEmpty ? topic : topic + suffix)
        block.addIndexed(name: "apns-push-type", value: headers.pushType.rawValue)
        block.addIndexed(name: "apns-priority", value: headers.priority == 10 ? "10" : String(headers.priority))
        if let expiration = headers.expiration {
            block.add(name: "apns-expiration", value: String(expiration))
        }
        if let collapseID = headers.collapseID {
            block.add(name: "apns-collapse-id", value: collapseID)
        }
        block.add(name: "apns-id", value: headers.apnsID)
        return block
    }
}
