/// One notification the simulator accepted (answered 200).
public struct APNsRecord: Sendable, Equatable, Codable {
    /// Device token from `:path` (as sent).
    public var token: String
    /// The `apns-id` answered (the client's, or a generated one).
    public var apnsID: String
    /// `apns-collapse-id`, if sent.
    public var collapseID: String?
    /// `apns-push-type` (defaults to `alert` when absent).
    public var pushType: String
    /// Lowercase hex SHA-256 of the payload bytes.
    public var payloadSHA256: String
    /// Simulator wall-clock time of acceptance, seconds since 1970.
    public var time: Double
    /// Connection that carried it (1-based, in accept order).
    public var connectionID: Int
    /// HTTP/2 stream id that carried it.
    public var streamID: Int
    /// The `apns-unique-id` answered (sandbox only), else nil.
    public var uniqueID: String? = nil

    enum CodingKeys: String, CodingKey {
        case token
        case apnsID = "apns_id"
        case collapseID = "collapse_id"
        case pushType = "push_type"
        case payloadSHA256 = "payload_sha256"
        case time
        case connectionID = "connection"
        case streamID = "stream"
        case uniqueID = "unique_id"
    }
}
