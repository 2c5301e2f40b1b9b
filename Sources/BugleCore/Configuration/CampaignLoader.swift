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
///       locales: { <tag>: { title: <template>, body: <template> }  (at least one tag)
///                       or [ { title, body }, ... ] }           (1...20 copies, sent in rotation)
///       variables: { <name>: <scalar: the text used when the column is NULL> }  [{}]
///       on_null: skip | empty                                   [skip]
///       data: { <key>: <scalar, a template> }                   [{}]
///       badge: <integer ≥ 0>   sound: <string>   image: <https URL>
///       apns: { push_type alert|background|voip|complication [alert], priority 1|5|10 [10; 5 for background], collapse_id (≤ 64 bytes),
///               expiration (0...30d), thread_id, mutable_content [false], content_available [false], category }
///       android: { channel_id, priority normal|high [high], ttl (0...28d), collapse_key, tag [bugle-<hash of name>] }
///       webpush: { link (https URL), ttl (0...28d) }
///     variants:                                                 [none: no split]
///       - { name: <[A-Za-z0-9_-]{1,64}, unique ignoring case>, weight: <number, > 0, ≤ 1000000>,
///           locales: <as message.locales; tags of message.locales only>, data: <as message.data> }
///       (2...26 variants)
///     delivery: { ambiguous: resend|drop [drop], in_flight_window 1...10000 [1000], max_attempts 1...100 [5],
///                 rate: { apns, fcm, legacy_apns: <per second, lowers the providers file's rate> },
///                 send_at: <ISO 8601 instant with zone, before not_after>            [none: at once]
///                 not_after: <ISO 8601 instant with zone, e.g. 2026-11-22T18:00:00Z>,
///                 deliver_at_local: <HH:MM>                     [none: as soon as the run starts]
///                 fallback_timezone: <IANA zone, e.g. Europe/Berlin>                 [UTC]
///                 quiet_hours: <HH:MM-HH:MM, start ≠ end>       [none]
///                 quiet_hours_action: hold | skip               [hold; needs quiet_hours]
///                 max_per_user: { count: 1...1000, per: <duration, 60s...366d> } [none] }
///     ios_transport: http2 | legacy | fcm                       [http2]
///
/// Titles, bodies and data values are mustache templates (``TemplateText``) over the segment's columns. A
/// template may not use the delivery columns (device_id, user_id, token, platform, locale, timezone), and every
/// name in `message.variables` must be used by some template.
///
/// Durations accept integer seconds or a number with a unit: `3600s`, `90m`, `1h`, `7d`.
public enum CampaignLoader {
    /// Top-level keys, in documentation order.
    static let campaignKeys = [
        "name", "notification_type", "dedupe", "providers", "segment", "message", "variants", "delivery",
        "ios_transport",
    ]
    static let segmentKeys = ["sql", "page_size", "statement_timeout", "max_rows"]
    static let messageKeys = [
        "default_locale", "locales", "variables", "on_null", "data", "badge", "sound", "image", "apns", "android",
        "webpush",
    ]
    static let copyKeys = ["title", "body"]
    static let apnsKeys = [
        "push_type", "priority", "collapse_id", "expiration", "thread_id", "mutable_content", "content_available",
        "category",
    ]
    static let androidKeys = ["channel_id", "priority", "ttl", "collapse_key", "tag"]
    static let webpushKeys = ["link", "ttl"]
    static let variantKeys = ["name", "weight", "locales", "data"]
    static let deliveryKeys = [
        "ambiguous", "in_flight_window", "max_attempts", "rate", "send_at", "not_after", "deliver_at_local",
        "fallback_timezone", "quiet_hours", "quiet_hours_action", "max_per_user",
    ]
    static let deliveryRateKeys = ["apns", "fcm", "legacy_apns"]
    static let frequencyCapKeys = ["count", "per"]

