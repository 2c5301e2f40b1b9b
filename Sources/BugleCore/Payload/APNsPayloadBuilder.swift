/// Builds the APNs JSON payload and headers of one notification (PROTOCOLS.md §1.2).
///
/// A pure function from values to bytes: the same builder serves real sends and dry runs.
public struct APNsPayloadBuilder: Sendable {
    private let template: MessageTemplate
    private let dataKeys: [(String, String)]

    public init(template: MessageTemplate) {
        self.template = template
        self.dataKeys = template.data.sorted { $0.key < $1.key }.filter { $0.key != "aps" }
    }

    /// The payload bytes for `copy`.
    /// - Throws: ``PayloadTooLarge`` when the UTF-8 JSON exceeds the push type's limit.
    public func payload(for copy: RenderedCopy) throws -> [UInt8] {
        let options = template.apns
        var json = JSONWriter(capacity: 256)
        json.beginObject()
        json.key("aps")
        json.beginObject()
        if options.pushType != .background {
            json.key("alert")
            json.beginObject()
            json.field("title", copy.title)
            json.field("body", copy.body)
            json.endObject()
        }
        Self.writeAPSKeys(&json, template: template)
        json.endObject()
        if let image = template.image { json.field("image", image) }
        for (key, value) in copy.sortedData(or: dataKeys) where key != "aps" { json.field(key, value) }
        json.endObject()
        let limit = options.pushType.payloadLimit
        guard json.bytes.count <= limit else { throw PayloadTooLarge(size: json.bytes.count, limit: limit) }
        return json.bytes
    }

    /// The `aps` keys other than `alert`, from the campaign: badge, sound, thread, category and the mutable flag
    /// (not for background pushes), and `content-available`. Shared with FCM's `apns` override block.
    static func writeAPSKeys(_ json: inout JSONWriter, template: MessageTemplate) {
        let options = template.apns
        if options.pushType != .background {
            if let badge = template.badge { json.field("badge", badge) }
            if let sound = template.sound { json.field("sound", sound) }
            if let thread = options.threadID { json.field("thread-id", thread) }
            if let category = options.category { json.field("category", category) }
            if options.mutableContent || template.image != nil { json.field("mutable-content", 1) }
        }
        if options.contentAvailable || options.pushType == .background { json.field("content-available", 1) }
    }

    /// The campaign-derived headers for one recipient.
    /// - Parameters:
    ///   - apnsID: the deterministic id from ``NotificationID``.
    ///   - now: UNIX seconds at send time, for `apns-expiration`.
    public func headers(apnsID: String, now: Int) -> APNsHeaders {
        let options = template.apns
        let expiration = options.expirationSeconds.map { $0 == 0 ? 0 : now + $0 }
        return APNsHeaders(
            pushType: options.pushType,
            priority: options.priority,
            expiration: expiration,
            collapseID: options.collapseID,
            apnsID: apnsID
        )
    }
}
