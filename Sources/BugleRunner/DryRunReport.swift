import BugleCore
import Foundation

/// The dry run: sizes every segment row's request exactly as a real run would build it, checks sizes, and counts
/// what would be sent per platform / locale and what would be skipped per reason. Writes nothing anywhere
/// but the optional preview CSV chunks it returns.
public struct DryRunReport: Sendable {
    /// Rows that would be sent, per platform.
    public private(set) var wouldSend: [Platform: Int64] = [:]
    /// Rows that would be sent, per resolved copy locale.
    public private(set) var perLocale: [String: Int64] = [:]
    /// Rows that would be sent, per A/B variant (empty without variants).
    public private(set) var perVariant: [String: Int64] = [:]
    /// Rows that would wait for a later time (`send_at`, local-time delivery, quiet hours).
    public private(set) var scheduled: Int64 = 0
    /// Rows that would be skipped, per reason.
    public private(set) var skipped: [SkipReason: Int64] = [:]
    /// Rows read.
    public private(set) var rowsRead: Int64 = 0
    /// The users of the rows the last ``add(_:csv:)`` would send, one entry per row, for what dedupe and the frequency
    /// cap would make of them (the store's claim-rules estimate); kept only with ``collectsUserIDs``.
    public private(set) var pageUserIDs: [String] = []
    /// Each of ``pageUserIDs``' own dedupe period (local-time delivery, ``RecipientPeriods``), empty for the run's.
    public private(set) var pagePeriodKeys: [String] = []
    /// Whether ``pageUserIDs`` is kept (a campaign with dedupe or a cap).
    public let collectsUserIDs: Bool
    /// Largest rendered body per platform, in bytes.
    public private(set) var largestBody: [Platform: Int] = [:]
    /// Up to ``sampleLimit`` rendered requests per platform (body JSON, and APNs headers), for the operator to eyeball,
    /// in segment order: rows of a locale or variant not yet sampled are preferred, so three samples of a campaign with
    /// three locales show each of them.
    public var samples: [Platform: [PushRequest]] { sampled.mapValues { $0.map(\.request) } }
    /// Samples kept per platform.
    public let sampleLimit: Int
    private var sampled: [Platform: [(copy: String, request: PushRequest)]] = [:]
    /// Per platform slot: samples kept, and whether two of them show the same copy (one may be replaced).
    private var sampleCounts = [Int](repeating: 0, count: Platform.allCases.count)
    private var sampleRepeats = [Bool](repeating: false, count: Platform.allCases.count)

    /// Sizes every row's body (``NotificationComposer/bodySize(token:platform:selection:now:)``: templated copies are
    /// rendered); its `apns-id`s are placeholders of the real length (a dry run's ids are not the real run's).
    private let composer: NotificationComposer
    /// Renders the samples, with derived `apns-id`s as a run would send them.
    private let sampleComposer: NotificationComposer
    private let planner: RecipientPlanner
    private var periods: RecipientPeriods
    private let now: Int
    private let iosTransport: IOSTransport
    /// The legacy gateway's `payload_limit`, which iOS payloads meet when `ios_transport` is `legacy`.
    private let legacyPayloadLimit: Int
    private var seq: Int64 = 0
    /// CSV preview columns (same as the real report, status `would_send` or the skip reason).
    public static let previewHeader = ["device_id", "user_id", "platform", "status", "reason", "locale", "body_bytes", "variant", "not_before"]

    /// - Parameters:
    ///   - now: UNIX seconds used for `apns-expiration` in samples.
    ///   - legacyPayloadLimit: The providers file's `legacy_apns.payload_limit` (its default without one).
    ///   - sampleLimit: Requests rendered per platform for ``samples``.
    public init(
        campaign: Campaign, now: Int, legacyPayloadLimit: Int = LegacyAPNsSettings.defaultPayloadLimit, sampleLimit: Int = 1,
        collectsUserIDs: Bool = false
    ) {
        self.collectsUserIDs = collectsUserIDs
        self.legacyPayloadLimit = legacyPayloadLimit
        self.sampleLimit = max(0, sampleLimit)
        self.composer = NotificationComposer(campaign: campaign, runID: 0, apnsIDs: false)
        self.sampleComposer = NotificationComposer(campaign: campaign, runID: 0)
        self.planner = RecipientPlanner(campaign: campaign, now: Instant(secondsSince1970: Double(now)))
        self.periods = RecipientPeriods(campaign: campaign, start: Instant(secondsSince1970: Double(now)))
        self.iosTransport = campaign.iosTransport
        self.now = now
    }

