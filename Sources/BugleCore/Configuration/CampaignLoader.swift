import Foundation

/// Loads and validates a campaign file (`campaigns/*.yaml`) into a ``Campaign``.
///
/// Every key is documented in `campaigns/README.md`. In short (defaults in brackets):
///
///     name: <string, required, ≤ 200 characters>
///     notification_type: <string, required, ≤ 200 characters>
///     dedupe: none | daily | weekly | monthly | once            [none]
///     providers: <path, relative to this file>                  [none: the CLI decides]
///     segment:
///       sql: <string, required>
///       page_size: 1...100000                                   [5000]
///       statement_timeout: <duration, 1s...1d>                  [60s]
///       max_rows: <integer ≥ 1>                                 [50000000]
///     message:
///       default_locale: <tag, required, a key of locales>
///       locales: { <tag>: { title: <string>, body: <string> } } (at least one)
///       data: { <key>: <scalar> }                               [{}]
///       badge: <integer ≥ 0>   sound: <string>   image: <https URL>
///       apns: { push_type [alert], priority 1|5|10 [10; 5 for background], collapse_id (≤ 64 bytes),
///               expiration (0...30d), thread_id, mutable_content [false], content_available [false], category }
///       android: { channel_id, priority normal|high [high], ttl (0...28d), collapse_key, tag }
///       webpush: { link (https URL), ttl (0...28d) }
///     delivery: { ambiguous: resend|drop [drop], in_flight_window 1...10000 [1000], max_attempts 1...100 [5],
///                 rate: { apns, fcm, legacy_apns: <per second, lowers the providers file's rate> },
///                 not_after: <ISO 8601 instant with zone, e.g. 2026-11-22T18:00:00Z> }
///     ios_transport: http2 | legacy                             [http2]
///
/// Durations accept integer seconds or a number with a unit: `3600s`, `90m`, `1h`, `7d`.
public enum CampaignLoader {
    /// Top-level keys, in documentation order.
    static let campaignKeys = [
        "name", "notification_type", "dedupe", "providers", "segment", "message", "delivery", "ios_transport",
    ]
    static let segmentKeys = ["sql", "page_size", "statement_timeout", "max_rows"]
    static let messageKeys = [
        "default_locale", "locales", "data", "badge", "sound", "image", "apns", "android", "webpush",
    ]
    static let copyKeys = ["title", "body"]
    static let apnsKeys = [
        "push_type", "priority", "collapse_id", "expiration", "thread_id", "mutable_content", "content_available",
        "category",
    ]
    static let androidKeys = ["channel_id", "priority", "ttl", "collapse_key", "tag"]
    static let webpushKeys = ["link", "ttl"]
    static let deliveryKeys = ["ambiguous", "in_flight_window", "max_attempts", "rate", "not_after"]
    static let deliveryRateKeys = ["apns", "fcm", "legacy_apns"]

    /// Longest FCM `ttl` (4 weeks), in seconds.
    static let maximumFCMTTL = 2_419_200
    /// Longest `apns.expiration` (APNs stores notifications for at most about 30 days), in seconds.
    static let maximumAPNsExpiration = 2_592_000
    /// Longest `apns-collapse-id`, in UTF-8 bytes.
    static let maximumCollapseIDBytes = 64

    /// Reads, parses and validates the campaign file at `path`.
    /// - Parameter path: The campaign file; `providers:` is resolved against its folder.
    /// - Returns: The validated campaign, with `sourcePath` set to `path`.
    /// - Throws: ``ConfigurationError`` (file:line:column, key path and message) for any problem.
    public static func load(path: String) throws -> Campaign {
        let yaml = try ConfigurationDocument.readText(atPath: path)
        return try load(yaml: yaml, path: path)
    }

    /// Parses and validates campaign YAML that was read from `path`.
    /// - Parameters:
    ///   - yaml: The file's text.
    ///   - path: Where it came from: named in errors, stored as `sourcePath`, and the base for `providers:`.
    /// - Returns: The validated campaign.
    /// - Throws: ``ConfigurationError`` for any problem.
    public static func load(yaml: String, path: String) throws -> Campaign {
        let root = try ConfigurationDocument.parse(yaml: yaml, origin: .init(file: path, redactsValues: false))
        let top = try root.mapping(allowedKeys: campaignKeys)

        let name = try top.required("name").singleLineString(maximumLength: 200)
        let notificationType = try top.required("notification_type").singleLineString(maximumLength: 200)
        let dedupe = try top.choice("dedupe", default: DedupePeriod.none)
        let providersPath = try top["providers"].map { node in
            ConfigurationPath.resolve(try node.filePath(), relativeToFileAt: path)
        }
        let segment = try self.segment(top.required("segment"))
        let message = try self.message(top.required("message"))
        let delivery = try top["delivery"].map(self.delivery) ?? DeliveryOptions()
        let iosTransport = try top.choice("ios_transport", default: IOSTransport.http2)

        return Campaign(
            name: name, notificationType: notificationType, dedupe: dedupe, providersPath: providersPath,
            segment: segment, message: message, delivery: delivery, iosTransport: iosTransport, sourcePath: path)
    }

