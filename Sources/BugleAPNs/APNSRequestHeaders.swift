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
    /// - Returns: The encoded header block. Every field is a literal without indexing (`:method` and `:scheme` are
    ///   static-table entries), so `:path`, `authorization` and `apns-id` never enter the server's table, as Apple asks.
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
        block.add(name: "apns-topic", value: topic, headers.pushType.topicSuffix)
        block.add(name: "apns-push-type", value: headers.pushType.rawValue)
        block.add(name: "apns-priority", value: headers.priority == 10 ? "10" : String(headers.priority))
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
