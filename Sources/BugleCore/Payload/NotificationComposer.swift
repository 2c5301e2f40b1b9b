import Foundation

/// Turns a recipient into a wire-ready ``PushRequest`` for its platform: its copy (locale, variant, rotation,
/// template variables), then the APNs payload and headers or the FCM message. Shared by real runs, dry runs and
/// test sends.
public struct NotificationComposer: Sendable {
    public let runID: Int64
    /// The campaign's copy.
    public let copyBook: CopyBook
    private let iosViaFCM: Bool
    private let validateOnly: Bool
    private let derivesAPNsIDs: Bool
    private let apns: APNsPayloadBuilder
    private let fcm: FCMMessageBuilder
    /// Copies without template tags, rendered once: every recipient with the same copy gets the same bytes (only
    /// the FCM token and the APNs headers differ). Templated copies are rendered per recipient.
    private let rendered: [RenderedPlatforms?]
    /// The same renderings' sizes (an FCM body's without its token), by entry id: plain values, read without
    /// reference counting on every row of a dry run.
    private let sizes: [RenderedSizes?]

    /// - Parameters:
    ///   - campaign: the validated campaign.
    ///   - runID: the run (part of each deterministic `apns-id`; 0 for dry runs).
    ///   - validateOnly: FCM `validate_only` (dry run `--validate`).
    ///   - now: UNIX seconds the `apns-expiration` of iOS messages sent through FCM counts from.
    ///   - apnsIDs: derive each request's `apns-id` from (run, seq). Without, every request carries
    ///     ``placeholderAPNsID`` (same length, so header sizes are unchanged): for dry runs, whose run id is not the
    ///     real run's, where the SHA-1 per row was a tenth of the CPU.
    public init(campaign: Campaign, runID: Int64, validateOnly: Bool = false, apnsIDs: Bool = true, now: Int = Int(Date().timeIntervalSince1970)) {
        self.runID = runID
        self.derivesAPNsIDs = apnsIDs
        self.iosViaFCM = campaign.iosTransport == .fcm
        self.validateOnly = validateOnly
        self.copyBook = CopyBook(campaign: campaign)
        let apns = APNsPayloadBuilder(template: campaign.message)
        let fcm = FCMMessageBuilder(template: campaign.message, defaultTag: Self.stableTag(for: campaign.name), now: now)
        self.apns = apns
        self.fcm = fcm
        var rendered = [RenderedPlatforms?](repeating: nil, count: copyBook.entryCount)
        for (id, copy) in copyBook.plainCopies() {
            rendered[id] = RenderedPlatforms(
                apnsPayload: Self.render { try apns.payload(for: copy) },
                android: Self.render { try fcm.template(platform: .android, copy: copy, validateOnly: validateOnly) },
                web: Self.render { try fcm.template(platform: .web, copy: copy, validateOnly: validateOnly) },
                iosViaFCM: iosViaFCM ? Self.render { try fcm.template(platform: .ios, copy: copy, validateOnly: validateOnly) } : nil
            )
        }
        self.rendered = rendered
        self.sizes = rendered.map { $0.map(RenderedSizes.init) }
    }

    /// A rendering, or its payload-size failure (the builders throw nothing else).
    private static func render<T>(_ body: () throws -> T) -> Result<T, PayloadTooLarge> {
        Result { try body() }.mapError { $0 as? PayloadTooLarge ?? PayloadTooLarge(size: 0, limit: 0) }
    }

    private struct RenderedPlatforms: Sendable {
        var apnsPayload: Result<[UInt8], PayloadTooLarge>
        var android: Result<FCMBodyTemplate, PayloadTooLarge>
        var web: Result<FCMBodyTemplate, PayloadTooLarge>
        /// iOS through FCM (`ios_transport: fcm`) only.
        var iosViaFCM: Result<FCMBodyTemplate, PayloadTooLarge>?
    }

    private struct RenderedSizes: Sendable {
        var apnsPayload: Result<Int, PayloadTooLarge>
        /// FCM bodies without the token.
        var android: Result<Int, PayloadTooLarge>
        var web: Result<Int, PayloadTooLarge>
        var iosViaFCM: Result<Int, PayloadTooLarge>?

        init(_ rendered: RenderedPlatforms) {
            apnsPayload = rendered.apnsPayload.map { $0.count }
            android = rendered.android.map { $0.fixedSize }
            web = rendered.web.map { $0.fixedSize }
            iosViaFCM = rendered.iosViaFCM.map { $0.map { $0.fixedSize } }
        }
    }

