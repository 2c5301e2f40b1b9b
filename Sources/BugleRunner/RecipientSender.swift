import BugleCore

/// Sends one claimed recipient: composes its notification, hands it to its lane, and maps the answer to the ledger
/// outcome.
///
/// A reference type on purpose: the runner starts a task per send, and each task captures this one reference instead
/// of a copy of the runner (the campaign, the store, the logger...), whose fields each cost a retain and a release
/// per send.
final class RecipientSender: Sendable {
    private let composer: NotificationComposer
    private let mapper: OutcomeMapper
    private let providers: [ProviderKind: any PushProvider]
    /// Each platform's lane (``Campaign/provider(for:)``), looked up once.
    private let lanes: (ios: ProviderKind, android: ProviderKind, web: ProviderKind)

    init(campaign: Campaign, composer: NotificationComposer, mapper: OutcomeMapper, providers: [ProviderKind: any PushProvider]) {
        self.composer = composer
        self.mapper = mapper
        self.providers = providers
        self.lanes = (campaign.provider(for: .ios), campaign.provider(for: .android), campaign.provider(for: .web))
    }

    /// The lane for a platform.
    func lane(for platform: Platform) -> ProviderKind {
        switch platform {
        case .ios: lanes.ios
        case .android: lanes.android
        case .web: lanes.web
        }
    }

    /// Sends one recipient. Never throws: every failure is an outcome.
    /// - Parameters:
    ///   - recipient: The claimed recipient.
    ///   - now: UNIX seconds, for relative expirations.
    /// - Returns: The ledger outcome, and the lane's own classification (for the wrong-environment breaker and halts).
    func send(_ recipient: ClaimedRecipient, now: Int) async -> (RecipientOutcome, SendOutcome) {
        let composed = composer.compose(
            seq: recipient.seq, deviceID: recipient.deviceID, token: recipient.token, platform: recipient.platform,
            selection: recipient.selection, attempt: recipient.attempts, now: now
        )
        let raw: SendOutcome
        switch composed {
        case .failure:
            raw = .rejected(code: SkipReason.payloadTooLarge.rawValue)
        case .success(let request):
            let kind = lane(for: recipient.platform)
            if let provider = providers[kind] {
                raw = await provider.send(request)
            } else {
                raw = .halt(code: "provider_not_configured", message: "no \(kind.rawValue) provider is configured for \(recipient.platform.rawValue) devices")
            }
        }
        var random = SystemRandomNumberGenerator()
        let mapped = mapper.map(raw, seq: recipient.seq, deviceID: recipient.deviceID, attempts: recipient.attempts, using: &random)
        return (mapped, raw)
    }
}
