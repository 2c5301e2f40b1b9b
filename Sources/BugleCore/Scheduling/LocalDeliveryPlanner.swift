import Foundation
import Synchronization

/// When one device may be sent under a campaign's local-time rules.
public enum LocalDelivery: Sendable, Equatable {
    /// Send not before this instant: the start (a multiple of 900 s of UTC) of the 15-minute window the send
    /// belongs to. An instant at or before the run's `now` means "due now".
    case at(Instant)
    /// `quiet_hours_action: skip` and the send time falls in quiet hours: the device is not sent.
    case skipQuietHours
}

/// What a device's quiet hours say of a send at one instant (``LocalDeliveryPlanner/quietHours(timeZone:at:)``).
public enum QuietHoursCheck: Sendable, Equatable {
    /// Outside them: the send may go, and must be written before this instant, when they next begin.
    case openUntil(Instant)
    /// Inside them under `hold`: due again when they end (exact, not floored to a window: the window holding that
    /// instant began inside the quiet hours).
    case holdUntil(Instant)
    /// Inside them under `skip`: not sent.
    case skip
}

/// Computes, per device, when a campaign with `deliver_at_local` and/or `quiet_hours` may send to it.
///
/// A pure function of the rules, the device's time zone and an injected `now` (the run's start); it reads no clock.
/// ``plan(timeZone:now:)`` works in four steps:
///
/// 1. **No rules** (neither `deliverAt` nor quiet hours): `.at(now)`, exactly `now`, not floored.
/// 2. **`deliverAt`** (the device's zone, see ``zone(for:)``): the device is due at the instant its wall clock
///    shows `deliverAt` on its current local day. If that instant is at or before `now` by less than
///    ``windowSeconds`` (measured in elapsed seconds, so also across local midnight: at 00:05 a 23:55
///    `deliverAt` of the previous day is still due), the device is due at that instant, i.e. now.
///    If it passed 15 minutes ago or more, the device waits for the next occurrence: later today, or tomorrow.
/// 3. **Quiet hours** are evaluated at the local wall-clock minute of the due instant. The interval is half-open,
///    `[start, end)`, and crosses midnight when `start > end` (22:00-08:00 holds 23:00 and 07:59, not 08:00);
///    `start == end` is empty. Inside it, `.skip` returns ``LocalDelivery/skipQuietHours`` and `.hold` moves the
///    due instant to the next instant after it at which the local clock shows `end`.
/// 4. **Window**: the due instant is floored to a 15-minute boundary of UTC (`floor(seconds / 900) * 900`), but
///    never earlier than the start of `now`'s window, and returned as `.at`. A `bugle tick` every 15 minutes thus
///    finds the device due in the window that contains its local time (for a 20:07 `deliverAt`, the 20:00 window
///    of a whole-hour zone; for 20:10 in Asia/Kathmandu, +5:45, the window starting 14:15 UTC).
///
/// Wall-clock times are turned into instants with the zone's UTC offset (any offset, including :30, :45 and
/// historic local mean time with seconds), with these rules for daylight-saving changes:
/// - **Gap** (spring forward; the time does not exist that day, e.g. 02:30 in America/New_York on 2026-03-08):
///   the instant the clock jumps, i.e. the first instant after the gap (03:00 EDT, 07:00 UTC).
/// - **Repeated hour** (fall back; e.g. 01:30 in America/New_York on 2026-11-01): for `deliverAt`, the first
///   occurrence (01:30 EDT, 05:30 UTC); once that has passed by 15 minutes, the next day's. For the end of
///   quiet hours, the next occurrence after the due instant: a device held at 01:10 EST (the second pass) is
///   released at 01:30 EST, not a day later.
///
/// Foundation's `Calendar` is not used to resolve wall times: `date(bySettingHour:...matchingPolicy: .nextTime)`
/// returns nil for zones whose offset is not whole minutes (Asia/Kolkata before 1906), and `date(from:)` moves a
/// time in a gap forward by the gap's length (02:30 → 03:30) rather than to the jump.
public struct LocalDeliveryPlanner: Sendable {
    /// The length of a send window, in seconds (15 minutes); window starts are multiples of it since 1970 UTC.
    public static let windowSeconds = 900
    /// Distinct device time-zone strings remembered by ``zone(for:)``.
    public static let cacheLimit = 1024
    /// Instants further than this from 1970 (about 3,000 years) are returned unplanned, as `.at(now)`.
    static let supportedSeconds = 1e11

