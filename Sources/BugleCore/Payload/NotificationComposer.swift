/// Turns a recipient into a wire-ready ``PushRequest`` for its platform: copy by locale, APNs payload and
/// headers or the FCM message. Shared by real runs and dry runs.
public struct NotificationComposer: Sendable {
    public let runID: Int64
    private let renderer: MessageRenderer
    private let apns: APNsPayloadBuilder
    private let fcm: FCMMessageBuilder
    private let validateOnly: Bool

    /// - Parameters:
    ///   - campaign: the validated campaign.
    ///   - runID: the run (part of each deterministic `apns-id`; 0 for dry runs).
    ///   - validateOnly: FCM `validate_only` (dry run `--validate`).
    public init(campaign: Campaign, runID: Int64, validateOnly: Bool = false) {
        self.runID = runID
        self.renderer = MessageRenderer(template: campaign.message)
        self.apns = APNsPayloadBuilder(template: campaign.message)
        self.fcm = FCMMessageBuilder(template: campaign.message, defaultTag: Self.stableTag(for: campaign.name))
        self.validateOnly = validateOnly
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
        let copy = renderer.copy(for: locale)
        do {
            switch platform {
            case .ios:
                let body = try apns.payload(for: copy)
                let headers = apns.headers(apnsID: NotificationID.apnsID(runID: runID, seq: seq), now: now)
                return .success(PushRequest(seq: seq, deviceID: deviceID, token: token, platform: platform, body: body, apns: headers, attempt: attempt))
            case .android, .web:
                let body = try fcm.body(token: token, platform: platform, copy: copy, validateOnly: validateOnly)
                return .success(PushRequest(seq: seq, deviceID: deviceID, token: token, platform: platform, body: body, apns: nil, attempt: attempt))
            }
        } catch let error as PayloadTooLarge {
            return .failure(error)
        } catch {
            return .failure(PayloadTooLarge(size: 0, limit: 0))
        }
    }
}
