import BugleCore
import Foundation

/// `bugle run --dry-run --validate`: sends the message of every recipient that goes through FCM with `validate_only`, so FCM checks
/// the message (and the token) without delivering anything, and tallies the answers. Nothing is recorded or
/// deactivated: a dry run writes nothing.
public struct DryRunValidation: Sendable {
    /// Messages FCM checked.
    public private(set) var checked: Int64 = 0
    /// Messages FCM accepted.
    public private(set) var valid: Int64 = 0
    /// Refusals per outcome code (`UNREGISTERED`, `INVALID_ARGUMENT`, …).
    public private(set) var refused: [String: Int64] = [:]
    /// Recipients whose message was never sent for validation, per reason (`payload_too_large`).
    public private(set) var notSent: [String: Int64] = [:]
    /// Set when the provider halted (bad credentials, wrong project): validation stopped there.
    public private(set) var halted: String?

    private let composer: NotificationComposer
    private let campaign: Campaign
    private let provider: any PushProvider
    private let concurrency: Int
    private var seq: Int64 = 0
    private let planner: RecipientPlanner

    /// - Parameters:
    ///   - campaign: The campaign.
    ///   - provider: The FCM lane.
    ///   - concurrency: Requests in flight at once.
    public init(campaign: Campaign, provider: any PushProvider, concurrency: Int = 200) {
        self.composer = NotificationComposer(campaign: campaign, runID: 0, validateOnly: true)
        self.planner = RecipientPlanner(campaign: campaign, now: Instant(secondsSince1970: Date().timeIntervalSince1970))
        self.campaign = campaign
        self.provider = provider
        self.concurrency = max(1, concurrency)
    }

    /// Validates the FCM recipients of one page (other platforms and invalid rows are ignored).
    /// - Parameter rows: A segment page.
    public mutating func validate(_ rows: [SegmentRow]) async {
        guard halted == nil else { return }
        var requests: [PushRequest] = []
        for row in rows {
            guard case .success(let recipient) = RecipientValidator.validate(row, iosTransport: campaign.iosTransport),
                campaign.provider(for: recipient.platform) == .fcm
            else { continue }
            guard case .send(let plan) = planner.plan(recipient) else { continue }
            seq += 1
            let selection = MessageSelection(locale: plan.locale, variant: plan.variant, copyIndex: plan.copyIndex, variables: recipient.variables)
            switch composer.compose(
                seq: seq, deviceID: recipient.deviceID, token: recipient.token, platform: recipient.platform,
                selection: selection, attempt: 1, now: 0
            ) {
            case .success(let request):
                requests.append(request)
            case .failure:
                // A run fails this recipient `payload_too_large` without sending it; nor is it sent here.
                notSent[SkipReason.payloadTooLarge.rawValue, default: 0] += 1
            }
        }
        let provider = self.provider
        let outcomes = await withTaskGroup(of: SendOutcome.self, returning: [SendOutcome].self) { group in
            var outcomes: [SendOutcome] = []
            outcomes.reserveCapacity(requests.count)
            var next = 0
            while next < min(concurrency, requests.count) {
                let request = requests[next]
                group.addTask { await provider.send(request) }
                next += 1
            }
            while let outcome = await group.next() {
                outcomes.append(outcome)
                if case .halt = outcome { group.cancelAll(); continue }
                if next < requests.count {
                    let request = requests[next]
                    group.addTask { await provider.send(request) }
                    next += 1
                }
            }
            return outcomes
        }
        for outcome in outcomes {
            switch outcome {
            case .delivered:
                checked += 1
                valid += 1
            case .halt(let code, let message):
                if halted == nil { halted = "\(code): \(message)" }
            default:
                checked += 1
                refused[outcome.code, default: 0] += 1
            }
        }
    }
}