    /// The campaign's local-time rules.
    public let rules: LocalTimeDelivery
    /// `rules.fallbackTimeZone`, or UTC (GMT) when it is not a known zone identifier.
    public let fallbackZone: TimeZone
    private let cache = Cache()

    /// - Parameters:
    ///   - rules: the campaign's `delivery` local-time keys. The fallback zone is resolved here, once.
    public init(rules: LocalTimeDelivery) {
        self.rules = rules
        self.fallbackZone = TimeZone(identifier: rules.fallbackTimeZone) ?? .gmt
    }

    /// When the device may be sent (see the type's documentation for the exact rules).
    ///
    /// - Parameters:
    ///   - timeZone: the device's IANA zone (nil, empty or unknown → the fallback zone).
    ///   - now: the run's start (injected clock).
    /// - Returns: `.at(window start)`, or `.skipQuietHours` when quiet hours apply with `quiet_hours_action: skip`.
    public func plan(timeZone: String?, now: Instant) -> LocalDelivery {
        guard rules.isActive else { return .at(now) }
        let seconds = now.secondsSince1970
        guard seconds.isFinite, abs(seconds) < Self.supportedSeconds else { return .at(now) }
        let clock = WallClock(zone: zone(for: timeZone))

        var due = seconds
        if let deliverAt = rules.deliverAt {
            due = clock.due(at: deliverAt, now: seconds)
        }
        if let quietHours = rules.quietHours, Self.isQuiet(minuteOfDay: clock.minuteOfDay(at: due), quietHours) {
            switch rules.quietHoursAction {
            case .skip: return .skipQuietHours
            case .hold: due = clock.next(quietHours.end, after: due)
            }
        }
        let window = Double(Self.windowSeconds)
        let start = max((due / window).rounded(.down), (seconds / window).rounded(.down)) * window
        return .at(Instant(secondsSince1970: start))
    }

    /// Quiet hours by the device's own clock at `now`, checked again when a claimed recipient is about to be sent:
    /// ``plan(timeZone:now:)`` runs when the audience is read, and a slow paced run, a retry's backoff or a run resumed
    /// hours later can reach a device after its quiet hours began. One zone lookup answers both what to do now and,
    /// when the send may go, by when it must be on the wire.
    /// - Returns: nil without quiet hours (or for an instant out of range).
    public func quietHours(timeZone: String?, at now: Instant) -> QuietHoursCheck? {
        guard let quietHours = rules.quietHours else { return nil }
        let seconds = now.secondsSince1970
        guard seconds.isFinite, abs(seconds) < Self.supportedSeconds else { return nil }
        let clock = WallClock(zone: zone(for: timeZone))
        guard Self.isQuiet(minuteOfDay: clock.minuteOfDay(at: seconds), quietHours) else {
            return .openUntil(Instant(secondsSince1970: clock.next(quietHours.start, after: seconds)))
        }
        switch rules.quietHoursAction {
        case .skip: return .skip
        case .hold: return .holdUntil(Instant(secondsSince1970: clock.next(quietHours.end, after: seconds)))
        }
    }

    /// The zone of a device: `TimeZone(identifier:)`, or the fallback zone for nil, empty or unknown identifiers.
    ///
    /// Answers are memoised (up to ``cacheLimit`` distinct strings, unknown ones included) behind a `Mutex`; the
    /// planner is shared by concurrent senders, and copies of it share the memo.
    public func zone(for identifier: String?) -> TimeZone {
        guard let identifier, !identifier.isEmpty else { return fallbackZone }
        if let known = cache.storage.withLock({ $0[identifier] }) { return known }
        let resolved = TimeZone(identifier: identifier) ?? fallbackZone
        cache.storage.withLock { storage in
            if storage.count < Self.cacheLimit { storage[identifier] = resolved }
        }
        return resolved
    }

    /// How many zone strings ``zone(for:)`` remembers (for tests).
    var cachedZoneCount: Int { cache.storage.withLock { $0.count } }

    /// Whether a local minute of the day (0...1439) is in `[start, end)`, crossing midnight when `start > end`.
    static func isQuiet(minuteOfDay minute: Int, _ quietHours: QuietHours) -> Bool {
        let start = quietHours.start.minutesOfDay
        let end = quietHours.end.minutesOfDay
        if start <= end { return start <= minute && minute < end }
        return minute >= start || minute < end
    }

