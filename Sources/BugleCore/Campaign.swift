import Foundation

/// A validated campaign: what a marketer wrote in `campaigns/*.yaml`, after every key was checked.
///
/// Built only by ``CampaignLoader`` (YAML) or directly in tests; every value here is already valid.
public struct Campaign: Sendable, Equatable {
    /// `name`: unique, human-readable campaign name (also stored on each run).
    public var name: String
    /// `notification_type`: the dedupe family (`promo`, `digest`, ...).
    public var notificationType: String
    /// `dedupe`: the period that forms the notification log's period key.
    public var dedupe: DedupePeriod
    /// `providers`: path of the providers file, already resolved against the campaign file's folder.
    public var providersPath: String?
    /// `segment`: the SQL that selects recipients, and how it is paged.
    public var segment: Segment
    /// `message`: copy and per-platform options.
    public var message: MessageTemplate
    /// `delivery`: reliability knobs (ambiguous policy, in-flight window, attempts).
    public var delivery: DeliveryOptions
    /// `ios_transport`: which lane iOS devices use.
    public var iosTransport: IOSTransport
    /// `variants`: named A/B variants with weights (empty: no split). Each user gets one, deterministically.
    public var variants: [CampaignVariant]
    /// The file the campaign came from (for messages), if any.
    public var sourcePath: String?

    public init(
        name: String,
        notificationType: String,
        dedupe: DedupePeriod = .none,
        providersPath: String? = nil,
        segment: Segment,
        message: MessageTemplate,
        delivery: DeliveryOptions = DeliveryOptions(),
        iosTransport: IOSTransport = .http2,
        variants: [CampaignVariant] = [],
        sourcePath: String? = nil
    ) {
        self.name = name
        self.notificationType = notificationType
        self.dedupe = dedupe
        self.providersPath = providersPath
        self.segment = segment
        self.message = message
        self.delivery = delivery
        self.iosTransport = iosTransport
        self.variants = variants
        self.sourcePath = sourcePath
    }
}

/// One entry of `variants:`: an A/B arm with its share of users and the copy it changes.
public struct CampaignVariant: Sendable, Equatable {
    /// `name`: letters, digits, `_` and `-`, ≤ 64 characters; recorded in the ledger, the CSV and the summary.
    public var name: String
    /// `weight`: a positive number; a variant gets `weight / sum(weights)` of the users.
    public var weight: Double
    /// `locales`: copy per locale tag replacing the message's copy for that tag (tags are a subset of
    /// `message.locales`' tags, spelled as there); tags not given keep the message's copy.
    public var localeCopies: [String: [LocalizedCopy]]
    /// `data`: key/values merged over `message.data`.
    public var data: [String: String]

    public init(name: String, weight: Double, localeCopies: [String: [LocalizedCopy]] = [:], data: [String: String] = [:]) {
        self.name = name
        self.weight = weight
        self.localeCopies = localeCopies
        self.data = data
    }
}

/// `dedupe:` values.
public enum DedupePeriod: String, Sendable, CaseIterable, Equatable {
    case none, daily, weekly, monthly, once
}

/// `ios_transport:` values: how iOS devices are reached.
public enum IOSTransport: String, Sendable, CaseIterable, Equatable {
    /// APNs over HTTP/2 (the device's token is an APNs device token).
    case http2
    /// The legacy binary APNs lane (APNs device tokens).
    case legacy
    /// Through FCM, for apps that register their iOS devices with Firebase (the token is an FCM registration
    /// token); the campaign's `apns:` options travel in the FCM message's `apns` override block.
    case fcm

    /// The lane iOS devices are sent through.
    public var provider: ProviderKind {
        switch self {
        case .http2: return .apns
        case .legacy: return .legacyAPNs
        case .fcm: return .fcm
        }
    }
}

extension Campaign {
    /// The lane a device of `platform` is sent through.
    public func provider(for platform: Platform) -> ProviderKind {
        platform == .ios ? iosTransport.provider : .fcm
    }
}

/// The `segment:` section.
public struct Segment: Sendable, Equatable {
    /// `segment.sql`: one read-only SELECT returning at least device_id, user_id, token, platform.
    public var sql: String
    /// `segment.page_size`: rows fetched per keyset page (1...100000, default 5000).
    public var pageSize: Int
    /// `segment.statement_timeout`: seconds one page may take (default 60).
    public var statementTimeoutSeconds: Int
    /// `segment.max_rows`: refuse segments larger than this (default 50,000,000).
    public var maxRows: Int