    /// The `apns-id` of requests composed without derived ids: a canonical UUID's length, all zeros.
    public static let placeholderAPNsID = "00000000-0000-0000-0000-000000000000"

    /// A stable Android notification tag per campaign, so a resent duplicate replaces the first on screen.
    public static func stableTag(for campaignName: String) -> String {
        "bugle-" + String(TokenFingerprint.of(campaignName).dropFirst(4))
    }

    /// The copy a recipient gets.
    public func copy(for selection: MessageSelection) -> RenderedCopy { copyBook.render(selection) }

    /// The copy a device locale gets (no variant, first copy, no variables).
    public func copy(for locale: String?) -> RenderedCopy { copyBook.render(MessageSelection(locale: locale)) }

    /// Builds the request, or reports that its payload is over the provider's limit.
    /// - Parameter now: UNIX seconds, for `apns-expiration`.
    public func compose(seq: Int64, deviceID: Int64, token: String, platform: Platform, selection: MessageSelection, attempt: Int, now: Int) -> Result<PushRequest, PayloadTooLarge> {
        guard let (tag, _, entry) = copyBook.entry(for: selection) else { return .failure(PayloadTooLarge(size: 0, limit: 0)) }
        let cached = entry.isPlain ? rendered[entry.id] : nil
        let copy = cached == nil ? copyBook.render(entry, tag: tag, variables: selection.variables) : nil
        func fcmBody(_ platform: Platform, _ cached: Result<FCMBodyTemplate, PayloadTooLarge>?) -> Result<PushRequest, PayloadTooLarge> {
            let template = cached ?? copy.map { copy in Self.render { try fcm.template(platform: platform, copy: copy, validateOnly: validateOnly) } }
            guard let template else { return .failure(PayloadTooLarge(size: 0, limit: 0)) }
            return template.map { template in
                PushRequest(seq: seq, deviceID: deviceID, token: token, platform: platform, body: template.body(token: token), apns: nil, attempt: attempt)
            }
        }
        switch platform {
        case .ios where iosViaFCM:
            return fcmBody(.ios, cached?.iosViaFCM)
        case .ios:
            let payload = cached?.apnsPayload ?? copy.map { copy in Self.render { try apns.payload(for: copy) } }
            guard let payload else { return .failure(PayloadTooLarge(size: 0, limit: 0)) }
            return payload.map { body in
                let id = derivesAPNsIDs ? NotificationID.apnsID(runID: runID, seq: seq) : Self.placeholderAPNsID
                let headers = apns.headers(apnsID: id, now: now)
                return PushRequest(seq: seq, deviceID: deviceID, token: token, platform: platform, body: body, apns: headers, attempt: attempt)
            }
        case .android:
            return fcmBody(.android, cached?.android)
        case .web:
            return fcmBody(.web, cached?.web)
        }
    }

    /// The size in bytes of the body ``compose(seq:deviceID:token:platform:selection:attempt:now:)`` would build, or
    /// its payload-size failure. For a copy without template tags the body is its cached rendering plus the token, so
    /// the size is counted, not built (the dry run's per-row check: building each FCM body and APNs header set was a
    /// quarter of its CPU); a templated copy is rendered in full.
    public func bodySize(token: String, platform: Platform, selection: MessageSelection, now: Int) -> Result<Int, PayloadTooLarge> {
        guard let id = copyBook.plainEntryID(for: selection), let cached = sizes[id] else {
            return compose(seq: 0, deviceID: 0, token: token, platform: platform, selection: selection, attempt: 1, now: now).map { $0.body.count }
        }
        switch platform {
        case .ios where iosViaFCM:
            return cached.iosViaFCM.map { $0.map { $0 + FCMBodyTemplate.tokenSize(token) } } ?? .failure(PayloadTooLarge(size: 0, limit: 0))
        case .ios:
            return cached.apnsPayload
        case .android:
            return cached.android.map { $0 + FCMBodyTemplate.tokenSize(token) }
        case .web:
            return cached.web.map { $0 + FCMBodyTemplate.tokenSize(token) }
        }
    }

    /// ``compose(seq:deviceID:token:platform:selection:attempt:now:)`` for a recipient with only a device locale.
    public func compose(seq: Int64, deviceID: Int64, token: String, platform: Platform, locale: String?, attempt: Int, now: Int) -> Result<PushRequest, PayloadTooLarge> {
        compose(seq: seq, deviceID: deviceID, token: token, platform: platform, selection: MessageSelection(locale: locale), attempt: attempt, now: now)
    }
}
