import BugleCore
import NIOHPACK

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
    /// - Returns: HPACK headers; `:path`, `authorization` and `apns-id` are sent without indexing, as Apple asks.
    public static func make(
        deviceToken: String,
        headers: APNsHeaders,
        topic: String,
        authority: String,
        bearerToken: String?
    ) -> HPACKHeaders {
        var result = HPACKHeaders()
        result.reserveCapacity(11)
        result.add(name: ":method", value: "POST")
        result.add(name: ":scheme", value: "https")
        result.add(name: ":authority", value: authority)
        result.add(name: ":path", value: "/3/device/" + deviceToken, indexing: .nonIndexable)
        if let bearerToken {
            result.add(name: "authorization", value: "bearer " + bearerToken, indexing: .nonIndexable)
        }
        result.add(name: "apns-topic", value: topic + headers.pushType.topicSuffix)
        result.add(name: "apns-push-type", value: headers.pushType.rawValue)
        result.add(name: "apns-priority", value: String(headers.priority))
        if let expiration = headers.expiration {
            result.add(name: "apns-expiration", value: String(expiration))
        }
        if let collapseID = headers.collapseID {
            result.add(name: "apns-collapse-id", value: collapseID, indexing: .nonIndexable)
        }
        result.add(name: "apns-id", value: headers.apnsID, indexing: .nonIndexable)
        return result
    }
}
