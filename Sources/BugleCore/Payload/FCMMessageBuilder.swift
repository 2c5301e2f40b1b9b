/// Builds the FCM HTTP v1 request body `{"message": {...}}` of one notification (PROTOCOLS.md §2.2).
public struct FCMMessageBuilder: Sendable {
    private let template: MessageTemplate
    private let dataKeys: [(String, String)]
    private let defaultTag: String?

    /// - Parameters:
    ///   - template: the campaign message.
    ///   - defaultTag: Android notification tag used when the campaign sets none (stable per campaign, so a
    ///     resent duplicate replaces the first on screen).
    public init(template: MessageTemplate, defaultTag: String? = nil) {
        self.template = template
        self.dataKeys = template.data.sorted { $0.key < $1.key }
        self.defaultTag = defaultTag
    }

    /// The request body for `token` on `platform` (`.android` or `.web`).
    /// - Parameter validateOnly: sets `validate_only`, so FCM checks the message without delivering it.
    /// - Throws: ``PayloadTooLarge`` when the message (token excluded) exceeds 4096 bytes.
    public func body(token: String, platform: Platform, copy: RenderedCopy, validateOnly: Bool = false) throws -> [UInt8] {
        var json = JSONWriter(capacity: 384 + token.utf8.count)
        json.beginObject()
        if validateOnly {
            json.key("validate_only")
            json.bool(true)
        }
        json.key("message")
        json.beginObject()
        json.field("token", token)
        json.key("notification")
        json.beginObject()
        json.field("title", copy.title)
        json.field("body", copy.body)
        if let image = template.image { json.field("image", image) }
        json.endObject()
        if !dataKeys.isEmpty {
            json.key("data")
            json.beginObject()
            for (key, value) in dataKeys { json.field(key, value) }
            json.endObject()
        }
        if platform == .web {
            writeWebPush(&json)
        } else {
            writeAndroid(&json)
        }
        json.endObject()
        json.endObject()
        // "token": "<token>" plus its separator does not count towards the message limit.
        let size = json.bytes.count - token.utf8.count - 11
        guard size <= PayloadLimits.fcm else { throw PayloadTooLarge(size: size, limit: PayloadLimits.fcm) }
        return json.bytes
    }

    private func writeAndroid(_ json: inout JSONWriter) {
        let options = template.android
        json.key("android")
        json.beginObject()
        json.field("priority", options.priority.rawValue)
        if let ttl = options.ttlSeconds { json.field("ttl", "\(ttl)s") }
        if let key = options.collapseKey { json.field("collapse_key", key) }
        let tag = options.tag ?? defaultTag
        if options.channelID != nil || tag != nil || template.sound != nil {
            json.key("notification")
            json.beginObject()
            if let channel = options.channelID { json.field("channel_id", channel) }
            if let tag { json.field("tag", tag) }
            if let sound = template.sound { json.field("sound", sound) }
            json.endObject()
        }
        json.endObject()
    }

    private func writeWebPush(_ json: inout JSONWriter) {
        let options = template.webpush
        json.key("webpush")
        json.beginObject()
        if let ttl = options.ttlSeconds {
            json.key("headers")
            json.beginObject()
            json.field("TTL", String(ttl))
            json.endObject()
        }
        if let link = options.link {
            json.key("fcm_options")
            json.beginObject()
            json.field("link", link)
            json.endObject()
        }
        json.endObject()
    }
}