    public init(sql: String, pageSize: Int = 5000, statementTimeoutSeconds: Int = 60, maxRows: Int = 50_000_000) {
        self.sql = sql
        self.pageSize = pageSize
        self.statementTimeoutSeconds = statementTimeoutSeconds
        self.maxRows = maxRows
    }
}

/// Title and body in one locale.
public struct LocalizedCopy: Sendable, Equatable {
    public var title: String
    public var body: String
    public init(title: String, body: String) {
        self.title = title
        self.body = body
    }
}

/// The `message:` section.
public struct MessageTemplate: Sendable, Equatable {
    /// `message.default_locale`: used when a device's locale (and its language) has no copy.
    public var defaultLocale: String
    /// `message.locales`: the copies per locale tag (`en`, `pt-BR`), one or more each. With several, a user gets
    /// them in rotation: never the same one twice in a row for the same notification type.
    public var localeCopies: [String: [LocalizedCopy]]
    /// The first copy of each locale.
    public var locales: [String: LocalizedCopy] { localeCopies.compactMapValues(\.first) }
    /// `message.variables`: the text a template variable renders as when the segment's value is NULL.
    public var variableDefaults: [String: String]
    /// `message.on_null`: what a NULL template variable without a default does.
    public var nullPolicy: NullVariablePolicy
    /// `message.data`: custom key/value pairs sent with the notification (strings).
    public var data: [String: String]
    /// `message.badge`
    public var badge: Int?
    /// `message.sound`
    public var sound: String?
    /// `message.image`: an https URL shown by FCM (and APNs via mutable-content).
    public var image: String?
    /// `message.apns`
    public var apns: APNsOptions
    /// `message.android`
    public var android: AndroidOptions
    /// `message.webpush`
    public var webpush: WebPushOptions

    public init(
        defaultLocale: String,
        locales: [String: LocalizedCopy],
        data: [String: String] = [:],
        badge: Int? = nil,
        sound: String? = nil,
        image: String? = nil,
        apns: APNsOptions = APNsOptions(),
        android: AndroidOptions = AndroidOptions(),
        webpush: WebPushOptions = WebPushOptions()
    ) {
        self.init(
            defaultLocale: defaultLocale, localeCopies: locales.mapValues { [$0] }, data: data, badge: badge, sound: sound,
            image: image, apns: apns, android: android, webpush: webpush)
    }

    public init(
        defaultLocale: String,
        localeCopies: [String: [LocalizedCopy]],
        variableDefaults: [String: String] = [:],
        nullPolicy: NullVariablePolicy = .skip,
        data: [String: String] = [:],
        badge: Int? = nil,
        sound: String? = nil,
        image: String? = nil,
        apns: APNsOptions = APNsOptions(),
        android: AndroidOptions = AndroidOptions(),
        webpush: WebPushOptions = WebPushOptions()
    ) {
        self.defaultLocale = defaultLocale
        self.localeCopies = localeCopies
        self.variableDefaults = variableDefaults
        self.nullPolicy = nullPolicy
        self.data = data
        self.badge = badge
        self.sound = sound
        self.image = image
        self.apns = apns
        self.android = android
        self.webpush = webpush
    }
}

/// `message.on_null:` values.
public enum NullVariablePolicy: String, Sendable, CaseIterable, Equatable {
    /// The recipient is not sent; counted as `skipped_invalid` with reason `null_variable`.
    case skip
    /// The variable renders as empty text.
    case empty
}

/// `message.apns:` options.
public struct APNsOptions: Sendable, Equatable {
    /// `push_type`: alert | background | voip | ... (default alert).
    public var pushType: APNsPushType
    /// `priority`: 10, 5 or 1 (default 10; background must be 5).
    public var priority: Int
    /// `collapse_id`: ≤ 64 UTF-8 bytes.
    public var collapseID: String?
    /// `expiration`: seconds from send time the notification stays valid (0 = try once).
    public var expirationSeconds: Int?
    /// `thread_id`: groups notifications on the device.
    public var threadID: String?
    /// `mutable_content`
    public var mutableContent: Bool
    /// `content_available`
    public var contentAvailable: Bool
    /// `category`
    public var category: String?

