import BugleCore
import Synchronization

/// Where each lane's due recipients begin, per run, learned from this process's own claims.
///
/// A claim reads a lane's due rows in `(next_attempt_at, seq)` order from `run_recipients_lane_ready_idx`. Rows it
/// claimed leave that index only when vacuum removes their old entries, so without a lower bound every claim first
/// steps over the entries of everything claimed since the last vacuum: a cost that grows through the run (10.5 ms of
/// a claim's start at 87% of a 10,000,000-recipient run, against 0.3 ms at 1%).
///
/// The bound is exact for rows due at once (`next_attempt_at = '-infinity'`, as materialization writes them): when a
/// claim's first pick of a lane is such a row with sequence number `s`, no row of that lane with `-infinity` and a
/// smaller `seq` is due and unclaimed, and none can become so again, because every path that makes a row due once more
/// (a retry, crash recovery, a lost claim handed back) also sets `next_attempt_at` to a real time. Later claims can
/// therefore start at `('-infinity', s)`. Rows with a real due time are never skipped (they sort after every
/// `-infinity` key), so they keep the unbounded scan.
final class ClaimFloors: Sendable {
    private struct Key: Hashable {
        var runID: Int64
        var lane: ProviderKind
    }

    /// The floor of a lane that has none: below every sequence number.
    static let none: Int64 = -1

    private let floors = Mutex<[Key: Int64]>([:])

    init() {}

    /// The lowest `seq` a claim of `lane` must read among rows due at once, or ``none``.
    func floor(runID: Int64, lane: ProviderKind) -> Int64 {
        floors.withLock { $0[Key(runID: runID, lane: lane)] ?? Self.none }
    }

    /// Records a claim's first pick of `lane` among rows due at once. Floors only rise: a claim starts at the floor it
    /// was given, so its first pick is never below it.
    func raise(runID: Int64, lane: ProviderKind, to seq: Int64) {
        floors.withLock { floors in
            let key = Key(runID: runID, lane: lane)
            floors[key] = max(floors[key] ?? Self.none, seq)
        }
    }
}
