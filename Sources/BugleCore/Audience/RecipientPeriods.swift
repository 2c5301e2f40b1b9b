import Foundation

/// The dedupe period of each recipient of a local-time run: the one it is due in (``PeriodKey``), since its devices
/// are due on different days. A run made at 23:50 for the next morning took the period of its creation for everyone,
/// so the next day's campaign of the same type reached its users again. Other runs keep the run's own period (empty
/// here).
public struct RecipientPeriods: Sendable {
    private let period: DedupePeriod?
    private let start: Instant
    /// Local times are planned in 15-minute windows: a run's recipients share a few dozen instants.
    private var keys: [Double: String] = [:]

    /// - Parameter start: when the run starts; a recipient due earlier (at once) takes the period of the start.
    public init(campaign: Campaign, start: Instant) {
        self.period = campaign.delivery.localTime.isActive && ![.none, .once].contains(campaign.dedupe) ? campaign.dedupe : nil
        self.start = start
    }

    /// The recipient's own period key, or empty for the run's.
    public mutating func key(notBefore: Instant?) -> String {
        guard let period else { return "" }
        let seconds = max(start.secondsSince1970, notBefore?.secondsSince1970 ?? start.secondsSince1970)
        if let known = keys[seconds] { return known }
        let key = PeriodKey.key(for: period, at: Date(timeIntervalSince1970: seconds)) ?? ""
        keys[seconds] = key
        return key
    }
}
