/// One message the FCM simulator accepted for delivery (answered 200 without `validate_only`).
public struct FCMRecord: Sendable, Equatable, Codable {
    /// The target's value: the registration token, topic name, condition or FID (see ``targetKind``).
    public var target: String
    /// `token`, `topic`, `condition` or `fid`.
    public var targetKind: String
    /// The answered message name, `projects/<id>/messages/<unique id>`.
    public var name: String
    /// `message.android.collapse_key`, if sent.
    public var collapseKey: String?
    /// `message.android.notification.tag`, if sent.
    public var tag: String?
    /// `message.android.priority` as sent (`normal`, `HIGH`, ...), if sent.
    public var androidPriority: String?
    /// `message.android.ttl` as sent (`"3600s"`), if sent.
    public var ttl: String?
    /// `message.apns.headers["apns-push-type"]`, if sent (iOS devices reached through FCM).
    public var apnsPushType: String?
    /// `message.apns.headers["apns-collapse-id"]`, if sent.
    public var apnsCollapseID: String?
    /// `message.notification.title`, if sent.
    public var title: String?
    /// `message.notification.body`, if sent.
    public var body: String?
    /// Lowercase hex SHA-256 of the `message` JSON text exactly as sent, with the target's value (its string
    /// literal, quotes included) cut out: equal for messages that differ only in their target.
    public var payloadSHA256: String
    /// Simulator wall-clock time of acceptance, seconds since 1970.
    public var time: Double
    /// Connection that carried it (1-based, in accept order).
    public var connectionID: Int

    /// The registration token (nil when the target is a topic, condition or FID).
    public var token: String? { targetKind == "token" ? target : nil }

    enum CodingKeys: String, CodingKey {
        case target
        case targetKind = "target_kind"
        case name
        case collapseKey = "collapse_key"
        case tag
        case androidPriority = "android_priority"
        case ttl
        case apnsPushType = "apns_push_type"
        case apnsCollapseID = "apns_collapse_id"
        case title
        case body
        case payloadSHA256 = "payload_sha256"
        case time
        case connectionID = "connection"
    }
}
