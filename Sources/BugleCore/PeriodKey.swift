import Foundation

/// The `period_key` of the notification log for a dedupe period at an instant (UTC).
///
/// `daily` → `d:2026-11-22`, `weekly` → `w:2026-W47` (ISO week), `monthly` → `m:2026-11`, `once` → `once`,
/// `none` → nil (no dedupe).
public enum PeriodKey {
    /// - Parameters:
    ///   - period: the campaign's dedupe period.
    ///   - date: the run's start time.
    public static func key(for period: DedupePeriod, at date: Date) -> String? {
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        switch period {
        case .none:
            return nil
        case .once:
            return "once"
        case .daily:
            let c = calendar.dateComponents([.year, .month, .day], from: date)
            return "d:" + pad(c.year, 4) + "-" + pad(c.month, 2) + "-" + pad(c.day, 2)
        case .weekly:
            let c = calendar.dateComponents([.yearForWeekOfYear, .weekOfYear], from: date)
            return "w:" + pad(c.yearForWeekOfYear, 4) + "-W" + pad(c.weekOfYear, 2)
        case .monthly:
            let c = calendar.dateComponents([.year, .month], from: date)
            return "m:" + pad(c.year, 4) + "-" + pad(c.month, 2)
        }
    }

    /// The key of a run of `campaign` created at `now`: the period of its `delivery.send_at` when that is later (a run
    /// made with `--no-wait` the day before its edition took the day of its creation, so today's send suppressed
    /// tomorrow's edition as a repeat and tomorrow's edition could reach users again on its real day).
    public static func key(for campaign: Campaign, now: Date) -> String? {
        let sendAt = campaign.delivery.sendAt.map { Date(timeIntervalSince1970: $0.secondsSince1970) }
        return key(for: campaign.dedupe, at: max(now, sendAt ?? now))
    }

    private static func pad(_ value: Int?, _ width: Int) -> String {
        let s = String(value ?? 0)
        return String(repeating: "0", count: max(0, width - s.count)) + s
    }
}