    public init(
        pushType: APNsPushType = .alert,
        priority: Int = 10,
        collapseID: String? = nil,
        expirationSeconds: Int? = nil,
        threadID: String? = nil,
        mutableContent: Bool = false,
        contentAvailable: Bool = false,
        category: String? = nil
    ) {
        self.pushType = pushType
        self.priority = priority
        self.collapseID = collapseID
        self.expirationSeconds = expirationSeconds
        self.threadID = threadID
        self.mutableContent = mutableContent
        self.contentAvailable = contentAvailable
        self.category = category
    }
}

/// APNs `apns-push-type` values and the topic suffix each one needs.
public enum APNsPushType: String, Sendable, CaseIterable, Equatable {
    case alert, background, location, voip, complication, fileprovider, mdm, liveactivity, pushtotalk, widgets

    /// Suffix appended to the bundle id to form `apns-topic`.
    public var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: return ""
        case .location: return ".location-query"
        case .voip: return ".voip"
        case .complication: return ".complication"
        case .fileprovider: return ".pushkit.fileprovider"
        case .liveactivity: return ".push-type.liveactivity"
        case .pushtotalk: return ".voip-ptt"
        case .widgets: return ".push-type.widgets"
        }
    }

    /// Largest payload APNs accepts for this type, in bytes.
    public var payloadLimit: Int { self == .voip ? 5120 : 4096 }

    /// For a push type that goes to a token of its own with a payload of its own (not the alert-shaped payload a
    /// campaign's copy makes, sent to the devices' tokens), what that token is; nil for the types a campaign sends.
    public var ownToken: String? {
        switch self {
        case .alert, .background, .voip, .complication: return nil
        case .location: return "a Location Push Service Extension's location token, with an empty payload"
        case .fileprovider: return "a File Provider extension's PushKit token, with a container-identifier payload"
        case .mdm: return "an MDM enrolment's token, with its PushMagic payload"
        case .liveactivity: return "a Live Activity's push token, with an event, timestamp and content-state payload"
        case .pushtotalk: return "a Push to Talk channel's token, with a payload for the channel"
        case .widgets: return "a widget's push token, with a content-changed payload"
        }
    }
}

/// `message.android:` options.
public struct AndroidOptions: Sendable, Equatable {
    /// `channel_id`
    public var channelID: String?
    /// `priority`: normal | high (default high).
    public var priority: AndroidPriority
    /// `ttl`: seconds (YAML accepts `3600`, `3600s`, `1h`); 0...2,419,200.
    public var ttlSeconds: Int?
    /// `collapse_key`
    public var collapseKey: String?
    /// `tag`: replaces a shown notification with the same tag (stable per campaign by default).
    public var tag: String?

    public init(
        channelID: String? = nil,
        priority: AndroidPriority = .high,
        ttlSeconds: Int? = nil,
        collapseKey: String? = nil,
        tag: String? = nil
    ) {
        self.channelID = channelID
        self.priority = priority
        self.ttlSeconds = ttlSeconds
        self.collapseKey = collapseKey
        self.tag = tag
    }
}

/// FCM `android.priority`.
public enum AndroidPriority: String, Sendable, CaseIterable, Equatable {
    case normal, high
}

/// `message.webpush:` options.
public struct WebPushOptions: Sendable, Equatable {
    /// `link`: https URL opened on click.
    public var link: String?
    /// `ttl`: seconds.
    public var ttlSeconds: Int?

    public init(link: String? = nil, ttlSeconds: Int? = nil) {
        self.link = link
        self.ttlSeconds = ttlSeconds
    }
}

/// What to do with a recipient whose request may or may not have reached the provider.
public enum AmbiguousPolicy: String, Sendable, CaseIterable, Equatable {
    /// At-least-once: resend (≤ W duplicates per crash).
    case resend
    /// At-most-once: record `unknown`, never duplicate.
    case drop
}

/// The `delivery:` section.
public struct DeliveryOptions: Sendable, Equatable {
    /// `delivery.ambiguous`: resend | drop (default drop: marketing copy, a duplicate costs more than a miss).
    public var ambiguousPolicy: AmbiguousPolicy
    /// `delivery.in_flight_window`: at most this many recipients claimed and unanswered at once (W).
    public var inFlightWindow: Int
    /// `delivery.max_attempts`: attempts before `failed_permanent` (default 5).
    public var maxAttempts: Int
    /// `delivery.rate`: per-lane ceilings (requests per second) that lower the providers file's rates.
    public var rateLimits: [ProviderKind: Double]
    /// `delivery.not_after`: the run does not start after this instant, and stops claiming (paused) when it
    /// passes.
    public var notAfter: Instant?
    /// `delivery.send_at`: the run does not send before this instant (`bugle run` waits, or exits with
    /// `--no-wait`).
    public var sendAt: Instant?
    /// `delivery.deliver_at_local`, `fallback_timezone`, `quiet_hours`, `quiet_hours_action`: when each device
    /// may be sent, in its own time zone.
    public var localTime: LocalTimeDelivery
    /// `delivery.max_per_user`: at most this many notifications per user across all campaigns in a rolling window.
    public var frequencyCap: FrequencyCap?