    /// Segment columns used for delivery; they are never template variables.
    static let reservedColumns = ["device_id", "user_id", "token", "platform", "locale", "timezone"]
    /// Most copies one locale may rotate through.
    static let maximumCopiesPerLocale = 20
    /// How many `variants` a split may have.
    static let variantCount = 2...26
    /// Longest variant name, in characters.
    static let maximumVariantNameLength = 64
    /// Largest variant `weight`.
    static let maximumVariantWeight = 1_000_000.0
    /// Accepted `max_per_user.count`.
    static let frequencyCapCount = 1...1000
    /// Accepted `max_per_user.per`, in seconds (1 minute ... 366 days).
    static let frequencyCapWindow = 60...31_622_400

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
        try load(yaml: try readText(path: path), path: path)
    }

    /// A campaign file's text (kept with its run), or why it cannot be read: not found, a directory, over 1 MiB, or
    /// not UTF-8 (with the first bad byte's line and column).
    /// - Throws: ``ConfigurationError``.
    public static func readText(path: String) throws -> String {
        try ConfigurationDocument.readText(atPath: path)
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

        // Each section is checked even when an earlier one failed, so every problem is reported at once, in file order.
        var problems: [ConfigurationError] = []
        func checked<T>(_ section: () throws -> T) throws -> T? {
            do {
                return try section()
            } catch let problem as ConfigurationError {
                problems.append(problem)
                return nil
            }
        }
        let name = try checked { try top.required("name").singleLineString(maximumLength: 200) }
        let notificationType = try checked { try self.notificationType(top.required("notification_type")) }
        let dedupe = try checked { try top.choice("dedupe", default: DedupePeriod.none) }
        let providersPath = try checked {
            try top["providers"].map { node in ConfigurationPath.resolve(try node.filePath(), relativeToFileAt: path) }
        }
        let segment = try checked { try self.segment(top.required("segment")) }
        var usage = TemplateUsage()
        let message = try checked { try self.message(top.required("message"), usage: &usage) }
        var variants: [CampaignVariant]? = []
        if let variantsNode = top["variants"] {
            // The variants' locales are checked against the message's tags and their data against its image. A message
            // that failed is read as written, so that its problem does not hide the variants' (its tags are not checked
            // when its locales cannot be read).
            let written = message == nil ? writtenMessage(top["message"]) : nil
            let messageTags = message.map { $0.localeCopies.keys.sorted() } ?? written?.tags
            let messageHasImage = message.map { $0.image != nil } ?? written?.hasImage ?? false
            variants = try checked {
                try self.variants(variantsNode, messageTags: messageTags, messageHasImage: messageHasImage, usage: &usage)
            }
        }
        let delivery = try checked { try top["delivery"].map(self.delivery) ?? DeliveryOptions() }
        let iosTransport = try checked { try top.choice("ios_transport", default: IOSTransport.http2) }
        if message != nil, variants != nil { _ = try checked { try checkVariables(usage) } }
        if let message, iosTransport == .fcm {
            _ = try checked { try checkPushTypeThroughFCM(message.apns.pushType, message: top["message"]) }
        }
        if let problem = ConfigurationError.combined(problems) { throw problem }
        guard let name, let notificationType, let dedupe, let providersPath, let segment, let message, let variants, let delivery, let iosTransport
        else {
            throw ConfigurationError(file: path, line: 1, column: 1, keyPath: "", message: "the campaign could not be read")
        }
        return Campaign(
            name: name, notificationType: notificationType, dedupe: dedupe, providersPath: providersPath,
            segment: segment, message: message, delivery: delivery, iosTransport: iosTransport, variants: variants,
            sourcePath: path)
    }

    /// The templates of one file and the variables it declares, for the checks that need the whole file.
    private struct TemplateUsage {
        /// Every title, body and data value that uses variables, with the node it was read from.
        var uses: [(variables: [String], node: ConfigurationNode)] = []
        /// The entries of `message.variables`.
        var declared: [ConfigurationNode.Entry] = []
    }

    // MARK: - Sections

    /// `notification_type`: dedupe compares it exactly, so surrounding whitespace (`"audit-dd "`) would make a family
    /// of its own, deduped apart from `audit-dd`; refused, as control characters are.
    private static func notificationType(_ node: ConfigurationNode) throws -> String {
        let value = try node.singleLineString(maximumLength: 200)
        if value.unicodeScalars.first.map(CharacterSet.whitespacesAndNewlines.contains) == true
            || value.unicodeScalars.last.map(CharacterSet.whitespacesAndNewlines.contains) == true
        {
            throw node.error(
                "must not begin or end with whitespace, got \(node.valueDescription): dedupe compares notification_type "
                    + "exactly, so it would not match '\(value.trimmingCharacters(in: .whitespacesAndNewlines))'")
        }
        return value
    }

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

    private static func message(_ node: ConfigurationNode, usage: inout TemplateUsage) throws -> MessageTemplate {
        let map = try node.mapping(allowedKeys: messageKeys)
        let defaultLocaleNode = try map.required("default_locale")
        let named = try defaultLocaleNode.singleLineString(maximumLength: 35)
        let locales = try self.locales(map.required("locales"), usage: &usage)
        // Locale tags are case-insensitive: `default_locale: en` names the copy written `EN:`, under that spelling.
        guard let defaultLocale = locales[named] != nil ? named : locales.keys.first(where: { $0.lowercased() == named.lowercased() }) else {
            let defined = locales.keys.sorted().joined(separator: ", ")
            throw defaultLocaleNode.error("default locale '\(named)' has no copy in message.locales (defined: \(defined))")
        }

        var variableDefaults: [String: String] = [:]
        if let variablesNode = map["variables"] {
            variableDefaults = try variables(variablesNode, usage: &usage)
        }
        let nullPolicy = try map.choice("on_null", default: NullVariablePolicy.skip)
        var data: [String: String] = [:]
        if let dataNode = map["data"] {
            data = try self.data(dataNode, usage: &usage)
        }
        let badge = try map["badge"]?.int(in: 0...Int.max)
        let sound = try map["sound"]?.singleLineString(maximumLength: 256)
        let image = try map["image"].map(httpsURL)
        if image != nil, let dataNode = map["data"] { try refuseImageDataKey(dataNode) }
        let apns = try map["apns"].map(self.apns) ?? APNsOptions()
        let android = try map["android"].map(self.android) ?? AndroidOptions()
        let webpush = try map["webpush"].map(self.webpush) ?? WebPushOptions()
        return MessageTemplate(
            defaultLocale: defaultLocale, localeCopies: locales, variableDefaults: variableDefaults,
            nullPolicy: nullPolicy, data: data, badge: badge, sound: sound, image: image, apns: apns,
            android: android, webpush: webpush)
    }

    private static func locales(_ node: ConfigurationNode, usage: inout TemplateUsage) throws
        -> [String: [LocalizedCopy]]
    {
        let entries = try node.entries()
        if entries.isEmpty {
            throw node.error("must contain at least one locale, such as en: { title: ..., body: ... }")
        }
        var locales: [String: [LocalizedCopy]] = [:]
        var seenLowercased: [String: String] = [:]
        for entry in entries {
            let tag = entry.key
            try validateLocaleTag(tag, at: entry.value)
            if let other = seenLowercased[tag.lowercased()] {
                throw entry.value.keyError("locale '\(tag)' repeats '\(other)' (locale tags are case-insensitive)")
            }
            seenLowercased[tag.lowercased()] = tag
            locales[tag] = try copies(entry.value, usage: &usage)
        }
        return locales
    }

    /// What a `message` that failed to load says, for checking its variants: its locale tags (nil when
    /// `message.locales` is not a mapping) and whether it sets `image`.
    private static func writtenMessage(_ node: ConfigurationNode?) -> (tags: [String]?, hasImage: Bool) {
        guard let entries = try? node?.entries() else { return (nil, false) }
        let locales = entries.first { $0.key == "locales" }?.value
        let tags = (try? locales?.entries())?.map(\.key)
        return (tags, entries.contains { $0.key == "image" && !$0.value.isNull })
    }

    /// A variant's `locales`: like `message.locales`, but only for tags the message defines (matched ignoring
    /// case and stored under the message's spelling); any tags when the message's are unknown (`messageTags` nil).
    private static func variantLocales(
        _ node: ConfigurationNode, messageTags: [String]?, usage: inout TemplateUsage
    ) throws -> [String: [LocalizedCopy]] {
        let entries = try node.entries()
        if entries.isEmpty {
            throw node.error(
                "must contain at least one locale of message.locales; leave it out to keep the message's copy")
        }
        var messageTagsByLowercased: [String: String] = [:]
        for tag in messageTags ?? [] { messageTagsByLowercased[tag.lowercased()] = tag }
        var locales: [String: [LocalizedCopy]] = [:]
        for entry in entries {
            guard let tag = messageTags == nil ? entry.key : messageTagsByLowercased[entry.key.lowercased()] else {
                let defined = (messageTags ?? []).joined(separator: ", ")
                throw entry.value.keyError(
                    "locale '\(entry.key)' is not in message.locales (defined: \(defined)); "
                        + "a variant can only replace the message's copy")
            }
            if locales.keys.contains(where: { $0.lowercased() == tag.lowercased() }) {
                throw entry.value.keyError("locale '\(entry.key)' is given twice (locale tags are case-insensitive)")
            }
            locales[tag] = try copies(entry.value, usage: &usage)
        }
        return locales
    }

    /// One `{ title, body }` mapping, or a rotation list of 1...20 different ones.
    private static func copies(_ node: ConfigurationNode, usage: inout TemplateUsage) throws -> [LocalizedCopy] {
        guard node.isList else {
            if node.scalar != nil {
                throw node.typeError(
                    "a mapping { title, body } or a list of 1 to \(maximumCopiesPerLocale) such mappings")
            }
            return [try copy(node, usage: &usage)]
        }
        var copies: [LocalizedCopy] = []
        for item in try node.items(count: 1...maximumCopiesPerLocale, of: "copies") {
            let copy = try self.copy(item, usage: &usage)
            if let index = copies.firstIndex(of: copy) {
                throw item.error("repeats copy [\(index)] (the copies of a rotation must differ)")
            }
            copies.append(copy)
        }
        return copies
    }

    private static func copy(_ node: ConfigurationNode, usage: inout TemplateUsage) throws -> LocalizedCopy {
        let map = try node.mapping(allowedKeys: copyKeys)
        return LocalizedCopy(
            title: try copyText(map.required("title"), usage: &usage),
            body: try copyText(map.required("body"), usage: &usage))
    }

    /// A non-empty title or body that parses as a template.
    private static func copyText(_ node: ConfigurationNode, usage: inout TemplateUsage) throws -> String {
        let text = try nonEmptyText(node)
        try checkTemplate(text, at: node, usage: &usage)
        return text
    }

    /// Refuses `text` (read from `node`) unless it is a valid template, and records the variables it uses.
    private static func checkTemplate(_ text: String, at node: ConfigurationNode, usage: inout TemplateUsage) throws {
        let template: TemplateText
        do {
            template = try TemplateText(parsing: text)
        } catch let error as TemplateSyntaxError {
            throw node.error(error.message)
        }
        if !template.variables.isEmpty {
            usage.uses.append((variables: template.variables, node: node))
        }
    }

    /// `message.variables`: variable name → the text it renders as when the segment's value is NULL.
    private static func variables(_ node: ConfigurationNode, usage: inout TemplateUsage) throws -> [String: String] {
        var defaults: [String: String] = [:]
        for entry in try node.entries() {
            let name = entry.key
            guard TemplateText.isVariableName(name) else {
                throw entry.value.keyError(
                    "'\(name)' is not a variable name (letters, digits and _, starting with a letter or _)")
            }
            if isReservedColumn(name) { throw entry.value.keyError(reservedVariableMessage(name)) }
            defaults[name] = try scalarText(entry.value, kind: "variable defaults")
            usage.declared.append(entry)
        }
        return defaults
    }

    /// Refuses reserved columns used as template variables, and declared variables no template uses.
    private static func checkVariables(_ usage: TemplateUsage) throws {
        var used = Set<String>()
        for use in usage.uses {
            for name in use.variables {
                if isReservedColumn(name) { throw use.node.error(reservedVariableMessage(name)) }
                used.insert(name)
            }
        }
        for entry in usage.declared where !used.contains(entry.key) {
            throw entry.value.keyError(
                "variable '\(entry.key)' is declared but not used by any title, body or data value "
                    + "(use {{\(entry.key)}} or remove it)")
        }
    }

    /// Refuses `push_type: voip` and `complication` with `ios_transport: fcm`: those pushes go to PushKit tokens, and
    /// the iOS tokens of such a campaign are FCM registration tokens.
    /// - Parameter node: The `message` node (read before without problems), for the position of `push_type`.
    private static func checkPushTypeThroughFCM(_ pushType: APNsPushType, message node: ConfigurationNode?) throws {
        guard pushType == .voip || pushType == .complication,
            let apns = try node?.mapping(allowedKeys: messageKeys)["apns"],
            let pushTypeNode = try apns.mapping(allowedKeys: apnsKeys)["push_type"]
        else { return }
        let token = pushType == .voip ? "the app's PushKit (VoIP) token" : "a watch complication's PushKit token"
        throw pushTypeNode.error(
            "push_type \(pushType.rawValue) cannot be sent with ios_transport: fcm: it goes to \(token), and the iOS "
                + "tokens FCM holds are FCM registration tokens; send it with ios_transport: http2")
    }

    private static func isReservedColumn(_ name: String) -> Bool {
        reservedColumns.contains(name.lowercased())
    }

    private static func reservedVariableMessage(_ name: String) -> String {
        "'\(name)' cannot be a template variable: device_id, user_id, token, platform, locale and timezone are "
            + "delivery columns, not variables (select the value again under another name, such as "
            + "d.user_id AS member_id)"
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
        try node.refuseOtherYAMLTypes()
        let text = try node.string()
        if text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { throw node.error("must not be empty") }
        return text
    }

    private static func data(_ node: ConfigurationNode, usage: inout TemplateUsage) throws -> [String: String] {
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
            let text = try scalarText(entry.value, kind: "data values")
            try checkTemplate(text, at: entry.value, usage: &usage)
            data[key] = text
        }
        return data
    }

    /// Refuses a data key `image` (in any letter case) when the message sets `message.image`: the APNs payload carries
    /// both at its top level, so the key would be written twice.
    private static func refuseImageDataKey(_ dataNode: ConfigurationNode) throws {
        for entry in try dataNode.entries() where entry.key.lowercased() == "image" {
            throw entry.value.keyError(
                "data key '\(entry.key)' clashes with message.image: the APNs payload carries the image URL under the "
                    + "key image, beside the data keys, so it would be written twice; rename the data key")
        }
    }

    /// A scalar as text: strings and numbers as written, booleans as `true` / `false`.
    /// - Parameter kind: What the values are, in the plural, for the error (`data values`).
    private static func scalarText(_ node: ConfigurationNode, kind: String) throws -> String {
        guard let scalar = node.scalar, !node.isNull else {
            throw node.error("\(kind) must be strings, numbers or booleans, got \(node.valueDescription)")
        }
        if scalar.isPlain, let bool = try? node.bool() {
            return bool ? "true" : "false"
        }
        return scalar.text
    }

    // MARK: - Variants

    private static func variants(
        _ node: ConfigurationNode, messageTags: [String]?, messageHasImage: Bool, usage: inout TemplateUsage
    ) throws -> [CampaignVariant] {
        let items = try node.items()
        guard variantCount.contains(items.count) else {
            var message =
                "expected \(variantCount.lowerBound) to \(variantCount.upperBound) variants, got \(items.count)"
            if items.count < variantCount.lowerBound {
                message += " (a split needs at least two; leave variants out to send one version)"
            }
            throw node.error(message)
        }
        var variants: [CampaignVariant] = []
        var namesByLowercased: [String: String] = [:]
        for item in items {
            let map = try item.mapping(allowedKeys: variantKeys)
            let nameNode = try map.required("name")
            let name = try nameNode.singleLineString(maximumLength: maximumVariantNameLength)
            guard name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }) else {
                throw nameNode.typeError("a variant name of letters, digits, _ and - (like control or short-title)")
            }
            if let other = namesByLowercased[name.lowercased()] {
                throw nameNode.error("variant name '\(name)' repeats '\(other)' (variant names are case-insensitive)")
            }
            namesByLowercased[name.lowercased()] = name
            let weightNode = try map.required("weight")
            let weight = try weightNode.number()
            guard weight > 0, weight <= maximumVariantWeight else {
                throw weightNode.error(
                    "must be a number above 0 and at most 1000000, got \(weightNode.valueDescription)")
            }
            var localeCopies: [String: [LocalizedCopy]] = [:]
            if let localesNode = map["locales"] {
                localeCopies = try variantLocales(localesNode, messageTags: messageTags, usage: &usage)
            }
            var data: [String: String] = [:]
            if let dataNode = map["data"] {
                data = try self.data(dataNode, usage: &usage)
                if messageHasImage { try refuseImageDataKey(dataNode) }
            }
            variants.append(CampaignVariant(name: name, weight: weight, localeCopies: localeCopies, data: data))
        }
        return variants
    }

    private static func apns(_ node: ConfigurationNode) throws -> APNsOptions {
        let map = try node.mapping(allowedKeys: apnsKeys)
        let pushType = try map.choice("push_type", default: APNsPushType.alert)
        if let ownToken = pushType.ownToken, let node = map["push_type"] {
            let sent = APNsPushType.allCases.filter { $0.ownToken == nil }.map(\.rawValue)
            throw node.error(
                "push_type \(pushType.rawValue) is not a campaign push: it goes to \(ownToken), not to the device "
                    + "tokens a campaign sends its copy to; a campaign sends \(sent.dropLast().joined(separator: ", ")) or "
                    + "\(sent.last ?? "")")
        }
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
        let ambiguousPolicy = try map.choice("ambiguous", default: AmbiguousPolicy.drop)
        let inFlightWindow = try map.int("in_flight_window", default: 1000, in: 1...10_000)
        let maxAttempts = try map.int("max_attempts", default: 5, in: 1...100)
        let rateLimits = try map["rate"].map(deliveryRates) ?? [:]
        let sendAt = try map["send_at"].map(instant)
        let notAfter = try map["not_after"].map(instant)
        if let sendAt, let notAfter, sendAt >= notAfter, let sendAtNode = map["send_at"] {
            let notAfterText = map["not_after"]?.scalar?.text ?? ""
            throw sendAtNode.error("must be before not_after (\(notAfterText)), got \(sendAtNode.valueDescription)")
        }
        let deliverAt = try map["deliver_at_local"].map(localTime)
        let fallbackTimeZone = try map["fallback_timezone"].map(timeZoneIdentifier) ?? "UTC"
        let quietHours = try map["quiet_hours"].map(self.quietHours)
        if quietHours == nil, let actionNode = map["quiet_hours_action"] {
            throw actionNode.keyError("quiet_hours_action needs quiet_hours (such as quiet_hours: \"22:00-08:00\")")
        }
        let quietHoursAction = try map.choice("quiet_hours_action", default: QuietHoursAction.hold)
        if let deliverAt, let quietHours, quietHoursAction == .skip,
            LocalDeliveryPlanner.isQuiet(minuteOfDay: deliverAt.minutesOfDay, quietHours), let node = map["deliver_at_local"]
        {
            // Every device would be due inside its quiet hours and skipped: a run that sends nothing.
            let quietText = map["quiet_hours"]?.scalar?.text ?? ""
            throw node.error(
                "falls inside quiet_hours (\(quietText)) with quiet_hours_action: skip, so every device would be skipped; "
                    + "move deliver_at_local out of the quiet hours, or use quiet_hours_action: hold to send when they end")
        }
        let frequencyCap = try map["max_per_user"].map(self.frequencyCap)
        return DeliveryOptions(
            ambiguousPolicy: ambiguousPolicy,
            inFlightWindow: inFlightWindow,
            maxAttempts: maxAttempts,
            rateLimits: rateLimits,
            notAfter: notAfter,
            sendAt: sendAt,
            localTime: LocalTimeDelivery(
                deliverAt: deliverAt, fallbackTimeZone: fallbackTimeZone, quietHours: quietHours,
                quietHoursAction: quietHoursAction),
            frequencyCap: frequencyCap)
    }

    private static func localTime(_ node: ConfigurationNode) throws -> LocalTime {
        let text = try node.singleLineString(maximumLength: 32)
        guard let time = LocalTime(parsing: text) else {
            throw node.typeError("a local time as HH:MM (24-hour, 00:00 to 23:59, like 20:00)")
        }
        return time
    }

    private static func quietHours(_ node: ConfigurationNode) throws -> QuietHours {
        let text = try node.singleLineString(maximumLength: 32)
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count == 2, let start = LocalTime(parsing: parts[0]), let end = LocalTime(parsing: parts[1]) else {
            throw node.typeError("quiet hours as HH:MM-HH:MM (24-hour local times, like 22:00-08:00)")
        }
        if start == end {
            throw node.error("quiet hours must start and end at different times, got \(node.valueDescription)")
        }
        return QuietHours(start: start, end: end)
    }

    private static func timeZoneIdentifier(_ node: ConfigurationNode) throws -> String {
        let identifier = try node.singleLineString(maximumLength: 64)
        guard let message = TimeZoneNames.problem(identifier, shown: node.valueDescription) else { return identifier }
        throw node.error(message)
    }

    private static func frequencyCap(_ node: ConfigurationNode) throws -> FrequencyCap {
        let map = try node.mapping(allowedKeys: frequencyCapKeys)
        let count = try map.required("count").int(in: frequencyCapCount)
        let perNode = try map.required("per")
        let per = try perNode.wholeSeconds(in: Int.min...Int.max)
        guard frequencyCapWindow.contains(per) else {
            throw perNode.error("must be between 1m (60 seconds) and 366d (31622400 seconds), got \(per) seconds")
        }
        return FrequencyCap(count: count, perSeconds: per)
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
        // Read as written: unquoted, an instant is a YAML timestamp, which singleLineString refuses as text.
        let text = try node.string()
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        var date = formatter.date(from: text)
        if date == nil {
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            date = formatter.date(from: text)
        }
        guard let date else { throw node.typeError("an ISO 8601 instant with a zone, like 2026-11-22T18:00:00Z") }
        // Foundation's parser takes 2027-02-30 for 2 March and +25:00 for an offset: the day must exist, the offset be
        // at most 23:59.
        if let problem = impossibleFields(text) { throw node.error(problem) }
        return Instant(secondsSince1970: date.timeIntervalSince1970)
    }

    /// What is impossible in the date or zone offset of an instant Foundation parsed (`YYYY-MM-DDThh:mm:ss…`), or nil.
    static func impossibleFields(_ text: String) -> String? {
        let characters = Array(text)
        guard characters.count >= 10, let year = Int(String(characters[0..<4])), let month = Int(String(characters[5..<7])),
            let day = Int(String(characters[8..<10]))
        else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        if let first = calendar.date(from: DateComponents(year: year, month: month, day: 1)),
            let days = calendar.range(of: .day, in: .month, for: first)?.count, day > days {
            return "\(String(characters[0..<10])) is not a date: that month has \(days) days"
        }
        if let last = characters.last, last != "Z", last != "z", characters.count >= 6 {
            let offset = String(characters[(characters.count - 6)...])
            if let hours = Int(offset.dropFirst().prefix(2)), let minutes = Int(offset.suffix(2)), hours > 23 || minutes > 59 {
                return "the zone offset \(offset) is out of range (at most ±23:59)"
            }
        }
        return nil
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