    // MARK: - Sections

    private static func segment(_ node: ConfigurationNode) throws -> Segment {
        let map = try node.mapping(allowedKeys: segmentKeys)
        let sqlNode = try map.required("sql")
        let sql = try sqlNode.string().trimmingCharacters(in: .whitespacesAndNewlines)
        if sql.isEmpty { throw sqlNode.error("must not be empty") }
        return Segment(
            sql: sql,
            pageSize: try map.int("page_size", default: 5000, in: 1...100_000),
            statementTimeoutSeconds: try map["statement_timeout"]?.wholeSeconds(in: 1...86_400) ?? 60,
            maxRows: try map.int("max_rows", default: 50_000_000, in: 1...Int.max))
    }

    private static func message(_ node: ConfigurationNode) throws -> MessageTemplate {
        let map = try node.mapping(allowedKeys: messageKeys)
        let defaultLocaleNode = try map.required("default_locale")
        let defaultLocale = try defaultLocaleNode.singleLineString(maximumLength: 35)
        let locales = try self.locales(map.required("locales"))
        if locales[defaultLocale] == nil {
            let defined = locales.keys.sorted().joined(separator: ", ")
            var message = "default locale '\(defaultLocale)' has no copy in message.locales (defined: \(defined))"
            if let match = locales.keys.first(where: { $0.lowercased() == defaultLocale.lowercased() }) {
                message += "; did you mean '\(match)'?"
            }
            throw defaultLocaleNode.error(message)
        }

        let data = try map["data"].map(self.data) ?? [:]
        let badge = try map["badge"]?.int(in: 0...Int.max)
        let sound = try map["sound"]?.singleLineString(maximumLength: 256)
        let image = try map["image"].map(httpsURL)
        let apns = try map["apns"].map(self.apns) ?? APNsOptions()
        let android = try map["android"].map(self.android) ?? AndroidOptions()
        let webpush = try map["webpush"].map(self.webpush) ?? WebPushOptions()
        return MessageTemplate(
            defaultLocale: defaultLocale, locales: locales, data: data, badge: badge, sound: sound, image: image,
            apns: apns, android: android, webpush: webpush)
    }

    private static func locales(_ node: ConfigurationNode) throws -> [String: LocalizedCopy] {
        let entries = try node.entries()
        if entries.isEmpty {
            throw node.error("must contain at least one locale, such as en: { title: ..., body: ... }")
        }
        var locales: [String: LocalizedCopy] = [:]
        var seenLowercased: [String: String] = [:]
        for entry in entries {
            let tag = entry.key
            try validateLocaleTag(tag, at: entry.value)
            if let other = seenLowercased[tag.lowercased()] {
                throw entry.value.keyError("locale '\(tag)' repeats '\(other)' (locale tags are case-insensitive)")
            }
            seenLowercased[tag.lowercased()] = tag
            let copy = try entry.value.mapping(allowedKeys: copyKeys)
            locales[tag] = LocalizedCopy(
                title: try nonEmptyText(copy.required("title")),
                body: try nonEmptyText(copy.required("body")))
        }
        return locales
    }

