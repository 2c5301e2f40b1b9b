import BugleCore
import BugleStore
import Foundation

/// `bugle runs --json`: the listed runs as one JSON array on stdout, newest first, for scripts and monitoring.
///
/// Each run: `{"run_id", "campaign", "kind", "notification_type", "status", "reason", "created_at", "started_at",
/// "finished_at", "recipients", "live_workers"}` (`kind`: `campaign`, or `test` for `bugle send-test`) — keys sorted, absent values `null`; `live_workers` is given for a
/// `running` run (leases of gone processes of this host not counted), so `0` means nobody sends it, and for a
/// `materializing` run (its segment's reader, 0 or 1), so `0` means nobody reads it.
enum RunsJSON {
    static func render(_ runs: [RunRecord], liveWorkers: [Int64: Int]) -> String {
        let objects: [[String: Any]] = runs.map { run in
            [
                "run_id": run.id,
                "campaign": run.campaign,
                "kind": run.kind,
                "notification_type": run.notificationType,
                "status": run.status.rawValue,
                "reason": (run.pauseReason ?? run.failureReason).map { $0 as Any } ?? NSNull(),
                "created_at": run.createdAt,
                "started_at": run.startedAt.map { $0 as Any } ?? NSNull(),
                "finished_at": run.finishedAt.map { $0 as Any } ?? NSNull(),
                "recipients": run.recipientsTotal.map { $0 as Any } ?? NSNull(),
                "live_workers": liveWorkers[run.id].map { $0 as Any } ?? NSNull(),
            ]
        }
        guard let data = try? JSONSerialization.data(withJSONObject: objects, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return "[]"
        }
        return String(decoding: data, as: UTF8.self)
    }
}