    /// Processes one page; returns CSV preview records for it when `csv` is set.
    public mutating func add(_ rows: [SegmentRow], csv: Bool) -> [UInt8] {
        var out: [UInt8] = []
        pageUserIDs.removeAll(keepingCapacity: true)
        pagePeriodKeys.removeAll(keepingCapacity: true)
        // Per-platform tallies of this page in plain arrays, folded into the dictionaries once per page: hashing a
        // platform key four times a row was about 7% of a dry run's CPU.
        var sends = [Int64](repeating: 0, count: Platform.allCases.count)
        var largest = [Int](repeating: 0, count: Platform.allCases.count)
        // Per-locale tallies likewise, found by comparing the tag with the page's few (configured tags only).
        var locales: [(tag: String, count: Int64)] = []
        defer {
            for (slot, platform) in Platform.allCases.enumerated() where sends[slot] > 0 {
                wouldSend[platform, default: 0] += sends[slot]
                largestBody[platform] = max(largestBody[platform] ?? 0, largest[slot])
            }
            for (tag, count) in locales { perLocale[tag, default: 0] += count }
        }
        for row in rows {
            rowsRead += 1
            seq += 1
            switch RecipientValidator.validate(row, iosTransport: iosTransport) {
            case .failure(let error):
                skipped[error.reason, default: 0] += 1
                if csv {
                    CSVFormat.appendRecord(
                        [row.deviceID.map(String.init) ?? "", row.userID ?? "", row.platform ?? "", "skipped", error.reason.rawValue, "", "", "", ""],
                        to: &out
                    )
                }
            case .success(let recipient):
                let planned: RecipientPlanner.Planned
                switch planner.plan(recipient) {
                case .skip(let reason):
                    skipped[reason, default: 0] += 1
                    if csv {
                        let placement = planner.placement(recipient)
                        CSVFormat.appendRecord(
                            [String(recipient.deviceID), recipient.userID, recipient.platform.rawValue, "skipped", reason.rawValue, placement.locale, "",
                             placement.variant ?? "", ""],
                            to: &out
                        )
                    }
                    continue
                case .send(let plan):
                    planned = plan
                }
                let selection = MessageSelection(locale: planned.locale, variant: planned.variant, copyIndex: planned.copyIndex, variables: recipient.variables)
                let variant = planned.variant ?? ""
                let notBefore = planned.notBefore.map { CSVFormat.timestamp($0) } ?? ""
                let size = composer.bodySize(token: recipient.token, platform: recipient.platform, selection: selection, now: now)
                switch PayloadTooLarge.meetingLegacyLimit(size, platform: recipient.platform, transport: iosTransport, legacyLimit: legacyPayloadLimit) {
                case .failure:
                    skipped[.payloadTooLarge, default: 0] += 1
                    if csv {
                        CSVFormat.appendRecord(
                            [String(recipient.deviceID), recipient.userID, recipient.platform.rawValue, "skipped", SkipReason.payloadTooLarge.rawValue, planned.locale, "", variant, notBefore],
                            to: &out
                        )
                    }
                case .success(let bodySize):
                    let slot = Self.slot(of: recipient.platform)
                    if sampleCounts[slot] < sampleLimit || sampleRepeats[slot] {
                        sample(recipient, selection: selection, slot: slot, copy: planned.locale + "\u{0}" + variant)
                    }
                    sends[slot] += 1
                    if collectsUserIDs {
                        pageUserIDs.append(recipient.userID)
                        pagePeriodKeys.append(periods.key(notBefore: planned.notBefore))
                    }
                    largest[slot] = max(largest[slot], bodySize)
                    if let slot = locales.firstIndex(where: { $0.tag == planned.locale }) {
                        locales[slot].count += 1
                    } else {
                        locales.append((planned.locale, 1))
                    }
                    if let name = planned.variant { perVariant[name, default: 0] += 1 }
                    if let later = planned.notBefore, later.secondsSince1970 > Double(now) { scheduled += 1 }
                    if csv {
                        CSVFormat.appendRecord(
                            [String(recipient.deviceID), recipient.userID, recipient.platform.rawValue, "would_send", "", planned.locale, String(bodySize), variant, notBefore],
                            to: &out
                        )
                    }
                }
            }
        }
        return out
    }

    /// Keeps this row's request as a sample while fewer than ``sampleLimit`` are kept, or in place of one whose copy
    /// (locale and variant) another sample shows when this row's copy is not yet shown.
    private mutating func sample(_ recipient: ValidRecipient, selection: MessageSelection, slot: Int, copy: String) {
        var kept = sampled[recipient.platform, default: []]
        let shown = kept.contains { $0.copy == copy }
        var replacing: Int?
        if kept.count >= sampleLimit {
            guard !shown else { return }
            replacing = kept.indices.last { index in kept.filter { $0.copy == kept[index].copy }.count > 1 }
            guard replacing != nil else { return }
        }
        guard let request = try? sampleComposer.compose(
            seq: seq, deviceID: recipient.deviceID, token: recipient.token, platform: recipient.platform,
            selection: selection, attempt: 1, now: now
        ).get() else { return }
        if let replacing { kept[replacing] = (copy, request) } else { kept.append((copy, request)) }
        sampled[recipient.platform] = kept
        sampleCounts[slot] = kept.count
        sampleRepeats[slot] = kept.count >= sampleLimit && Set(kept.map(\.copy)).count < kept.count
    }

    /// The platform's index in `Platform.allCases`.
    private static func slot(of platform: Platform) -> Int {
        switch platform {
        case .ios: 0
        case .android: 1
        case .web: 2
        }
    }

    /// Adds rows the scan counted without paging (NULL device_id) and duplicate tokens found by the database.
    public mutating func addUnpaged(_ reason: SkipReason, count: Int64) {
        guard count > 0 else { return }
        skipped[reason, default: 0] += count
    }

    /// Total rows that would be sent.
    public var totalWouldSend: Int64 { wouldSend.values.reduce(0, +) }
}