    private static func validateLocaleTag(_ tag: String, at node: ConfigurationNode) throws {
        let subtags = tag.split(separator: "-", omittingEmptySubsequences: false)
        let isLetters: (Substring) -> Bool = { $0.allSatisfy { $0.isASCII && $0.isLetter } }
        let isAlphanumeric: (Substring) -> Bool = { $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } }
        let valid =
            subtags.first.map { (2...3).contains($0.count) && isLetters($0) } == true
            && subtags.dropFirst().allSatisfy { (1...8).contains($0.count) && isAlphanumeric($0) }
        guard valid else {
            var message = "'\(tag)' is not a locale tag (expected a language with optional subtags: en, pt-BR, zh-Hant)"
            if tag.contains("_") { message += "; use '\(tag.replacingOccurrences(of: "_", with: "-"))'" }
            throw node.keyError(message)
        }
    }

    private static func nonEmptyText(_ node: ConfigurationNode) throws -> String {
        let text = try node.string()
        if text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { throw node.error("must not be empty") }
        return text
    }

    private static func data(_ node: ConfigurationNode) throws -> [String: String] {
        var data: [String: String] = [:]
        for entry in try node.entries() {
            let key = entry.key
            let lowered = key.lowercased()
            if key.isEmpty {
                throw entry.value.keyError("data keys must not be empty")
            }
            if ["from", "message_type", "aps", "notification"].contains(lowered) || lowered.hasPrefix("google")
                || lowered.hasPrefix("gcm")
            {
                throw entry.value.keyError(
                    "'\(key)' is reserved by APNs or FCM and cannot be a data key (reserved: aps, from, "
                        + "message_type, notification, google*, gcm*)")
            }
            let value = entry.value
            guard let scalar = value.scalar, !value.isNull else {
                throw value.error(
                    "data values must be strings, numbers or booleans, got \(value.valueDescription)")
            }
            if scalar.isPlain, let bool = try? value.bool() {
                data[key] = bool ? "true" : "false"
            } else {
                data[key] = scalar.text
            }
        }
        return data
    }

    private static func apns(_ node: ConfigurationNode) throws -> APNsOptions {
        let map = try node.mapping(allowedKeys: apnsKeys)
        let pushType = try map.choice("push_type", default: APNsPushType.alert)
        var priority = pushType == .background ? 5 : 10
        if let priorityNode = map["priority"] {
            priority = try priorityNode.int()
            guard [1, 5, 10].contains(priority) else {
                throw priorityNode.error("expected one of 1, 5 or 10, got \(priority)")
            }
            if pushType == .background && priority != 5 {
                throw priorityNode.error(
                    "push_type background requires priority 5, got \(priority) (APNs rejects other priorities "
                        + "for background pushes)")
            }
        }
        var collapseID: String?
        if let collapseNode = map["collapse_id"] {
            let value = try collapseNode.singleLineString(maximumLength: Int.max)
            let bytes = value.utf8.count
            if bytes > maximumCollapseIDBytes {
                throw collapseNode.error("must be at most \(maximumCollapseIDBytes) bytes of UTF-8, got \(bytes) bytes")
            }
            collapseID = value
        }
        return APNsOptions(
            pushType: pushType,
            priority: priority,
            collapseID: collapseID,
            expirationSeconds: try map["expiration"]?.wholeSeconds(in: 0...maximumAPNsExpiration),
            threadID: try map["thread_id"]?.singleLineString(maximumLength: 256),
            mutableContent: try map.bool("mutable_content", default: false),
            contentAvailable: try map.bool("content_available", default: false),
            category: try map["category"]?.singleLineString(maximumLength: 256))
    }

    private static func android(_ node: ConfigurationNode) throws -> AndroidOptions {
        let map = try node.mapping(allowedKeys: androidKeys)
        return AndroidOptions(
            channelID: try map["channel_id"]?.singleLineString(maximumLength: 256),
            priority: try map.choice("priority", default: AndroidPriority.high),
            ttlSeconds: try map["ttl"]?.wholeSeconds(in: 0...maximumFCMTTL),
            collapseKey: try map["collapse_key"]?.singleLineString(maximumLength: 256),
            tag: try map["tag"]?.singleLineString(maximumLength: 256))
    }

    private static func webpush(_ node: ConfigurationNode) throws -> WebPushOptions {
        let map = try node.mapping(allowedKeys: webpushKeys)
        return WebPushOptions(
            link: try map["link"].map(httpsURL),
            ttlSeconds: try map["ttl"]?.wholeSeconds(in: 0...maximumFCMTTL))
    }

    private static func delivery(_ node: ConfigurationNode) throws -> DeliveryOptions {
        let map = try node.mapping(allowedKeys: deliveryKeys)
        return DeliveryOptions(
            ambiguousPolicy: try map.choice("ambiguous", default: AmbiguousPolicy.drop),
            inFlightWindow: try map.int("in_flight_window", default: 1000, in: 1...10_000),
            maxAttempts: try map.int("max_attempts", default: 5, in: 1...100),
            rateLimits: try map["rate"].map(deliveryRates) ?? [:],
            notAfter: try map["not_after"].map(instant))
    }

    private static func deliveryRates(_ node: ConfigurationNode) throws -> [ProviderKind: Double] {
        let map = try node.mapping(allowedKeys: deliveryRateKeys)
        var rates: [ProviderKind: Double] = [:]
        for (key, kind) in [("apns", ProviderKind.apns), ("fcm", .fcm), ("legacy_apns", .legacyAPNs)] {
            guard let valueNode = map[key] else { continue }
            let value = try valueNode.number()
            guard value > 0, value <= 1_000_000 else { throw valueNode.error("must be a rate per second above 0 and at most 1000000") }
            rates[kind] = value
        }
        return rates
    }

    private static func instant(_ node: ConfigurationNode) throws -> Instant {
        let text = try node.singleLineString(maximumLength: 64)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        var date = formatter.date(from: text)
        if date == nil {
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            date = formatter.date(from: text)
        }
        guard let date else { throw node.typeError("an ISO 8601 instant with a zone, like 2026-11-22T18:00:00Z") }
        return Instant(secondsSince1970: date.timeIntervalSince1970)
    }

    // MARK: - Values

    private static func httpsURL(_ node: ConfigurationNode) throws -> String {
        let value = try node.singleLineString(maximumLength: 2048)
        guard value.lowercased().hasPrefix("https://"), value.count > "https://".count, !value.contains(" ") else {
            throw node.typeError("an https:// URL")
        }
        return value
    }
}
