/// Builds the FCM HTTP v1 request body `{"message": {...}}` of one notification (PROTOCOLS.md §2.2): the shared
/// notification and data, then the override block of the device's platform: `android`, `webpush`, or `apns` for
/// iOS devices reached through FCM (`ios_transport: fcm`).
public struct FCMMessageBuilder: Sendable {
    private let template: MessageTemplate
    private let dataKeys: [(String, String)]
    private let defaultTag: String?
    private let now: Int

    /// - Parameters:
    ///   - template: the campaign message.
    ///   - defaultTag: Android notification tag (and APNs collapse id) used when the campaign sets none (stable per
    ///     campaign, so a resent duplicate replaces the first on screen).
    ///   - now: UNIX seconds the `apns-expiration` override counts from (the message is rendered once per locale,
    ///     so it counts from when the run's messages were built, never later than the send).
    public init(template: MessageTemplate, defaultTag: String? = nil, now: Int = 0) {
        self.template = template
        self.dataKeys = template.data.sorted { $0.key < $1.key }
        self.defaultTag = defaultTag
        self.now = now
    }

    /// `"token":"",` in a message: its target, not its payload.
    private static let emptyTokenMember = 11

    /// The request body for `token` on `platform`.
    /// - Parameter validateOnly: sets `validate_only`, so FCM checks the message without delivering it.
    /// - Throws: ``PayloadTooLarge`` when the message (its target excluded) exceeds 4096 bytes.
    public func body(token: String, platform: Platform, copy: RenderedCopy, validateOnly: Bool = false) throws -> [UInt8] {
        let template = try self.template(platform: platform, copy: copy, validateOnly: validateOnly)
        return template.body(token: token)
    }

    /// The message around its token, rendered once and reused for every recipient with the same copy.
    /// - Throws: ``PayloadTooLarge`` when the `message` object without its target (the payload; the request around it and
    ///   the token excluded) exceeds 4096 bytes.
    public func template(platform: Platform, copy: RenderedCopy, validateOnly: Bool = false) throws -> FCMBodyTemplate {
        var json = JSONWriter(capacity: 384)
        json.beginObject()
        if validateOnly {
            json.key("validate_only")
            json.bool(true)
        }
        json.key("message")
        let messageStart = json.bytes.count
        json.beginObject()
        json.field("token", "")
        let prefix = Array(json.bytes.dropLast())  // up to and including the token's opening quote
        let tokenEnd = json.bytes.count - 1
        // An iOS background push carries no alert (APNs refuses one with `apns-push-type: background`), as the direct
        // APNs path sends none: no `notification`, from which FCM would build one.
        if !isBackgroundToIOS(platform) {
            json.key("notification")
            json.beginObject()
            json.field("title", copy.title)
            json.field("body", copy.body)
            if let image = template.image { json.field("image", image) }
            json.endObject()
        }
        let data = copy.sortedData(or: dataKeys)
        if !data.isEmpty {
            json.key("data")
            json.beginObject()
            for (key, value) in data { json.field(key, value) }
            json.endObject()
        }
        switch platform {
        case .web: writeWebPush(&json)
        case .android: writeAndroid(&json)
        case .ios: writeAPNs(&json)
        }
        json.endObject()
        json.endObject()
        let suffix = Array(json.bytes[tokenEnd...])
        // The payload is the `message` object without its target: neither the request around it (`{"message":…}`,
        // `"validate_only":true`) nor `"token":""` and its separator count towards the limit, as bugle-sim measures it.
        let size = json.bytes.count - 1 - messageStart - Self.emptyTokenMember
        guard size <= PayloadLimits.fcm else { throw PayloadTooLarge(size: size, limit: PayloadLimits.fcm) }
        return FCMBodyTemplate(prefix: prefix, suffix: suffix)
    }

    /// Whether this is a `push_type: background` message to an iOS device, which shows nothing.
    private func isBackgroundToIOS(_ platform: Platform) -> Bool {
        platform == .ios && template.apns.pushType == .background
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

    /// The `apns` override block: the campaign's APNs headers (as strings) and the `aps` keys FCM does not derive
    /// from `notification` (badge, sound, thread, category, mutable and background flags).
    private func writeAPNs(_ json: inout JSONWriter) {
        let options = template.apns
        json.key("apns")
        json.beginObject()
        json.key("headers")
        json.beginObject()
        json.field("apns-priority", String(options.priority))
        json.field("apns-push-type", options.pushType.rawValue)
        if let collapseID = options.collapseID ?? defaultTag { json.field("apns-collapse-id", collapseID) }
        if let seconds = options.expirationSeconds { json.field("apns-expiration", String(seconds == 0 ? 0 : now + seconds)) }
        json.endObject()
        json.key("payload")
        json.beginObject()
        json.key("aps")
        json.beginObject()
        APNsPayloadBuilder.writeAPSKeys(&json, template: template)
        json.endObject()
        json.endObject()
        if let image = template.image, options.pushType != .background {
            json.key("fcm_options")
            json.beginObject()
            json.field("image", image)
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

/// An FCM request body with a hole for the token: `prefix + token + suffix`.
public struct FCMBodyTemplate: Sendable, Equatable {
    let prefix: [UInt8]
    let suffix: [UInt8]

    /// The body for one token. FCM tokens never need JSON escaping: ``RecipientValidator`` only admits
    /// URL-safe characters; any other character is escaped here anyway.
    public func body(token: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(prefix.count + token.utf8.count + suffix.count)
        bytes.append(contentsOf: prefix)
        if Self.needsNoEscaping(token) {
            bytes.append(contentsOf: token.utf8)
        } else {
            bytes.append(contentsOf: Self.escaped(token))
        }
        bytes.append(contentsOf: suffix)
        return bytes
    }

    /// The body's bytes other than the token's (`body(token:).count` is this plus ``tokenSize(_:)``).
    public var fixedSize: Int { prefix.count + suffix.count }

    /// The token's bytes in a body.
    public static func tokenSize(_ token: String) -> Int {
        needsNoEscaping(token) ? token.utf8.count : escaped(token).count
    }

    private static func needsNoEscaping(_ token: String) -> Bool {
        let plain: (UInt8) -> Bool = { $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
        return token.utf8.withContiguousStorageIfAvailable({ $0.allSatisfy(plain) }) ?? token.utf8.allSatisfy(plain)
    }

    /// The token as JSON string content (without its quotes).
    private static func escaped(_ token: String) -> ArraySlice<UInt8> {
        var json = JSONWriter(capacity: token.utf8.count + 8)
        json.string(token)
        return json.bytes.dropFirst().dropLast()
    }
}
