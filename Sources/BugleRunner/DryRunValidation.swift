import BugleCore
import Foundation

/// `bugle run --dry-run --validate`: sends the message of every recipient that goes through FCM with `validate_only`, so FCM checks
/// the message (and the token) without delivering anything, and tallies the answers. Nothing is recorded or
/// deactivated: a dry run writes nothing.
///
/// Only a verdict counts as checked: the message accepted, or refused for itself or its token (a halting refusal
/// included). An answer that is no verdict (quota, FCM unavailable or failing, no access token, a lost connection) is
/// asked again, up to ``attempts`` times with backoff, honouring `Retry-After` up to ``longestWait``, and then counted
/// as not checked by its code: the validation is then incomplete, and says so.
public struct DryRunValidation: Sendable {
    /// Sends of one message before it is given up as not checked.
    public static let attempts = 3
    /// The longest `Retry-After` waited out; a longer one gives the message up at once.
    public static let longestWait = Duration.seconds(60)

    /// Messages FCM checked: valid, or refused (a halting refusal included).
    public private(set) var checked: Int64 = 0
    /// Messages FCM accepted.
    public private(set) var valid: Int64 = 0
    /// Refusals per outcome code (`UNREGISTERED`, `INVALID_ARGUMENT`, …).
    public private(set) var refused: [String: Int64] = [:]
    /// Messages FCM gave no verdict on after every attempt, per the last answer's code (`QUOTA_EXCEEDED`,
    /// `UNAVAILABLE`, `OAUTH_UNAVAILABLE`, …).
    public private(set) var notChecked: [String: Int64] = [:]
    /// Recipients whose message was never sent for validation, per reason (`payload_too_large`).
    public private(set) var notSent: [String: Int64] = [:]
    /// Set when the provider halted (bad credentials, wrong project): validation stopped there.
    public private(set) var halted: String?

    /// Whether every message that was sent got a verdict.
    public var isComplete: Bool { notChecked.isEmpty }

    private let composer: NotificationComposer
    private let campaign: Campaign
    private let provider: any PushProvider
    private let concurrency: Int
    private let backoff: Backoff
    private let clock: any Clock<Duration>
    private var seq: Int64 = 0
    private let planner: RecipientPlanner

    /// - Parameters:
    ///   - campaign: The campaign.
    ///   - provider: The FCM lane.
    ///   - concurrency: Requests in flight at once.
    ///   - backoff: The wait before asking again after an answer that is no verdict (`Retry-After` when longer).
    ///   - clock: What waits are measured by.
    public init(
        campaign: Campaign, provider: any PushProvider, concurrency: Int = 200, backoff: Backoff = Backoff(base: .seconds(1), cap: .seconds(8)),
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.composer = NotificationComposer(campaign: campaign, runID: 0, validateOnly: true)
        self.planner = RecipientPlanner(campaign: campaign, now: Instant(secondsSince1970: Date().timeIntervalSince1970))
        self.campaign = campaign
        self.provider = provider
        self.concurrency = max(1, concurrency)
        self.backoff = backoff
        self.clock = clock
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
        let outcomes = await withTaskGroup(of: SendOutcome.self, returning: [SendOutcome].self) { [self] group in
            var outcomes: [SendOutcome] = []
            outcomes.reserveCapacity(requests.count)
            var next = 0
            while next < min(concurrency, requests.count) {
                let request = requests[next]
                group.addTask { await self.verdict(on: request) }
                next += 1
            }
            while let outcome = await group.next() {
                outcomes.append(outcome)
                if case .halt = outcome { group.cancelAll(); continue }
                if next < requests.count {
                    let request = requests[next]
                    group.addTask { await self.verdict(on: request) }
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
            case .invalidToken, .rejected:
                checked += 1
                refused[outcome.code, default: 0] += 1
            case .halt(let code, let message):
                // The halting answer is a refusal too (the tenth payload-level INVALID_ARGUMENT, a refused account).
                checked += 1
                refused[code, default: 0] += 1
                if halted == nil { halted = "\(code): \(message)" }
            case .retry, .ambiguous:
                notChecked[outcome.code, default: 0] += 1
            }
        }
    }

    /// FCM's verdict on one message: sent again after an answer that is no verdict, at most ``attempts`` times, or
    /// that answer when it never came (or its `Retry-After` is over ``longestWait``, or validation is stopping).
    private func verdict(on request: PushRequest) async -> SendOutcome {
        var random = SystemRandomNumberGenerator()
        var attempt = 1
        while true {
            let outcome = await provider.send(request)
            let retryAfter: Duration?
            switch outcome {
            case .retry(_, _, let after): retryAfter = after
            case .ambiguous: retryAfter = nil  // validate_only delivers nothing: asking again is harmless
            case .delivered, .invalidToken, .rejected, .halt: return outcome
            }
            guard attempt < Self.attempts, (retryAfter ?? .zero) <= Self.longestWait, !Task.isCancelled else { return outcome }
            do {
                try await clock.sleep(for: backoff.delay(attempt: attempt, retryAfter: retryAfter, using: &random), tolerance: nil)
            } catch {
                return outcome
            }
            attempt += 1
        }
    }
}
