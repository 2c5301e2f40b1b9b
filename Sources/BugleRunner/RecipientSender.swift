import BugleCore
import Synchronization

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
    /// Provider-level retries (429 quota, 5xx: no attempt charged) of each recipient so answered, in this process.
    private let providerRetries = Mutex<[Int64: Int]>([:])

    /// Uncharged provider-level retries of one recipient after which its next ones are charged to it. A provider
    /// throttling one device (FCM answers a device's own message-rate limit with `QUOTA_EXCEEDED` too; the
    /// simulator's `4290` tokens) used to be retried for ever, the run never completing until the outage breaker failed
    /// it after ten minutes. A real outage reopens the lane a few times a minute at most, so ten retries of one
    /// recipient take minutes, and the breaker halts the run (nothing charged) before attempts run out.
    static let freeProviderRetries = 10

    /// Set on every request (``PushRequest/gate``): the worker's lease is still its own.
    private let gate: (any SendGate)?

    init(
        campaign: Campaign, composer: NotificationComposer, mapper: OutcomeMapper, providers: [ProviderKind: any PushProvider],
        gate: (any SendGate)? = nil
    ) {
        self.gate = gate
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

    /// A recipient's notification, ready for its lane, or the outcome it already has.
    enum Prepared: Sendable {
        case request(PushRequest, any PushProvider)
        case settled(SendOutcome)
    }

    /// Composes one recipient's notification and finds its lane.
    /// - Parameters:
    ///   - recipient: The claimed recipient.
    ///   - now: UNIX seconds, for relative expirations.
    ///   - sendBy: UNIX seconds after which the request must not be written (quiet hours), or nil.
    func prepare(_ recipient: ClaimedRecipient, now: Int, sendBy: Double? = nil) -> Prepared {
        let composed = composer.compose(
            seq: recipient.seq, deviceID: recipient.deviceID, token: recipient.token, platform: recipient.platform,
            selection: recipient.selection, attempt: recipient.attempts, now: now
        )
        switch composed {
        case .failure:
            return .settled(.rejected(code: SkipReason.payloadTooLarge.rawValue))
        case .success(var request):
            request.sendBy = sendBy
            request.gate = gate
            let kind = lane(for: recipient.platform)
            guard let provider = providers[kind] else {
                return .settled(.halt(code: "provider_not_configured", message: "no \(kind.rawValue) provider is configured for \(recipient.platform.rawValue) devices"))
            }
            return .request(request, provider)
        }
    }

    /// Starts a prepared recipient's send without suspending when its lane can take it now.
    /// - Parameters:
    ///   - prepared: From ``prepare(_:now:)``.
    ///   - recipient: The recipient.
    ///   - deliver: Called once, on any thread, with what ``finish(_:for:)`` returns.
    /// - Returns: false when nothing was started (`deliver` is never called): finish it in a task.
    func start(_ prepared: Prepared, for recipient: ClaimedRecipient, deliver: @escaping @Sendable (RecipientOutcome, SendOutcome) -> Void) -> Bool {
        guard case .request(let request, let provider) = prepared else { return false }
        return provider.startSend(request) { [self] raw in deliver(map(raw, for: recipient), raw) }
    }

    /// Sends a prepared recipient (waiting for its lane as long as needed) and maps the answer. Never throws: every
    /// failure is an outcome.
    /// - Returns: The ledger outcome, and the lane's own classification (for the wrong-environment breaker and halts).
    func finish(_ prepared: Prepared, for recipient: ClaimedRecipient) async -> (RecipientOutcome, SendOutcome) {
        let raw: SendOutcome
        switch prepared {
        case .settled(let outcome): raw = outcome
        case .request(let request, let provider): raw = await provider.send(request)
        }
        return (map(raw, for: recipient), raw)
    }

    /// The ledger outcome of a lane's answer.
    private func map(_ raw: SendOutcome, for recipient: ClaimedRecipient) -> RecipientOutcome {
        var random = SystemRandomNumberGenerator()
        var charged = raw
        if case .retry(.provider, let code, let after) = raw {
            let retries = providerRetries.withLock { counts -> Int in
                counts[recipient.seq, default: 0] += 1
                return counts[recipient.seq, default: 0]
            }
            if retries > Self.freeProviderRetries { charged = .retry(.recipient, code: code, after: after) }
        }
        return mapper.map(charged, seq: recipient.seq, deviceID: recipient.deviceID, attempts: recipient.attempts, using: &random)
    }
}