    public init(
        ambiguousPolicy: AmbiguousPolicy = .drop,
        inFlightWindow: Int = 1000,
        maxAttempts: Int = 5,
        rateLimits: [ProviderKind: Double] = [:],
        notAfter: Instant? = nil,
        sendAt: Instant? = nil,
        localTime: LocalTimeDelivery = LocalTimeDelivery(),
        frequencyCap: FrequencyCap? = nil
    ) {
        self.ambiguousPolicy = ambiguousPolicy
        self.inFlightWindow = inFlightWindow
        self.maxAttempts = maxAttempts
        self.rateLimits = rateLimits
        self.notAfter = notAfter
        self.sendAt = sendAt
        self.localTime = localTime
        self.frequencyCap = frequencyCap
    }
}

/// `delivery.max_per_user: {count: 3, per: 7d}`.
public struct FrequencyCap: Sendable, Equatable {
    /// Most notifications a user gets in any window of `perSeconds` (1...1000).
    public var count: Int
    /// The rolling window, in seconds (60 ... 366 days).
    public var perSeconds: Int

    public init(count: Int, perSeconds: Int) {
        self.count = count
        self.perSeconds = perSeconds
    }
}

/// A wall-clock time of day, `HH:MM` (00:00 ... 23:59).
public struct LocalTime: Sendable, Equatable, Hashable, Comparable {
    public var hour: Int
    public var minute: Int

    public init(hour: Int, minute: Int) {
        self.hour = hour
        self.minute = minute
    }

    /// `"20:00"` → 20:00; nil unless two-digit hours 00...23 and minutes 00...59.
    public init?(parsing text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }),
            let hour = Int(parts[0]), let minute = Int(parts[1]), (0...23).contains(hour), (0...59).contains(minute)
        else { return nil }
        self.init(hour: hour, minute: minute)
    }

    /// Minutes since midnight.
    public var minutesOfDay: Int { hour * 60 + minute }

    public static func < (lhs: LocalTime, rhs: LocalTime) -> Bool { lhs.minutesOfDay < rhs.minutesOfDay }
}

/// `delivery.quiet_hours: "22:00-08:00"`: local times at which no notification is delivered. The interval is
/// half-open, `[start, end)`, and may cross midnight.
public struct QuietHours: Sendable, Equatable {
    public var start: LocalTime
    public var end: LocalTime

    public init(start: LocalTime, end: LocalTime) {
        self.start = start
        self.end = end
    }
}

/// `delivery.quiet_hours_action:` values.
public enum QuietHoursAction: String, Sendable, CaseIterable, Equatable {
    /// The send waits until the quiet hours end.
    case hold
    /// The recipient is not sent; counted as `skipped_quiet_hours`.
    case skip
}

/// The local-time keys of `delivery:`.
public struct LocalTimeDelivery: Sendable, Equatable {
    /// `deliver_at_local`: send each device when its local clock shows this time (nil: as soon as the run starts).
    public var deliverAt: LocalTime?
    /// `fallback_timezone`: the IANA zone of devices whose time zone is unknown or invalid (default `UTC`).
    public var fallbackTimeZone: String
    /// `quiet_hours`
    public var quietHours: QuietHours?
    /// `quiet_hours_action` (default hold).
    public var quietHoursAction: QuietHoursAction

    public init(deliverAt: LocalTime? = nil, fallbackTimeZone: String = "UTC", quietHours: QuietHours? = nil, quietHoursAction: QuietHoursAction = .hold) {
        self.deliverAt = deliverAt
        self.fallbackTimeZone = fallbackTimeZone
        self.quietHours = quietHours
        self.quietHoursAction = quietHoursAction
    }

    /// True when any device's send time depends on its time zone.
    public var isActive: Bool { deliverAt != nil || quietHours != nil }
}
