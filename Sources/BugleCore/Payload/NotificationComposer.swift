import Foundation

/// Turns a recipient into a wire-ready ``PushRequest`` for its platform: copy by locale, APNs payload and
/// headers or the FCM message. Shared by real runs and dry runs.
public struct NotificationComposer: Sendable {
    public let runID: Int64
    private let iosViaFCM: Bool
    private let renderer: MessageRenderer
    private let apns: APNsPayloadBuilder
    /// Rendered once per configured locale: the copy carries no per-recipient values yet, so every recipient
    /// with the same copy gets the same bytes (only the FCM token and the APNs headers differ).
    private let rendered: [String: RenderedLocale]

    /// - Parameters:
    ///   - campaign: the validated campaign.
    ///   - runID: the run (part of each deterministic `apns-id`; 0 for dry runs).
    ///   - validateOnly: FCM `validate_only` (dry run `--validate`).
    ///   - now: UNIX seconds the `apns-expiration` of iOS messages sent through FCM counts from.
    public init(campaign: Campaign, runID: Int64, validateOnly: Bool = false, now: Int = Int(Date().timeIntervalSince1970)) {
        let iosViaFCM = campaign.iosTransport == .fcm
        self.runID = runID
        self.iosViaFCM = iosViaFCM
        self.renderer = MessageRenderer(template: campaign.message)
        let apns = APNsPayloadBuilder(template: campaign.message)
        let fcm = FCMMessageBuilder(template: campaign.message, defaultTag: Self.stableTag(for: campaign.name), now: now)
        var rendered: [String: RenderedLocale] = [:]
        for (tag, copy) in campaign.message.locales {
            let copy = RenderedCopy(locale: tag, title: copy.title, body: copy.body)
            rendered[tag] = RenderedLocale(
                copy: copy,
                apnsPayload: Self.render { try apns.payload(for: copy) },
                android: Self.render { try fcm.template(platform: .android, copy: copy, validateOnly: validateOnly) },
                web: Self.render { try fcm.template(platform: .web, copy: copy, validateOnly: validateOnly) },
                iosViaFCM: iosViaFCM ? Self.render { try fcm.template(platform: .ios, copy: copy, validateOnly: validateOnly) } : nil
            )
        }
        self.apns = apns
        self.rendered = rendered
    }

    /// A rendering, or its payload-size failure (the builders throw nothing else).
    private static func render<T>(_ body: () throws -> T) -> Result<T, PayloadTooLarge> {
        Result { try body() }.mapError { $0 as? PayloadTooLarge ?? PayloadTooLarge(size: 0, limit: 0) }
    }

    private struct RenderedLocale: Sendable {
        var copy: RenderedCopy
        var apnsPayload: Result<[UInt8], PayloadTooLarge>
        var android: Result<FCMBodyTemplate, PayloadTooLarge>
        var web: Result<FCMBodyTemplate, PayloadTooLarge>
        /// iOS through FCM (`ios_transport: fcm`) only.
        var iosViaFCM: Result<FCMBodyTemplate, PayloadTooLarge>?
    }

    /// A stable Android notification tag per campaign, so a resent duplicate replaces the first on screen.
    public static func stableTag(for campaignName: String) -> String {
        "bugle-" + String(TokenFingerprint.of(campaignName).dropFirst(4))
    }

    /// The copy a device locale gets.
    public func copy(for locale: String?) -> RenderedCopy { renderer.copy(for: locale) }

    /// Builds the request, or reports that its payload is over the provider's limit.
    /// - Parameter now: UNIX seconds, for `apns-expiration`.
    public func compose(seq: Int64, deviceID: Int64, token: String, platform: Platform, locale: String?, attempt: Int, now: Int) -> Result<PushRequest, PayloadTooLarge> {
        let tag = renderer.copy(for: locale).locale
        guard let rendered = rendered[tag] else { return .failure(PayloadTooLarge(size: 0, limit: 0)) }
        switch platform {
        case .ios where iosViaFCM:
            guard let template = rendered.iosViaFCM else { return .failure(PayloadTooLarge(size: 0, limit: 0)) }
            return template.map { template in
                PushRequest(seq: seq, deviceID: deviceID, token: token, platform: platform, body: template.body(token: token), apns: nil, attempt: attempt)
            }
        case .ios:
            return rendered.apnsPayload.map { body in
                let headers = apns.headers(apnsID: NotificationID.apnsID(runID: runID, seq: seq), now: now)
                return PushRequest(seq: seq, deviceID: deviceID, token: token, platform: platform, body: body, apns: headers, attempt: attempt)
            }
        case .android, .web:
            return (platform == .web ? rendered.web : rendered.android).map { template in
                PushRequest(seq: seq, deviceID: deviceID, token: token, platform: platform, body: template.body(token: token), apns: nil, attempt: attempt)
            }
        }
    }
}