    /// The memo table (a class so copies of the planner share it).
    private final class Cache: Sendable {
        let storage = Mutex<[String: TimeZone]>([:])
    }
}

/// A zone's wall clock: converts between instants (seconds since 1970 UTC) and local days and times, using the
/// zone's whole-second UTC offset at each instant.
struct WallClock {
    private static let secondsPerDay = 86_400
    let zone: TimeZone

    /// The instants at which the wall clock shows one time on one local day.
    struct Occurrence: Equatable {
        /// The first instant; in a gap, the instant the clock jumps past it.
        var first: Int
        /// The second instant when the time is repeated (fall back), else nil.
        var repeated: Int?
    }

    /// The zone's offset from UTC, in seconds, at an instant.
    func offset(at instant: Int) -> Int {
        zone.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(instant)))
    }

    /// Seconds since 1970-01-01 00:00 of the local wall clock at an instant.
    func wallSeconds(at instant: Double) -> Double {
        instant + Double(offset(at: Int(instant.rounded(.down))))
    }

    /// The local day (days since 1970-01-01 on the wall clock) at an instant.
    func localDay(at instant: Double) -> Int {
        Int((wallSeconds(at: instant) / Double(Self.secondsPerDay)).rounded(.down))
    }

    /// The local minute of the day (0...1439) at an instant.
    func minuteOfDay(at instant: Double) -> Int {
        let wall = wallSeconds(at: instant)
        let day = Double(Self.secondsPerDay)
        let secondOfDay = wall - (wall / day).rounded(.down) * day
        return min(max(Int(secondOfDay / 60), 0), 24 * 60 - 1)
    }

    /// When the wall clock shows `time` on local `day`: the instant(s), or the jump when `time` falls in a gap.
    func occurrence(of time: LocalTime, onDay day: Int) -> Occurrence {
        let wall = day * Self.secondsPerDay + time.minutesOfDay * 60
        // Offsets a day either side bracket every offset an instant showing `wall` can have (|offset| < 1 day).
        let offsets = Set([-Self.secondsPerDay, 0, Self.secondsPerDay].map { offset(at: wall + $0) })
        let matches = offsets.map { wall - $0 }.filter { wall - offset(at: $0) == $0 }.sorted()
        if let first = matches.first {
            return Occurrence(first: first, repeated: matches.count > 1 ? matches.last : nil)
        }
        // A gap: `wall - max` is before the jump, `wall - min` after it; find the jump to the second.
        let lower = wall - (offsets.max() ?? 0)
        let upper = wall - (offsets.min() ?? 0)
        return Occurrence(first: firstChange(after: lower, notAfter: upper))
    }

    /// The first instant in `(lower, upper]` whose offset differs from `lower`'s (or `upper` if none does).
    private func firstChange(after lower: Int, notAfter upper: Int) -> Int {
        let before = offset(at: lower)
        guard lower < upper, offset(at: upper) != before else { return upper }
        var low = lower
        var high = upper
        while high - low > 1 {
            let middle = low + (high - low) / 2
            if offset(at: middle) == before { low = middle } else { high = middle }
        }
        return high
    }

    /// The `deliverAt` rule: the first occurrence of `time` that is at or before `now` by less than a window, else
    /// the first occurrence after `now` (each local day counts its first occurrence only).
    func due(at time: LocalTime, now: Double) -> Double {
        let today = localDay(at: now)
        let window = Double(LocalDeliveryPlanner.windowSeconds)
        let candidates = (-1...1).map { Double(occurrence(of: time, onDay: today + $0).first) }
        if let current = candidates.filter({ $0 <= now && now - $0 < window }).max() { return current }
        if let next = candidates.filter({ $0 > now }).min() { return next }
        return Double(occurrence(of: time, onDay: today + 2).first)
    }

    /// The `hold` rule: the earliest instant after `instant` at which the wall clock shows `time` (a repeated time
    /// counts both occurrences; a time in a gap counts the jump).
    func next(_ time: LocalTime, after instant: Double) -> Double {
        let day = localDay(at: instant)
        for ahead in 0...2 {
            let found = occurrence(of: time, onDay: day + ahead)
            for candidate in [found.first, found.repeated].compactMap({ $0 }) where Double(candidate) > instant {
                return Double(candidate)
            }
        }
        return Double(occurrence(of: time, onDay: day + 3).first)
    }
}
